"""Dead-letter end to end against the real target MariaDB (docs/deadletter.md).

The target column is VARCHAR(5), narrower than some source values; Sluice's strict sql_mode
makes "data too long" (1406) a terminal row error. With ``deadLetter`` off the batch stays
unacked and sync exits 1; with it on the good rows land, the bad rows (and the later change of
a bad row's key) go to the dead-letter store, are counted in the summary, and the batch is
acked; a replay before the fix keeps them with the new error, and after widening the column the
replay applies them and the target equals the source.
"""

from __future__ import annotations

import json
import uuid

import pytest
import yaml

from tests.support import sysbench
from tests.support.deploy import rdb_adapter, sluice, write_deployment


def _exec(info, *stmts, db=None):
    with sysbench.connect(info, db) as c, c.cursor() as cur:
        for s in stmts:
            cur.execute(s)
        return cur.fetchall()


@pytest.fixture()
def dbs(mariadb, mariadb_target):
    db = f"dlq_{uuid.uuid4().hex[:6]}"
    sysbench.create_database(mariadb, db)
    sysbench.create_database(mariadb_target, db)
    yield db
    sysbench.drop_database(mariadb, db)
    sysbench.drop_database(mariadb_target, db)


def _sync(cfg, check=True):
    proc = sluice("sync", "--config", str(cfg), "--group", "g1", "--json", check=check)
    return proc, (json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else None)


def _cursor(cfg) -> int:
    st = json.loads(sluice("store", "status", "--config", str(cfg), "--json").stdout)
    return st["groups"].get("g1", {}).get("cursor", 0)


def test_dead_letter_isolates_bad_rows_and_replay_applies_them(tmp_path, mariadb, mariadb_target, dbs):
    db = dbs
    _exec(mariadb, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))", db=db)
    _exec(mariadb_target, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(5))", db=db)
    mapping = {"groupId": "g1", "outerAdapterKey": "t",
               "dbMapping": {"database": db, "table": "t", "targetTable": "t", "targetPk": {"id": None},
                             "mapAll": True, "commitBatch": 3}}
    cfg = write_deployment(tmp_path, mariadb, name=db, include=rf"{db}\..*",
                           groups=[{"groupId": "g1", "outerAdapters": [rdb_adapter(mariadb_target, "t", db)],
                                    "mappings": ["mappings/*.yml"]}], mappings={"m.yml": mapping}, partitions=2)
    sluice("capture", "--config", str(cfg), "--once")
    _exec(mariadb,
          "INSERT INTO t VALUES (1,'a'),(2,'b'),(3,'much too long'),(4,'d'),(5,'e'),(6,'also too long'),"
          "(7,'g'),(8,'h')",
          "UPDATE t SET v = 'bb' WHERE id = 2",
          "UPDATE t SET v = 'c' WHERE id = 3",       # short, but waits behind the dead-lettered insert
          "DELETE FROM t WHERE id = 5",
          "INSERT INTO t VALUES (9, 'i')", db=db)
    sluice("capture", "--config", str(cfg), "--once")

    # off (the default): the run fails, nothing is acked
    proc, _ = _sync(cfg, check=False)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "1406" in proc.stderr and "Data too long" in proc.stderr
    assert _cursor(cfg) == 0

    # on: good rows land, bad rows are dead-lettered and counted, the batches are acked
    mapping["deadLetter"] = True
    (tmp_path / "mappings" / "m.yml").write_text(yaml.safe_dump(mapping, sort_keys=False))
    _, summary = _sync(cfg)
    assert summary["deadLettered"] == {"mappings/m.yml": {f"{db}.t": 3}}
    assert summary["dead_lettered"] == {f"{db}.t": 3}
    last = json.loads(sluice("store", "status", "--config", str(cfg), "--json").stdout)["last_batch"]
    assert _cursor(cfg) == summary["cursor"] == last and summary["batches"] == last  # every batch, one round
    rows = _exec(mariadb_target, "SELECT id, v FROM t ORDER BY id", db=db)
    assert rows == ((1, "a"), (2, "bb"), (4, "d"), (7, "g"), (8, "h"), (9, "i"))
    listed = json.loads(sluice("deadletter", "list", "--config", str(cfg), "--group", "g1", "--json").stdout)
    assert [(e["key"], e["kind"], e["blocked"]) for e in listed] == [
        ("id='3'", "INSERT", False), ("id='6'", "INSERT", False), ("id='3'", "UPDATE", True)]
    assert "1406" in listed[0]["error"]
    assert len(list((tmp_path / "store" / db / "deadletter" / "g1").glob("*/COMMITTED.json"))) == 1  # the round

    # replay before the fix: everything stays, with the new error, exit 1
    proc = sluice("deadletter", "replay", "--config", str(cfg), "--group", "g1", check=False)
    assert proc.returncode == 1 and "still failing 3" in proc.stdout, proc.stdout + proc.stderr
    assert "earlier change of this key still fails" in proc.stdout

    # widen the column, replay: the target equals the source, the store is empty
    _exec(mariadb_target, "ALTER TABLE t MODIFY v VARCHAR(20)", db=db)
    out = sluice("deadletter", "replay", "--config", str(cfg), "--group", "g1", "--mapping", "mappings/m.yml",
                 "--json").stdout
    assert json.loads(out.strip().splitlines()[-1])["applied"] == 3
    src = _exec(mariadb, "SELECT id, v FROM t ORDER BY id", db=db)
    assert _exec(mariadb_target, "SELECT id, v FROM t ORDER BY id", db=db) == src
    assert "0 dead-lettered rows" in sluice("deadletter", "list", "--config", str(cfg), "--group", "g1").stdout
