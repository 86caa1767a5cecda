"""Test data the suite reads but does not ship (stdlib only): Debezium's binlog-connector DDL test
scripts, fetched from Maven Central and unpacked into the cache.

``io.debezium:debezium-connector-binlog:<version>:jar:tests`` holds ``ddl/*.sql``, the scripts
Debezium's MySQL/MariaDB connector tests run on their source (one database each, schema changes
of every kind). ``scripts/bootstrap`` runs this; tests find the unpacked scripts through
``tests/support/ddlscripts.py`` in ``<cache>/debezium-ddl/<version>/ddl``. Debian's
``mariadb-test-data`` (MariaDB's mysql-test suite with its ``std_data``, among it a binlog
written by MySQL 8.0) and ``percona-toolkit`` are installed by ``scripts/bootstrap`` with apt.
"""

from __future__ import annotations

import os
import shutil
import sys
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripts.svc import base  # noqa: E402

DEBEZIUM_VERSION = os.environ.get("SLUICE_DEBEZIUM_VERSION", "3.6.1.Final")
ARTIFACT = f"io.debezium:debezium-connector-binlog:{DEBEZIUM_VERSION}:jar:tests"


def debezium_ddl(ctx: base.Ctx) -> Path:
    """The unpacked ``ddl/`` folder of Debezium's test jar (fetched and unpacked once, atomically)."""
    dest = ctx.cache / "debezium-ddl" / DEBEZIUM_VERSION
    if (dest / ".complete").exists():
        return dest / "ddl"
    base.log(f"testdata: fetching {ARTIFACT} with Maven")
    work = dest.parent / f".{DEBEZIUM_VERSION}.partial-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    base.maven_fetch(ARTIFACT, work / "jar")
    jars = sorted((work / "jar").glob("*.jar"))
    if not jars:
        raise base.ServiceError(f"testdata: Maven fetched no jar for {ARTIFACT}")
    with zipfile.ZipFile(jars[0]) as z:
        members = [m for m in z.namelist() if m.startswith("ddl/")]
        if not members:
            raise base.ServiceError(f"testdata: {jars[0].name} has no ddl/ folder")
        z.extractall(work, members)
    shutil.rmtree(work / "jar")
    (work / ".complete").write_text(ARTIFACT + "\n")
    shutil.rmtree(dest, ignore_errors=True)
    work.rename(dest)
    return dest / "ddl"


if __name__ == "__main__":
    try:
        print(debezium_ddl(base.Ctx.load()))
    except base.ServiceError as e:
        sys.exit(f"bootstrap: {e}")
