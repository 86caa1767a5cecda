"""A new user's first hour against the real MariaDB source and target, through the real CLI
(issue 22): every mistake is one message naming the file, key, table or path, with the exit code
of docs/operations.md, found before Spark starts where it can be; nothing is dropped silently."""

from __future__ import annotations

import json
import time
import uuid

import pymysql
import pytest
import yaml

from pipeline.store.files import BatchStore
from sluice_common import exitcodes
from tests.support.cli import cli, one_message
from tests.support.deploy import rdb_adapter, write_deployment

SPARK_STARTED = ("log4j", "SparkContext", "NativeCodeLoader")


def _sql(info: dict, *stmts: str) -> list:
    conn = pymysql.connect(host=info["host"], port=info["port"], user=info["user"], password=info["password"],
                           autocommit=True)
    try:
        with conn.cursor() as cur:
            for s in stmts:
                cur.execute(s)
            return list(cur.fetchall())
    finally:
        conn.close()


def _no_spark(proc) -> None:
    assert not any(w in proc.stderr for w in SPARK_STARTED), "Spark was started:\n" + proc.stderr[-3000:]


@pytest.fixture
def dep(tmp_path, mariadb, mariadb_target):
    """Source ``db.t (a INT, b VARCHAR(20))`` without a key, mapped with ``targetPk: {a: a}`` to a
    target table keyed on ``a``; the store starts before any row is written."""
    db = f"first_{uuid.uuid4().hex[:6]}"
    _sql(mariadb, f"CREATE DATABASE `{db}`", f"CREATE TABLE `{db}`.t (a INT NOT NULL, b VARCHAR(20))")
    _sql(mariadb_target, f"CREATE DATABASE `{db}_t`", f"CREATE TABLE `{db}_t`.t (a INT PRIMARY KEY, b VARCHAR(5))")
    mapping = {"dataSourceKey": "defaultDS", "outerAdapterKey": "t",
               "dbMapping": {"database": db, "table": "t", "targetTable": "t", "targetPk": {"a": "a"},
                             "mapAll": True}}
    cfg = write_deployment(tmp_path, mariadb, name=db, include=rf"{db}\..*", master="local[1]", partitions=1,
                           groups=[{"groupId": "g1", "outerAdapters": [rdb_adapter(mariadb_target, "t", f"{db}_t")],
                                    "mappings": ["mappings/*.yml"]}], mappings={"t.yml": mapping})
    assert cli("capture", "--config", str(cfg), "--once").returncode == 0
    yield {"cfg": cfg, "db": db, "tdb": f"{db}_t", "mapping": tmp_path / "mappings" / "t.yml", "tmp": tmp_path,
           "store": tmp_path / "store" / db}
    _sql(mariadb, f"DROP DATABASE IF EXISTS `{db}`")
    _sql(mariadb_target, f"DROP DATABASE IF EXISTS `{db}_t`")


def _capture(d: dict) -> None:
    proc = cli("capture", "--config", str(d["cfg"]), "--once")
    assert proc.returncode == 0, proc.stderr[-3000:]


def _edit_mapping(d: dict, **db_mapping) -> None:
    raw = yaml.safe_load(d["mapping"].read_text())
    raw["dbMapping"].update(db_mapping)
    d["mapping"].write_text(yaml.safe_dump(raw, sort_keys=False))


def test_a_key_that_is_not_unique_at_the_source_is_refused_then_allowed_and_misses_are_counted(
        dep, mariadb, mariadb_target):
    d, cfg = dep, str(dep["cfg"])
    _sql(mariadb, f"INSERT INTO `{d['db']}`.t VALUES (1, 'x'), (1, 'y'), (2, 'z')")
    _capture(d)
    keys = "dbMapping.targetPk: source column(s) (a) are not a primary key or unique NOT NULL key of the source " \
           f"table {d['db']}.t (its keys: none)"

    t0 = time.monotonic()
    proc = cli("sync", "--config", cfg, "--group", "g1")
    one_message(proc, exitcodes.CONFIG, f"sluice: error: mappings/t.yml: {keys}", "allowDuplicateKeys: true")
    _no_spark(proc)
    assert time.monotonic() - t0 < 60

    proc = cli("run", "--config", cfg, "--json")
    assert proc.returncode == exitcodes.CONFIG and "Traceback" not in proc.stderr
    _no_spark(proc)
    rec = json.loads(proc.stdout.strip().splitlines()[-1])
    assert rec["status"] == "invalid" and rec["errors"][0]["stage"] == "config" and keys in rec["errors"][0]["message"]

    proc = cli("verify", "--config", cfg)
    assert proc.returncode == exitcodes.CONFIG and "Traceback" not in proc.stderr + proc.stdout
    assert proc.stdout.startswith(f"ERROR {d['db']}.t") and keys in proc.stdout and "DIFF" not in proc.stdout
    assert _sql(mariadb_target, f"SELECT COUNT(*) FROM `{d['tdb']}`.t") == [(0,)]  # nothing was applied

    # said on purpose: applied, and what could not be applied is counted, not "updated 1"
    _edit_mapping(d, allowDuplicateKeys=True)
    _sql(mariadb, f"DELETE FROM `{d['db']}`.t WHERE b = 'x'", f"UPDATE `{d['db']}`.t SET b = 'w' WHERE b = 'y'")
    _capture(d)
    proc = cli("sync", "--config", cfg, "--group", "g1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "inserted 2, updated 0, deleted 1, skipped as applied already 1, matched no target row 1" in proc.stdout
    assert f"1 UPDATE/DELETE of {d['db']}.t matched no target row" in proc.stdout

    proc = cli("verify", "--config", cfg)  # the source has (1, w) and (2, z); the target only (2, z)
    assert proc.returncode == exitcodes.DIFFERENT, proc.stdout + proc.stderr
    assert "DIFF" in proc.stdout and "DIFFERENCES (exit 5)" in proc.stdout


def test_verify_errors_read_as_errors(dep, mariadb_target):
    d = dep
    _edit_mapping(d, targetPk={"a": "a"}, allowDuplicateKeys=True)
    raw = yaml.safe_load(d["cfg"].read_text())
    raw["groups"][0]["outerAdapters"][0]["properties"]["jdbc.password"] = "wrong-pw-22"
    bad = d["tmp"] / "bad-password.yml"
    bad.write_text(yaml.safe_dump(raw, sort_keys=False))
    proc = cli("verify", "--config", str(bad))
    assert proc.returncode == exitcodes.FAILED, proc.stdout + proc.stderr
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out and "exc_info" not in out and "DIFF" not in out and "wrong-pw-22" not in out
    assert f"ERROR {d['db']}.t -> ? (mappings/t.yml): could not compare: cannot connect to" in proc.stdout
    assert "Access denied" in proc.stdout and "ERRORS (exit 1)" in proc.stdout

    _sql(mariadb_target, f"DROP TABLE `{d['tdb']}`.t")
    proc = cli("verify", "--config", str(d["cfg"]), "--json")
    assert proc.returncode == exitcodes.CONFIG
    doc = json.loads(proc.stdout)
    assert doc["exit"] == 2 and doc["errors"] == 1 and doc["differing_rows"] == 0
    err = doc["tables"][0]["error"]
    assert err.startswith("mappings/t.yml: dbMapping.targetTable: target table") and "does not exist" in err


def test_a_second_run_or_sync_is_refused_before_spark(dep, mariadb):
    d, cfg = dep, str(dep["cfg"])
    _edit_mapping(d, allowDuplicateKeys=True)
    _sql(mariadb, f"INSERT INTO `{d['db']}`.t VALUES (5, 'a')")
    _capture(d)
    with BatchStore(d["store"], create=False).apply_lock("g1"):  # another job applies g1
        t0 = time.monotonic()
        proc = cli("run", "--config", cfg)
        assert proc.returncode == exitcodes.LOCKED, proc.stdout + proc.stderr
        _no_spark(proc)
        assert "sync g1: not run: another job applies this group (locked)" in proc.stdout
        assert "FAILED" not in proc.stdout and "None" not in proc.stdout
        proc = cli("sync", "--config", cfg, "--group", "g1")
        one_message(proc, exitcodes.LOCKED, "the apply (g1) lock", "is held by pid")
        _no_spark(proc)
        assert time.monotonic() - t0 < 60


def test_sync_goes_on_without_the_source_when_the_mappings_were_checked(dep, mariadb, mariadb_target):
    """docs/operations.md, what needs the source: a wrong source.password (or the source down)
    does not stop applying what is stored, once the mapping passed the check unchanged."""
    d, cfg = dep, str(dep["cfg"])
    _sql(mariadb, f"ALTER TABLE `{d['db']}`.t ADD PRIMARY KEY (a)")
    _capture(d)
    wrong = {"SLUICE_SOURCE_PASSWORD": "not-the-password"}

    proc = cli("sync", "--config", cfg, "--group", "g1", env=wrong)  # never checked: waits for the source
    one_message(proc, exitcodes.FAILED, "cannot connect to the source", "mappings/t.yml were not checked")
    _no_spark(proc)
    assert "not-the-password" not in proc.stdout + proc.stderr

    assert cli("sync", "--config", cfg, "--group", "g1").returncode == 0  # checked (nothing pending: no Spark)
    _sql(mariadb, f"INSERT INTO `{d['db']}`.t VALUES (1, 'a'), (2, 'b')")
    _capture(d)
    proc = cli("run", "--config", cfg, "--no-capture", env=wrong)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "the source is unreachable: applying the stored batches" in proc.stderr
    assert _sql(mariadb_target, f"SELECT a, b FROM `{d['tdb']}`.t ORDER BY a") == [(1, "a"), (2, "b")]

    _sql(mariadb, f"INSERT INTO `{d['db']}`.t VALUES (3, 'c')")
    _capture(d)
    proc = cli("run", "--config", cfg, env=wrong)  # capture fails; the group still applies
    assert proc.returncode == exitcodes.FAILED and "Traceback" not in proc.stdout + proc.stderr
    assert "error (capture): cannot connect to the source" in proc.stdout
    assert "lag: capture lag unknown (cannot connect to the source" in proc.stdout and "None" not in proc.stdout

    _edit_mapping(d, targetColumns={"b": None}, mapAll=False)  # changed since the check: waits again
    proc = cli("sync", "--config", cfg, "--group", "g1", env=wrong)
    one_message(proc, exitcodes.FAILED, "mappings/t.yml were not checked against the source in their present form")


def test_a_row_the_target_refuses_names_the_dead_letter_option(dep, mariadb):
    d = dep
    _edit_mapping(d, allowDuplicateKeys=True)
    _sql(mariadb, f"INSERT INTO `{d['db']}`.t VALUES (1, 'far too long')")
    _capture(d)
    proc = cli("sync", "--config", str(d["cfg"]), "--group", "g1")
    one_message(proc, exitcodes.FAILED, f"table {d['db']}.t key {{a='1'}}", "Data too long for column 'b'",
                "or set deadLetter: true in the mapping", "docs/deadletter.md")
    assert proc.stderr.count("fix:") == 1
