"""Runs that fail because of a password (wrong target password, wrong source password, an
unreachable target whose URL carries a password) never print or store it: not on stdout or
stderr (DEBUG, text and JSON logs), not in the run log (runs.jsonl), the metrics files, Spark's
files or anything else the run writes. Passwords come from ``${VAR}``, ``passwordFile``,
``jdbc.passwordFile``, a JDBC URL parameter and the ``SLUICE_SOURCE_PASSWORD`` override."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest
import yaml

from tests.support import sysbench
from tests.support.deploy import REPO


@pytest.fixture()
def setup(tmp_path_factory, mariadb, mariadb_target, postgres):
    h = uuid.uuid4().hex[:8]
    work = tmp_path_factory.mktemp("leak")           # everything a run writes lands here (cwd, store, metrics)
    secrets_dir = tmp_path_factory.mktemp("secrets")  # the password files themselves are not scanned
    pw = {"maria": f"Tgt-{h}-M!", "pg": f"Pg-{h}-p@ss", "url": f"Url-{h}-x", "src": f"Src-{h}-s#"}
    (secrets_dir / "src").write_text(mariadb["password"] + "\n")
    (secrets_dir / "pg").write_text(pw["pg"] + "\n")
    db = f"leak_{h}"
    with sysbench.connect(mariadb) as c, c.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{db}`")
        cur.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v VARCHAR(20))")
    rdb = f"jdbc:mysql://{mariadb_target['host']}:{mariadb_target['port']}/{db}"

    def group(gid: str, props: dict) -> dict:
        return {"groupId": gid, "mappings": ["m.yml"],
                "outerAdapters": [{"name": "rdb", "key": "t", "properties": props}]}

    cfg = {
        "source": {"name": db, "host": mariadb["host"], "port": mariadb["port"], "user": mariadb["user"],
                   "passwordFile": str(secrets_dir / "src"), "serverId": 7500 + os.getpid() % 400,
                   "filter": {"include": rf"{db}\..*"}},
        "store": {"path": "store"},
        "groups": [
            group("maria", {"jdbc.url": rdb, "jdbc.username": "root", "jdbc.password": "${SLUICE_TEST_TGT_PW}"}),
            group("pg", {"jdbc.url": f"jdbc:postgresql://{postgres['host']}:{postgres['port']}/{postgres['database']}",
                         "jdbc.username": postgres["user"], "jdbc.passwordFile": str(secrets_dir / "pg")}),
            group("down", {"jdbc.url": f"jdbc:mysql://127.0.0.1:1/{db}?user=root&password={quote(pw['url'])}"}),
        ],
        "spark": {"master": "local[1]", "partitions": 1},
        "metrics": {"textfile": "metrics/sluice.prom", "json": "metrics/sluice.json"},
    }
    (work / "m.yml").write_text(yaml.safe_dump({"outerAdapterKey": "t", "dbMapping": {
        "database": db, "table": "t", "targetTable": "t", "targetPk": {"id": "id"}, "mapAll": True}}))
    (work / "sluice.yml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    yield {"work": work, "pw": pw, "db": db}
    sysbench.drop_database(mariadb, db)


def _run(work: Path, pw: dict, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    e = {**os.environ, "PYTHONPATH": str(REPO), "PYSPARK_PYTHON": sys.executable, "SLUICE_LOG_LEVEL": "DEBUG",
         "SLUICE_TEST_TGT_PW": pw["maria"], **(env or {})}
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *args], cwd=work, env=e, text=True,
                          capture_output=True, timeout=900)


def _leaks(text: str, secrets: list[str]) -> list[str]:
    forms = {f for s in secrets for f in (s, quote(s), quote(s, safe=""), s.encode().hex())}
    return sorted(f for f in forms if f in text)


def test_failed_runs_never_show_a_password(setup, mariadb):
    work, pw = setup["work"], setup["pw"]
    secrets = [*pw.values(), mariadb["password"]]
    cfg = str(work / "sluice.yml")
    outputs = []
    for args, env in [
        (("capture", "--config", cfg, "--once"), {"SLUICE_SOURCE_PASSWORD": pw["src"]}),   # wrong source password
        (("capture", "--config", cfg, "--once"), None),                                    # targets not askable
        (("capture", "--config", cfg, "--once", "--from", "now"), None),                   # right one: a store
        (("sync", "--config", cfg, "--group", "maria"), None),                              # wrong target password
        (("--log-json", "sync", "--config", cfg, "--group", "pg"), None),                  # wrong PostgreSQL password
        (("sync", "--config", cfg, "--group", "down", "--json"), None),                    # unreachable target
        (("run", "--config", cfg, "--json"), None),                                        # recorded in runs.jsonl
        (("status", "--config", cfg, "--json"), None),
    ]:
        proc = _run(work, pw, *args, env=env)
        outputs.append((args, proc))
        text = proc.stdout + proc.stderr
        assert not _leaks(text, secrets), (args, _leaks(text, secrets), text[-3000:])
        assert "Traceback" not in text, (args, text[-3000:])
    codes = {args[1] if args[0].startswith("--") else args[0]: p.returncode for args, p in outputs}
    assert all(p.returncode != 0 for _, p in outputs[:2]) and outputs[2][1].returncode == 0, outputs[0][1].stderr
    assert "cannot be told" in outputs[1][1].stderr, outputs[1][1].stderr[-3000:]
    assert all(p.returncode != 0 for args, p in outputs[3:7]), codes
    assert "Access denied" in outputs[3][1].stderr or "access denied" in outputs[3][1].stderr.lower()
    assert "password authentication failed" in outputs[4][1].stderr
    runs = list((work / "store").rglob("runs.jsonl"))
    assert runs and runs[0].read_text().strip(), "the failed run was recorded"
    assert (work / "metrics" / "sluice.json").exists()
    scanned = 0
    for f in work.rglob("*"):
        if f.is_file() and f.name != "sluice.yml":  # the config holds the URL's password by the operator's choice
            data = f.read_bytes().decode("utf-8", "replace")
            assert not _leaks(data, secrets), (f, _leaks(data, secrets))
            scanned += 1
    assert scanned >= 5
    assert _leaks((work / "sluice.yml").read_text(), [pw["url"]]), "the scan finds a password where one is"
