"""The crash window between the last partition's commit and the ack (invariant 1), on the file
store and on the Kafka store.

A sync takes the pending batches in two rounds. Round 1 is applied and acked; round 2 is applied
(every partition committed) and its ack -- the file store's cursor writes, the Kafka store's one
offset commit -- has not happened. ``kill -9`` of the sync's whole process group exactly there
(the driver's hook ``SLUICE_TEST_PAUSE_BEFORE_ACK``, docs/job.md) must leave the cursor at round
1's last batch (round 1's ack was durable, round 2's never happened); the rerun must take exactly
the batches after that cursor (nothing acked twice, nothing skipped), replay round 2 over the
target that already holds it, and leave the target equal to the source, row by row.

Small on purpose (two tables of a few dozen rows, batches of ~10 rows, no DDL in the rounds):
each store costs two Spark starts, the killed sync and its rerun.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import uuid
from pathlib import Path

import pytest

from tests.support import sysbench
from tests.support.compare import diff_databases
from tests.support.deploy import kafka_store, rdb_adapter, sluice, write_deployment
from tests.support.faults import Background

TABLE = "(id INT PRIMARY KEY, k INT NOT NULL, c VARCHAR(40) NOT NULL)"


def _deploy(tmp: Path, source: dict, target: dict, kafka: dict | None) -> dict:
    """Two tables on both sides (created before the store starts: the rounds hold no DDL), the
    store, then 12 small transactions of inserts, updates and deletes (about a dozen batches)."""
    db = f"ack_{uuid.uuid4().hex[:6]}"
    tdb = f"{db}_copy"
    for info, name in ((source, db), (target, tdb)):
        sysbench.create_database(info, name)
        with sysbench.connect(info, name) as c, c.cursor() as cur:
            for t in ("t1", "t2"):
                cur.execute(f"CREATE TABLE {t} {TABLE}")
    mapping = {"dataSourceKey": "defaultDS", "destination": db, "groupId": "g1", "outerAdapterKey": "t",
               "dbMapping": {"mirrorDb": True, "database": db, "targetDb": tdb, "commitBatch": 10}}
    store = {} if kafka is None else {"kafka": kafka_store(kafka, db, partitionsNum=2,
                                                           partitionHash=rf"{db}\..*:$pk$")}
    cfg = write_deployment(tmp, source, name=db, include=rf"{db}\..*", partitions=2, batch_rows=10,
                           groups=[{"groupId": "g1", "outerAdapters": [rdb_adapter(target, "t", tdb)],
                                    "mappings": ["mappings/m.yml"]}], mappings={"m.yml": mapping}, round_rows=0,
                           **store)  # rounds of exactly --max-batches
    sluice("capture", "--config", str(cfg), "--once")  # the store starts here
    with sysbench.connect(source, db) as c, c.cursor() as cur:
        for i in range(12):
            t = f"t{i % 2 + 1}"
            base = 10 * (i // 2)
            cur.executemany(f"INSERT INTO {t} VALUES (%s, %s, %s)",
                            [(base + j, j, f"row-{i}-{j}") for j in range(8)])
            cur.execute(f"UPDATE {t} SET k = k + 1, c = CONCAT('upd-', {i}, '-', id) WHERE id % 3 = {i % 3}")
            cur.execute(f"DELETE FROM {t} WHERE id = {base + 7 - i % 3}")
            c.commit()
    sluice("capture", "--config", str(cfg), "--once")
    return {"cfg": cfg, "db": db, "tdb": tdb}


@pytest.fixture(params=["files", "kafka"])
def dep(request, tmp_path, mariadb, mariadb_target):
    kafka = request.getfixturevalue("kafka") if request.param == "kafka" else None
    d = _deploy(tmp_path, mariadb, mariadb_target, kafka)
    yield d
    sysbench.drop_database(mariadb, d["db"])
    sysbench.drop_database(mariadb_target, d["tdb"])


def _status(cfg: Path) -> dict:
    return json.loads(sluice("store", "status", "--config", str(cfg), "--json").stdout)


def _cursor(cfg: Path) -> int:
    return _status(cfg)["groups"].get("g1", {}).get("cursor", 0)


def _sync(d: dict, max_batches: int) -> list[str]:
    return [sys.executable, "-m", "pipeline.cli", "sync", "--config", str(d["cfg"]), "--group", "g1",
            "--max-batches", str(max_batches), "--json"]


def _rounds(log: str) -> list[list[int]]:
    """The rounds a sync took, as batch ids, from its log."""
    return [list(range(int(a), int(b) + 1)) for a, b in re.findall(r"event='round'.*?batches='(\d+)\.\.(\d+)'", log)]


def test_kill9_before_the_ack_then_replay_converges(dep, tmp_path, mariadb, mariadb_target):
    d = dep
    st = _status(d["cfg"])
    before, last = st["groups"].get("g1", {}).get("cursor", 0), st["last_batch"]
    assert last - before >= 4, f"only {last - before} batches pending: two rounds of several are needed"
    half = (last - before + 1) // 2
    first, second = list(range(before + 1, before + half + 1)), list(range(before + half + 1, last + 1))

    marker = tmp_path / "before-ack"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SLUICE_TEST_PAUSE_BEFORE_ACK="2",
               SLUICE_TEST_PAUSE_MARKER=str(marker))
    run = Background(_sync(d, half), tmp_path / "sync-killed.log", env)
    try:
        run.wait_for(marker, 600)
        at = json.loads(marker.read_text())
        paused = _cursor(d["cfg"])
    finally:
        run.kill()  # SIGKILL to the session: the driver, its JVM and Python workers
    assert run.proc.returncode == -signal.SIGKILL, run.output()
    assert _rounds(run.output(100000)) == [first, second], run.output()
    assert at["round"] == 2 and at["batches"] == second, at
    assert paused == first[-1] == _cursor(d["cfg"]), "round 1 not acked, or round 2 acked before the hook"

    rerun = sluice("sync", "--config", str(d["cfg"]), "--group", "g1", "--max-batches", "100000", "--json")
    assert _rounds(rerun.stderr) == [second], f"the rerun took {_rounds(rerun.stderr)} after cursor {first[-1]}"
    summary = json.loads([ln for ln in rerun.stdout.splitlines() if ln.startswith("{")][-1])
    assert summary["batches"] == len(second) and summary["cursor"] == last == _cursor(d["cfg"]), summary
    diff = diff_databases(mariadb, d["db"], mariadb_target, d["tdb"])
    assert diff and all(v == 0 for v in diff.values()), diff
