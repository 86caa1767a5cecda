"""``sluice run --follow`` makes progress under repeated faults (docs/operations.md, bounded rounds).

A backlog of 400k row changes (sysbench prepare, 4 x 50k rows, then every row updated once; a
rate-limited OLTP writer keeps going) is applied by a follower while faults strike every N
seconds, each after the one before it finished: kill -9 of the follower's process
group, a SIGTERM, a restart of the target, a concurrent cron ``sluice run``; on the Kafka store:
kill -9, a broker restart, a SIGTERM. A supervisor's part is played by the test: a follower that
ended is started again at once. Between any two faults the group's cursor must advance while
rows are pending (without bounded rounds the first round of every restarted follower took the
whole backlog and was killed before its one ack). Afterwards the target equals the source, byte
for byte.

N is 1.5 times a calibration plus 5 s (at least ``SLUICE_FAULT_EVERY``, default 10): a new
follower that applies one batch (10k rows of a table of its own, before the backlog) and stops
(``--rounds 1``), timed from process start to exit, so N scales with the machine's speed and load:
a restarted follower has the time to start and apply a round of about one batch, and not the
time to apply the whole backlog in one round (the 40 batches the old rounds of up to 50 batches
took at once).

``SLUICE_FAULT_ROUNDS=N`` repeats the fault list N times (default 1; a longer soak).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import uuid

import pytest
import yaml

from pipeline.config import load_config
from pipeline.store import open_store
from tests.support import sysbench
from tests.support.compare import diff_databases
from tests.support.deploy import kafka_store, rdb_adapter, sluice, write_deployment
from tests.support.faults import Background, FollowerProcess, fault_schedule, service, stalled

EVERY = float(os.environ.get("SLUICE_FAULT_EVERY", "10"))
REPEAT = int(os.environ.get("SLUICE_FAULT_ROUNDS", "1"))
TABLES, SIZE, BATCH = 4, 50_000, 10_000


def _deploy(tmp, mariadb, mariadb_target, kafka: dict | None) -> dict:
    db = f"fp_{uuid.uuid4().hex[:6]}"
    tdb = f"{db}_copy"
    sysbench.create_database(mariadb_target, tdb)
    mapping = {"dataSourceKey": "defaultDS", "destination": db, "groupId": "g1", "outerAdapterKey": "t",
               "dbMapping": {"mirrorDb": True, "database": db, "targetDb": tdb}}
    cfg = write_deployment(tmp, mariadb, name=db, include=rf"{db}\..*", master="local[2]", partitions=2,
                           groups=[{"groupId": "g1", "outerAdapters": [rdb_adapter(mariadb_target, "t", tdb)],
                                    "mappings": ["mappings/rdb/m.yml"]}], mappings={"rdb/m.yml": mapping},
                           batch_rows=BATCH,
                           kafka=kafka_store(kafka, db, partitionsNum=2, partitionHash=rf"{db}\..*:$pk$")
                           if kafka else None)
    raw = yaml.safe_load(cfg.read_text())
    raw["spark"]["roundSeconds"] = 4   # rounds well inside the fault interval
    cfg.write_text(yaml.safe_dump(raw, sort_keys=False))
    sluice("capture", "--config", str(cfg), "--once")   # the store starts at the binlog's end
    sysbench.create_database(mariadb, db)
    with sysbench.connect(mariadb, db) as c, c.cursor() as cur:  # the calibration's batch
        cur.execute("CREATE TABLE cal (id INT PRIMARY KEY, v VARCHAR(40))")
        cur.executemany("INSERT INTO cal VALUES (%s, %s)", [(i, f"value {i}") for i in range(BATCH - 10)])
        c.commit()
    t0 = time.monotonic()
    sluice("run", "--config", str(cfg), "--follow", "--rounds", "1")
    calibration = time.monotonic() - t0
    sysbench.prepare(mariadb, db, tables=TABLES, table_size=SIZE, create=False)  # the backlog
    with sysbench.connect(mariadb, db) as c, c.cursor() as cur:  # ... and as many single-row UPDATEs
        for t in range(1, TABLES + 1):
            cur.execute(f"UPDATE sbtest{t} SET k = k + 1")
        c.commit()
    return {"cfg": cfg, "db": db, "tdb": tdb, "tmp": tmp, "calibration": calibration}


def _writer(mariadb: dict, d: dict, seconds: int) -> Background:
    cmd = sysbench.command(mariadb, d["db"], "run", tables=TABLES, table_size=SIZE, threads=2, seconds=seconds,
                           extra=("--rate=30",))
    return Background(cmd, d["tmp"] / "writer.log")


def _group(cfg) -> tuple[int, int]:
    """(cursor, pending rows) of g1, read from the store as status does (files or Kafka)."""
    store = open_store(load_config(str(cfg)), create=False)
    try:
        st = store.status()["groups"].get("g1") or {}
        return int(st.get("cursor") or 0), int(st.get("pending_rows") or 0)
    finally:
        getattr(store, "close", lambda: None)()


@pytest.mark.timeout(3600)  # N and the backlog's apply scale with the machine's load
@pytest.mark.parametrize("kind", ["files", "kafka"])
def test_follower_progresses_between_faults(kind, request, tmp_path, mariadb, mariadb_target):
    kafka = request.getfixturevalue("kafka") if kind == "kafka" else None
    d = _deploy(tmp_path, mariadb, mariadb_target, kafka)
    cfg = d["cfg"]
    crons: list[Background] = []

    def cron() -> None:  # a scheduled run next to the follower: it leaves the group to the follower
        crons.append(Background([sys.executable, "-m", "pipeline.cli", "run", "--config", str(cfg), "--json"],
                                tmp_path / f"cron-{len(crons)}.log", dict(os.environ, PYSPARK_PYTHON=sys.executable)))

    follower = FollowerProcess(cfg, tmp_path)
    if kind == "files":
        faults = [("kill -9", follower.kill9), ("target restart", lambda: service("restart", "mariadb-target")),
                  ("SIGTERM", follower.sigterm), ("cron run", cron)]
    else:
        faults = [("kill -9", follower.kill9), ("broker restart", lambda: service("restart", "kafka")),
                  ("SIGTERM", follower.sigterm)]
    faults = faults * REPEAT
    writer = _writer(mariadb, d, 3600)
    follower.start()
    try:
        every = max(EVERY, 1.5 * d["calibration"] + 5)
        print(f"a cold run of one batch took {d['calibration']:.1f} s: a fault every {every:.0f} s")
        records = fault_schedule(faults, every, cursor=lambda: _group(cfg)[0], pending=lambda: _group(cfg)[1],
                                 alive=follower.running)
        summary = [(r.fault, r.cursor_before, r.cursor_after, r.pending_before) for r in records]
        print(f"faults ({kind}): {summary}")
        assert not stalled(records), f"no progress after {[r.fault for r in stalled(records)]}: {summary}\n" \
                                     f"{follower.output()}"
        writer.kill()
        for c in crons:
            code = c.wait(300)
            rec = json.loads([ln for ln in c.output(100000).splitlines() if ln.startswith('{"run"')][-1])
            assert code in (0, 3, 4), c.output()
            assert all(e["type"] == "LockHeldError" for e in rec["errors"]), rec["errors"]
        deadline = time.monotonic() + 1800
        while True:
            assert follower.running(), follower.output()
            cursor, pending = _group(cfg)
            if pending == 0:
                diff = diff_databases(mariadb, d["db"], mariadb_target, d["tdb"])
                if diff and all(v == 0 for v in diff.values()):
                    break
            assert time.monotonic() < deadline, f"not converged: pending {pending}\n{follower.output()}"
            time.sleep(2)
        assert len(diff) == TABLES + 1
        os.kill(follower.proc.proc.pid, signal.SIGTERM)
        assert follower.proc.wait(90) == 130
    finally:
        writer.kill()
        follower.stop()
        for c in crons:
            c.kill()
        sysbench.drop_database(mariadb, d["db"])
        sysbench.drop_database(mariadb_target, d["tdb"])
