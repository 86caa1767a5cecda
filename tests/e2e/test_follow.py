"""``sluice run --follow`` against the real source and target MariaDB, the target behind a proxy
this test can take down.

In order, on one deployment (a mirrorDb mapping, commitBatch 100, the target through
:class:`tests.support.proxy.Proxy`):

1. SIGTERM while a partition is mid-apply (the pause hook holds it after 100 committed rows):
   the follower exits 130 within seconds, nothing of the round is acked, its record says
   ``interrupted``, no process of it is left (JVM, Python workers) and its locks are free;
2. kill -9 of the whole process group mid-apply: nothing acked;
3. a new follower applies everything the two stopped ones left (target == source: nothing lost);
   then the target goes down: the changes are captured and held (cursor still, failed rounds
   recorded, never acked), and once it is back they are applied, in order (30 updates of one
   row end at the last value); SIGTERM between rounds ends it, exit 130.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import uuid
from pathlib import Path

import pymysql
import pytest

from pipeline.state.runlog import RunLog
from pipeline.store.files import BatchStore
from tests.support import sysbench
from tests.support.deploy import rdb_adapter, sluice, write_deployment
from tests.support.faults import Background, pause_env
from tests.support.matrix import FULL
from tests.support.proxy import Proxy

ROWS = 1000


@pytest.fixture(scope="module")
def dep(tmp_path_factory, mariadb, mariadb_target):
    tmp = tmp_path_factory.mktemp("follow")
    db = f"fol_{uuid.uuid4().hex[:6]}"
    ddl = "CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL, note VARCHAR(32))"
    for info, name in ((mariadb, db), (mariadb_target, f"{db}_copy")):
        sysbench.create_database(info, name)
        _sql(info, name, ddl)
    proxy = Proxy(mariadb_target["host"], mariadb_target["port"])
    target = dict(mariadb_target, host="127.0.0.1", port=proxy.port)
    mapping = {"dataSourceKey": "defaultDS", "destination": db, "groupId": "g1", "outerAdapterKey": "tgt",
               "dbMapping": {"mirrorDb": True, "database": db, "targetDb": f"{db}_copy", "commitBatch": 100}}
    cfg = write_deployment(tmp, mariadb, name=db, include=rf"{db}\..*", master="local[1]", partitions=1,
                           groups=[{"groupId": "g1", "outerAdapters": [rdb_adapter(target, "tgt", f"{db}_copy")],
                                    "mappings": ["mappings/*.yml"]}], mappings={"m.yml": mapping})
    sluice("capture", "--config", str(cfg), "--once")   # the store starts at the binlog's end
    yield {"cfg": cfg, "db": db, "tmp": tmp, "proxy": proxy, "store": BatchStore(tmp / "store" / db, create=False)}
    proxy.close()
    sysbench.drop_database(mariadb, db)
    sysbench.drop_database(mariadb_target, f"{db}_copy")


def _sql(info: dict, db: str, *stmts: str, args=None) -> list[tuple]:
    with pymysql.connect(host=info["host"], port=info["port"], user=info["user"], password=info["password"],
                         database=db, autocommit=True) as c, c.cursor() as cur:
        for s in stmts:
            cur.execute(s, args)
        return list(cur.fetchall())


#: rows each source database got from _insert (the tests run in any order; each adds its own)
INSERTED: dict[str, int] = {}


def _insert(info: dict, db: str, first: int, n: int) -> None:
    """``n`` rows in one transaction (one rows event: one round, more than one chunk)."""
    INSERTED[db] = INSERTED.get(db, 0) + n
    with pymysql.connect(host=info["host"], port=info["port"], user=info["user"], password=info["password"],
                         database=db) as c, c.cursor() as cur:
        cur.executemany("INSERT INTO t (id, v, note) VALUES (%s, %s, %s)",
                        [(i, i, f"n{i}") for i in range(first, first + n)])
        c.commit()


def _rows(info: dict, db: str) -> list[tuple]:
    return _sql(info, db, "SELECT id, v, note FROM t ORDER BY id")


def _follow(d: dict, name: str, env: dict | None = None) -> Background:
    cmd = [sys.executable, "-m", "pipeline.cli", "--log-json", "run", "--config", str(d["cfg"]), "--follow",
           "--interval", "0.5", "--json"]
    return Background(cmd, d["tmp"] / f"{name}.log", env or dict(os.environ, PYSPARK_PYTHON=sys.executable))


def _session(sid: int) -> list[int]:
    """Processes still in session ``sid`` (the follower, its JVM and Python workers)."""
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                fields = (p / "stat").read_text().rsplit(") ", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[3]) == sid and fields[0] != "Z":
                out.append(int(p.name))
    return out


def _wait(pred, timeout: float, what: str, proc: Background | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if proc is not None and proc.proc.poll() is not None:
            raise AssertionError(f"the follower ended ({proc.proc.returncode}) before {what}:\n{proc.output()}")
        assert time.monotonic() < deadline, f"{what}: not within {timeout:.0f} s" + (
            f"\n{proc.output()}" if proc else "")
        time.sleep(0.3)


def test_sigterm_mid_apply_stops_cleanly(dep, mariadb):
    d, store = dep, dep["store"]
    marker = d["tmp"] / "pause-term"
    f = _follow(d, "term", pause_env(marker, 100))
    try:
        _insert(mariadb, d["db"], 1, ROWS)
        f.wait_for(marker, 300)
        before = store.cursor("g1")
        t0 = time.monotonic()
        os.kill(f.proc.pid, signal.SIGTERM)       # the driver only, as `kill <pid>` would
        code = f.wait(60)
    finally:
        f.kill()
    assert code == 130, f.output()
    assert time.monotonic() - t0 < 30
    assert store.cursor("g1") == before, "a batch of the abandoned round was acked"
    last = RunLog(store.root).runs()[-1]
    assert last["status"] == "interrupted" and last["exit"] == 130 and last["follow"]["round"] >= 1
    _wait(lambda: not _session(f.proc.pid), 30, "the JVM and Python workers to end")
    locks = {k: v for k, v in (store.status().get("locks") or {}).items() if v and v.get("alive")}
    assert not locks, locks


def test_kill9_mid_apply_acks_nothing(dep, mariadb):
    d, store = dep, dep["store"]
    marker = d["tmp"] / "pause-kill"
    before = store.cursor("g1")
    f = _follow(d, "kill9", pause_env(marker, 100))
    try:
        _insert(mariadb, d["db"], ROWS + 1, ROWS)
        f.wait_for(marker, 300)
        assert store.cursor("g1") <= before + 1   # it may have applied the first test's round first
        mid = store.cursor("g1")
    finally:
        f.kill()                                   # SIGKILL to the whole group: driver, JVM, workers
    assert store.cursor("g1") == mid and store.status()["groups"]["g1"]["pending_batches"] >= 1


def test_restart_applies_everything_and_a_target_outage_is_held_then_applied_in_order(dep, mariadb, mariadb_target):
    d, store, proxy = dep, dep["store"], dep["proxy"]
    db, tdb = d["db"], f"{dep['db']}_copy"
    _insert(mariadb, db, 7000, 20)  # its own rows: id 7000 gets the ordered updates, 7010-7019 are deleted
    f = _follow(d, "restart")
    try:
        _wait(lambda: _rows(mariadb_target, tdb) == _rows(mariadb, db)
              and store.status()["groups"]["g1"]["pending_rows"] == 0, 300, "the target to equal the source", f)
        # every row the module's tests inserted before, those of SIGTERM and kill -9 mid-apply among them
        assert len(_rows(mariadb_target, tdb)) == INSERTED[db], "rows lost across SIGTERM and kill -9"
        proxy.down()
        held_at = store.cursor("g1")
        runs = RunLog(store.root)
        earlier = len(runs.runs())  # only this outage's rounds are looked at below
        for i in range(1, 31):                     # 30 transactions on one row: order decides the end value
            _sql(mariadb, db, "UPDATE t SET v = %s, note = 'ordered' WHERE id = 7000", args=(1000 + i,))
        _sql(mariadb, db, "DELETE FROM t WHERE id BETWEEN 7010 AND 7019")
        _insert(mariadb, db, 5000, 50)
        _wait(lambda: store.status()["groups"]["g1"]["pending_rows"] >= 90
              and any(r.get("status") == "failed" for r in runs.runs()[earlier:]), 120,
              "the changes to be captured and a round to fail", f)
        time.sleep(3)
        assert store.cursor("g1") == held_at, "a batch was acked while the target was down"
        assert _sql(mariadb_target, tdb, "SELECT v FROM t WHERE id = 7000") == [(7000,)]
        failed = next(r for r in reversed(runs.runs()) if r.get("status") == "failed")
        assert failed["exit"] == 1 and any(e["group"] == "g1" for e in failed["errors"]), failed["errors"]
        first = next(i for i, r in enumerate(runs.runs()) if i >= earlier and r.get("status") == "failed")
        assert all(r["status"] == "failed" for r in runs.runs()[first:]), "a round recorded ok while g1 failed"
        st = json.loads(sluice("status", "--config", str(d["cfg"]), "--json", "--no-source").stdout)
        assert st["groups"]["g1"]["last_run"]["ok"] is False and st["last_success_at"] < failed["started"]
        proxy.up()
        _wait(lambda: _rows(mariadb_target, tdb) == _rows(mariadb, db), 180,
              "the held changes to be applied after the target came back", f)
        assert _sql(mariadb_target, tdb, "SELECT v, note FROM t WHERE id = 7000") == [(1030, "ordered")]
        assert store.status()["groups"]["g1"]["pending_rows"] == 0
        assert runs.runs()[-1]["status"] == "ok"
        os.kill(f.proc.pid, signal.SIGTERM)
        assert f.wait(60) == 130, f.output()
    finally:
        if proxy._listener is None:
            proxy.up()
        f.kill()


def test_follow_runs_under_spark_submit(dep, mariadb, mariadb_target):
    """``spark-submit ... sluice_submit.py run --follow`` (``sluice package``), here on ``local[1]``
    with the spark-submit that comes with pyspark: the rounds run in spark-submit's session."""
    import pyspark

    d, store = dep, dep["store"]
    dist = d["tmp"] / "dist"
    sluice("package", "--out", str(dist))
    _insert(mariadb, d["db"], 9000, 20)
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    cmd = [str(submit), "--master", "local[1]", "--conf", "spark.ui.enabled=false",
           "--py-files", str(sorted(dist.glob("sluice-*.zip"))[-1]), str(dist / "sluice_submit.py"),
           "run", "--config", str(d["cfg"]), "--follow", "--rounds", "2", "--interval", "0.2", "--json"]
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_LOCAL_IP="127.0.0.1")
    env.pop("SPARK_HOME", None)
    p = Background(cmd, d["tmp"] / "submit.log", env)
    code = p.wait(300)
    rec = [ln for ln in p.output(200000).splitlines() if ln.startswith('{"run"')]
    assert code == 0 and rec, p.output()  # the result of the last round that did something: it applied
    last = json.loads(rec[-1])
    assert last["status"] == "ok" and last["follow"]["round"] in (1, 2)
    assert _rows(mariadb_target, f"{d['db']}_copy") == _rows(mariadb, d["db"])
    assert store.status()["groups"]["g1"]["pending_rows"] == 0


def _jvm_in(sid: int) -> bool:
    for pid in _session(sid):
        try:
            if b"java" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]:
                return True
        except OSError:
            continue
    return False


@pytest.mark.parametrize("mode", ["follow", "run", "sync"])
def test_sigterm_while_the_jvm_starts_leaves_no_process(dep, mariadb, mode):
    """SIGTERM to ``sluice run [--follow]`` or ``sluice sync`` while its Spark JVM is starting
    (PySpark's gateway launch in progress, in a thread while the pre-flight checks run): it exits
    130 and the JVM it started ends too (no process of its session is left), and nothing is acked."""
    d, store = dep, dep["store"]
    _insert(mariadb, d["db"], 20000 + {"follow": 0, "run": 100, "sync": 200}[mode], 10)
    if mode == "sync":
        sluice("capture", "--config", str(d["cfg"]), "--once")
    before = store.cursor("g1")
    cli = [sys.executable, "-m", "pipeline.cli", "--log-json"]
    cmd = {"follow": [*cli, "run", "--config", str(d["cfg"]), "--json", "--follow", "--interval", "0.5"],
           "run": [*cli, "run", "--config", str(d["cfg"]), "--json"],
           "sync": [*cli, "sync", "--config", str(d["cfg"]), "--group", "g1", "--json"]}[mode]
    f = Background(cmd, d["tmp"] / f"jvm-{mode}.log", dict(os.environ, PYSPARK_PYTHON=sys.executable))
    try:
        _wait(lambda: _jvm_in(f.proc.pid), 120, "the Spark JVM to start", f)
        os.kill(f.proc.pid, signal.SIGTERM)
        code = f.wait(60)
        assert code == 130, f.output()
        _wait(lambda: not _session(f.proc.pid), 30, "the JVM and Python workers to end")
    finally:
        f.kill()
        for pid in _session(f.proc.pid):  # what a failed run of this test leaves
            os.kill(pid, signal.SIGKILL)
    assert store.cursor("g1") == before


if not FULL:  # long form (SLUICE_E2E_FULL=1; CI budget): spark-submit itself is proven by test_sync_mirror.py,
    # test_ops_cron.py and test_faults.py on the cluster; the follower's loop by the tests above
    del test_follow_runs_under_spark_submit
