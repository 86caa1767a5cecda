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

That soak (files and Kafka stores, several minutes each) runs with ``SLUICE_E2E_FULL=1`` only. The
default run has its short form, :func:`test_follower_progresses_across_a_kill` (files store): a
backlog of 10 batches (30k rows in 1,000-row transactions, no writer meanwhile). A cold follower's
first round is one batch (no apply rate known yet: ``spark.roundRows`` of one batch bounds it;
without bounded rounds it is the whole backlog, and the test fails there); its time from start to
that ack, T, is the machine's price of a restart plus one batch. The follower is killed (kill -9 of
its process group) while a later round is in progress; the restarted follower must ack within 1.5 T
+ 4 s (its first round is half of the one that was cut short, and at most what its rate allows a
cold process), then the target equals the source.
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
from tests.support.deploy import mirror_deployment, rdb_adapter, sluice, write_deployment
from tests.support.faults import Background, FollowerProcess, fault_schedule, group_progress, service, stalled
from tests.support.matrix import FULL

EVERY = float(os.environ.get("SLUICE_FAULT_EVERY", "10"))
REPEAT = int(os.environ.get("SLUICE_FAULT_ROUNDS", "1"))
TABLES, SIZE, BATCH = 4, 50_000, 10_000


def _deploy(tmp, mariadb, mariadb_target, kafka: dict | None) -> dict:
    d = mirror_deployment(tmp, mariadb, mariadb_target, "fp", batch_rows=BATCH, kafka=kafka)
    cfg, db, tdb = d["cfg"], d["db"], d["tdb"]
    raw = yaml.safe_load(cfg.read_text())
    raw["spark"]["roundSeconds"] = 4   # rounds well inside the fault interval
    cfg.write_text(yaml.safe_dump(raw, sort_keys=False))
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


@pytest.mark.timeout(3600)  # N and the backlog's apply scale with the machine's load
def _soak(kind, request, tmp_path, mariadb, mariadb_target):
    """The soak (SLUICE_E2E_FULL=1): every fault of the store's list, the cursor advancing between them."""
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
        records = fault_schedule(faults, every, cursor=lambda: group_progress(cfg)[0],
                                 pending=lambda: group_progress(cfg)[1], alive=follower.running)
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
            cursor, pending = group_progress(cfg)
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


if FULL:  # minutes per store: the default run has the short form below
    test_follower_progresses_between_faults = pytest.mark.parametrize("kind", ["files", "kafka"])(_soak)


SHORT_ROWS, SHORT_BATCH, SHORT_TXN = 15_000, 3_000, 1_000


def _short_deploy(tmp, mariadb, mariadb_target) -> dict:
    """Two tables of SHORT_ROWS rows each, written after the store's start in SHORT_TXN-row
    transactions (batches are cut between transactions), server-side (MariaDB's sequence engine)."""
    db = f"fs_{uuid.uuid4().hex[:6]}"
    tdb = f"{db}_copy"
    sysbench.create_database(mariadb_target, tdb)
    mapping = {"dataSourceKey": "defaultDS", "destination": db, "groupId": "g1", "outerAdapterKey": "t",
               "dbMapping": {"mirrorDb": True, "database": db, "targetDb": tdb}}
    cfg = write_deployment(tmp, mariadb, name=db, include=rf"{db}\..*", master="local[2]", partitions=2,
                           groups=[{"groupId": "g1", "outerAdapters": [rdb_adapter(mariadb_target, "t", tdb)],
                                    "mappings": ["mappings/rdb/m.yml"]}], mappings={"rdb/m.yml": mapping},
                           batch_rows=SHORT_BATCH)
    raw = yaml.safe_load(cfg.read_text())
    raw["spark"]["roundSeconds"] = 2   # rounds well inside the fault interval
    raw["spark"]["roundRows"] = SHORT_BATCH   # the first round (no rate known yet) is one batch
    cfg.write_text(yaml.safe_dump(raw, sort_keys=False))
    sluice("capture", "--config", str(cfg), "--once")   # the store starts at the binlog's end
    sysbench.create_database(mariadb, db)
    with sysbench.connect(mariadb, db) as c, c.cursor() as cur:
        for t in ("s1", "s2"):
            cur.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY, k INT NOT NULL, c VARCHAR(120) NOT NULL, "
                        "pad VARCHAR(60) NOT NULL, KEY k (k))")
            for lo in range(1, SHORT_ROWS + 1, SHORT_TXN):
                cur.execute(f"INSERT INTO {t} SELECT seq, seq % 997, CONCAT('row ', seq, ' of {t} ', "
                            f"REPEAT('c', 80)), REPEAT('p', 50) FROM seq_{lo}_to_{lo + SHORT_TXN - 1}")
    return {"cfg": cfg, "db": db, "tdb": tdb}


def _open_round(cfg) -> int | None:
    """The units of g1's sync round in progress (pipeline/job/rounds.py records it before it starts)."""
    store = open_store(load_config(str(cfg)), create=False)
    try:
        return json.loads((store.root / "rounds" / "g1.json").read_text()).get("open")
    except (OSError, ValueError):
        return None


def _wait(what: str, cond, follower: FollowerProcess, timeout: float, poll: float = 0.1):
    deadline = time.monotonic() + timeout
    while not (got := cond()):
        assert follower.running(), f"the follower ended before {what}:\n{follower.output()}"
        assert time.monotonic() < deadline, f"not within {timeout:.0f} s: {what} ({group_progress(follower.cfg)})\n" \
                                            f"{follower.output()}"
        time.sleep(poll)
    return got


@pytest.mark.timeout(900)
def test_follower_progresses_across_a_kill(tmp_path, mariadb, mariadb_target):
    d = _short_deploy(tmp_path, mariadb, mariadb_target)
    cfg = d["cfg"]
    follower = FollowerProcess(cfg, tmp_path)
    try:
        t0 = time.monotonic()
        follower.start()
        first = _wait("the first ack", lambda: group_progress(cfg)[0], follower, 300, poll=0.2)
        price = time.monotonic() - t0
        assert first == 1, f"a cold follower's first round is one batch (no rate known), not {first}"
        assert group_progress(cfg)[1] > 0
        cut = _wait("a round in progress", lambda: _open_round(cfg), follower, 120, poll=0.05)
        before = group_progress(cfg)[0]
        follower.kill9()  # the whole process group, then a new follower
        every = 1.5 * price + 4
        t1 = time.monotonic()
        after = _wait("progress after the kill", lambda: group_progress(cfg)[0] > before and group_progress(cfg)[0],
                      follower, every, poll=0.2)
        print(f"a cold follower's first ack after {price:.1f} s; killed in a round of {cut} units at cursor "
              f"{before}; the next follower acked {after} after {time.monotonic() - t1:.1f} s (limit {every:.0f} s)")
        assert "this one is smaller" in follower.output(100000), "the round cut short halves the next"
        _wait("the backlog applied", lambda: group_progress(cfg)[1] == 0, follower, 300, poll=0.5)
        assert diff_databases(mariadb, d["db"], mariadb_target, d["tdb"]) == {"s1": 0, "s2": 0}
        os.kill(follower.proc.proc.pid, signal.SIGTERM)
        assert follower.proc.wait(90) == 130
    finally:
        follower.stop()
        sysbench.drop_database(mariadb, d["db"])
        sysbench.drop_database(mariadb_target, d["tdb"])
