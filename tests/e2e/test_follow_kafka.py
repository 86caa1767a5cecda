"""``sluice run --follow`` on the Kafka store (docs/kafka.md): the follower's Spark session must
carry the store's jars (Spark's Kafka connector), as plain ``run`` and ``sync`` do.

A follower started on a Kafka-store deployment applies what sysbench writes while it runs: the
target equals the source, the group's cursor is the store's newest batch, and its rounds are
recorded ``ok``; SIGTERM between rounds ends it, exit 130.
"""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest

from pipeline.config import load_config
from pipeline.state.runlog import RunLog
from tests.support import sysbench
from tests.support.compare import diff_databases
from tests.support.deploy import mirror_deployment, sluice
from tests.support.faults import Background


@pytest.fixture(scope="module")
def kdep(tmp_path_factory, mariadb, mariadb_target, kafka):
    d = mirror_deployment(tmp_path_factory.mktemp("follow-kafka"), mariadb, mariadb_target, "fk", batch_rows=500,
                          kafka=kafka)
    cfg, db, tdb, tmp = d["cfg"], d["db"], d["tdb"], d["tmp"]
    sysbench.create_database(mariadb, db)
    yield {"cfg": cfg, "db": db, "tdb": tdb, "tmp": tmp, "kafka": kafka}
    sysbench.drop_database(mariadb, db)
    sysbench.drop_database(mariadb_target, tdb)


def _status(cfg) -> dict:
    import json

    return json.loads(sluice("store", "status", "--config", str(cfg), "--json").stdout)


def _equal(mariadb, mariadb_target, db: str, tdb: str) -> bool:
    try:
        diff = diff_databases(mariadb, db, mariadb_target, tdb)
    except Exception:  # noqa: BLE001 - a table the target does not have yet
        return False
    return bool(diff) and all(v == 0 for v in diff.values())


def test_follow_applies_through_kafka(kdep, mariadb, mariadb_target):
    d = kdep
    cmd = [sys.executable, "-m", "pipeline.cli", "--log-json", "run", "--config", str(d["cfg"]), "--follow",
           "--interval", "0.5", "--json"]
    f = Background(cmd, d["tmp"] / "follow.log", dict(os.environ, PYSPARK_PYTHON=sys.executable))
    try:
        sysbench.prepare(mariadb, d["db"], tables=2, table_size=500, create=False)
        sysbench.run(mariadb, d["db"], seconds=3, threads=2, tables=2, table_size=500)
        runs = RunLog(load_config(str(d["cfg"])).store_dir())
        deadline = time.monotonic() + 300
        while True:
            if f.proc.poll() is not None:
                raise AssertionError(f"the follower ended ({f.proc.returncode}):\n{f.output()}")
            failed = [r["errors"] for r in runs.runs() if r.get("status") == "failed"]
            assert not failed, failed
            st = _status(d["cfg"])
            g = st["groups"].get("g1") or {}
            if g.get("pending_rows") == 0 and g.get("cursor") and _equal(mariadb, mariadb_target, d["db"], d["tdb"]):
                break
            assert time.monotonic() < deadline, f"the follower did not catch up in 300 s:\n{f.output()}"
            time.sleep(1)
        follow = [r for r in runs.runs() if r.get("follow")]
        assert any(r["status"] == "ok" and (r["sync"].get("g1") or {}).get("rows") for r in follow), follow
        os.kill(f.proc.pid, signal.SIGTERM)
        assert f.wait(60) == 130, f.output()
    finally:
        f.kill()
