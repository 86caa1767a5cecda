"""Debezium's binlog-connector DDL test scripts (``ddl/*.sql`` of
``io.debezium:debezium-connector-binlog:<version>:jar:tests``), unpacked into the cache by
``scripts/bootstrap`` (scripts/svc/testdata.py), and a way to run one on a server of the suite.

    for path in debezium_scripts():                 # every script, sorted by name
        run_script(mariadb, path, database="dbz")   # as the command-line client runs it
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.prereq import missing

REPO = Path(__file__).resolve().parents[2]


def _scripts_svc():
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from scripts.svc import base, testdata

    return base, testdata


def ddl_dir() -> Path:
    """The unpacked ``ddl/`` folder (fetched now if bootstrap did not); a fetch that fails fails
    the test under CI and skips it elsewhere."""
    base, testdata = _scripts_svc()
    cache = Path(os.environ.get("SLUICE_CACHE", REPO / ".sluice" / "cache"))
    d = cache / "debezium-ddl" / testdata.DEBEZIUM_VERSION
    if (d / ".complete").exists():
        return d / "ddl"
    try:
        return testdata.debezium_ddl(base.Ctx.load())
    except base.ServiceError as e:
        msg = f"Debezium's DDL test scripts are not available (scripts/bootstrap fetches them): {e}"
        missing(msg)


def debezium_scripts(pattern: str = "*.sql") -> list[Path]:
    """The scripts whose names match ``pattern`` (e.g. ``mysql-dbz-*.ddl``), sorted."""
    return sorted(ddl_dir().glob(pattern))


def client(info: dict[str, Any], database: str = "") -> list[str]:
    """The command-line client of the server ``info`` describes (the ``mariadb`` client for
    MariaDB, the sid tree's ``mysql`` for the MySQL services), reading SQL from stdin; the password
    goes through ``MYSQL_PWD`` (see :func:`run_script`)."""
    if info.get("flavor") == "mysql":
        from scripts.svc import chroot

        root = Path(info["chroot"])
        return chroot.command(root, "usr/bin/mysql", "--no-defaults", "--protocol=tcp", "-h", info["host"],
                              "-P", str(info["port"]), "-u", info["user"],
                              f"--character-sets-dir={root}/usr/share/mysql/charsets",
                              *([database] if database else []))
    return ["mariadb", "--protocol=tcp", "-h", info["host"], "-P", str(info["port"]), "-u", info["user"],
            *([database] if database else [])]


def run_script(info: dict[str, Any], path: Path, database: str = "") -> str:
    """Run one script as the command-line client does (``DELIMITER``, comments, ``USE``); its output."""
    _scripts_svc()
    env = dict(os.environ, MYSQL_PWD=info["password"])
    proc = subprocess.run(client(info, database), input=path.read_text(), env=env, text=True,
                          capture_output=True, timeout=600)
    if proc.returncode != 0:
        raise AssertionError(f"{path.name} failed on {info['host']}:{info['port']}: {proc.stderr[-2000:]}")
    return proc.stdout
