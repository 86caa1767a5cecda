"""Fault-injection suite (issue #8): with sysbench writing, break one thing at a time and show
that after recovery every target equals the source.

Each test builds its own deployment (source database, store, group ``g1``, one target kind),
injects one fault, recovers the way docs/reliability.md says, compares every row of every
table, and adds a row {fault, batches_replayed, rows_compared, rows_differing, seconds} to the
report printed at the end of the pytest output (``pytest_terminal_summary`` in tests/conftest.py).

"batches replayed": batches that an attempt interrupted by the fault had taken from the store
(``get``) and had started applying, and that were applied again afterwards (by the rerun of
sync, or by Spark's re-run of a killed task, which applies that partition's rows of every batch
of the round again). An attempt that stopped before applying anything replays nothing.

Bounded and self-stopping: sysbench runs with ``--time``, every wait has a deadline, every
background process is killed in a ``finally``, and services that a test stops are started
again in its ``finally``.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.support import sysbench
from tests.support.deploy import REPO, submit_command
from tests.support.faults import (
    Background,
    Deployment,
    ancestor,
    drop_deployment,
    last_json,
    make_deployment,
    pause_env,
    reported,
    resume,
    service,
    wait_dead,
)
from tests.support.thrift import OwnThrift

PAUSE_ROWS = 200


@pytest.fixture
def deploy(request, tmp_path, mariadb):
    """``deploy(kind, target=None)``: a fresh deployment; dropped again after the test."""
    made: list[Deployment] = []

    def make(kind: str, target: dict | None = None) -> Deployment:
        if target is None:
            fixture = {"mariadb": "mariadb_target", "postgres": "postgres", "es": "elasticsearch",
                       "hbase": "hbase"}[kind]
            target = request.getfixturevalue(fixture)
        dep = make_deployment(kind, tmp_path, mariadb, target)
        made.append(dep)
        return dep
    yield make
    for dep in made:
        drop_deployment(dep)


def _paused_sync(dep: Deployment, marker: Path, partitions: int = 2) -> Background:
    return Background(dep.sync_command(partitions), dep.tmp / "sync-paused.log", pause_env(marker, PAUSE_ROWS))


@contextmanager
def _under_load(dep: Deployment, seconds: int = 9, pause: Path | None = None):
    """sysbench writes for ``seconds`` while the test injects its fault; what was captured 3 s in
    is what the interrupted run takes. Yields ``before``/``taken`` (the cursor and the pending
    batches then), ``runs`` (background runs, killed at the end like sysbench) and, with
    ``pause`` (a marker path), ``run``: a sync already paused mid-apply at that marker."""
    bench = dep.workload(seconds)
    st = SimpleNamespace(before=0, taken=0, runs=[], run=None)
    try:
        time.sleep(3)
        dep.capture()
        st.before, st.taken = dep.cursor(), dep.last_batch() - dep.cursor()
        if pause is not None:
            st.run = _paused_sync(dep, pause)
            st.runs.append(st.run)
            st.run.wait_for(pause, 240)
        yield st
        assert bench.wait(120) == 0, bench.output()
    finally:
        bench.kill()
        for r in st.runs:
            r.kill()


def _outcome(row, dep: Deployment, st, rc: int, detail: str = "") -> None:
    """Record a run's outcome; a failed run must not have acked anything."""
    row.batches_replayed = 0 if rc == 0 else _replayed(st.taken, st.before, dep.cursor())
    row.detail = detail + ("run retried and succeeded" if rc == 0 else f"run failed (exit {rc}), rerun replays")
    if rc != 0:
        assert dep.cursor() == st.before, "a failed run acked batches"


def _replayed(taken: int, before: int, after: int) -> int:
    """Batches the interrupted attempt took and did not ack (all of them were applied again)."""
    return max(0, taken - (after - before))


def test_capture_sigkill(deploy):
    """SIGKILL of ``capture --follow`` at random moments while sysbench writes."""
    with reported("capture SIGKILL") as row:
        dep = deploy("mariadb")
        rng = random.Random(os.environ.get("SLUICE_TEST_SEED", "8"))
        bench = dep.workload(9)
        kills = 0
        try:
            while bench.proc.poll() is None and kills < 8:
                cap = Background([sys.executable, "-m", "pipeline.cli", "capture", "--config", str(dep.cfg),
                                  "--follow"], dep.tmp / f"capture-{kills}.log")
                try:
                    time.sleep(rng.uniform(0.8, 2.5))
                    assert cap.proc.poll() is None, cap.output()
                finally:
                    cap.kill()  # SIGKILL of the whole process group
                kills += 1
            assert bench.wait(120) == 0, bench.output()
        finally:
            bench.kill()
        for meta in dep.store().batches():  # nothing half-written survived a kill
            dep.store().verify(meta)
        row.detail = f"{kills} kills, {dep.last_batch()} batches before the final capture"
        dep.converge(row)


@pytest.mark.parametrize("victim", ["driver", "executor"])
def test_spark_sigkill_on_cluster(deploy, spark_cluster, victim, tmp_path):
    """SIGKILL of the driver (spark-submit's process group) or of an executor JVM, while a
    partition is paused mid-apply on the standalone cluster."""
    with reported(f"Spark {victim} SIGKILL (cluster)") as row:
        dep = deploy("mariadb")
        bench = dep.workload(9)
        marker = tmp_path / "paused"
        run = None
        try:
            time.sleep(3)
            dep.capture()
            before, taken = dep.cursor(), dep.last_batch() - dep.cursor()
            cmd, env = submit_command(spark_cluster, tmp_path, "sync", "--config", str(dep.cfg), "--group", "g1",
                                      "--partitions", "2", "--max-batches", "100000", "--json")
            env.update({k: v for k, v in pause_env(marker, PAUSE_ROWS).items() if k.startswith("SLUICE_TEST")})
            run = Background(cmd, tmp_path / "submit.log", env)
            run.wait_for(marker, 300)
            assert dep.cursor() == before, "a batch was acked while a partition was still applying"
            worker = int(marker.read_text().strip())  # the paused Python worker
            if victim == "driver":
                run.kill()
                rc = run.proc.returncode
                # the master stops the application's executors; their Python workers must go too
                leftover = not wait_dead(worker, 60)
                if leftover:
                    os.kill(worker, signal.SIGKILL)
                row.detail = "rerun replays" + ("; paused worker outlived its executor" if leftover else "")
            else:
                executor = ancestor(worker, "CoarseGrainedExecutorBackend")
                assert executor, "no executor JVM above the paused worker"
                os.kill(executor, signal.SIGKILL)
                assert wait_dead(worker, 60), "the paused worker outlived its executor"
                rc = run.wait(400)
                row.detail = f"spark-submit exit {rc} (Spark re-ran the lost task)"
            after = dep.cursor()
            assert rc != 0 or victim == "executor", run.output()
            if rc != 0:
                assert after == before, "a failed run acked batches"
            row.batches_replayed = taken if rc == 0 else _replayed(taken, before, after)
            assert bench.wait(120) == 0, bench.output()
        finally:
            bench.kill()
            if run is not None:
                run.kill()
        dep.converge(row)


@pytest.mark.parametrize("name,kind", [("mariadb-target", "mariadb"), ("postgres", "postgres")])
def test_target_restarted_mid_apply(deploy, name, kind, tmp_path):
    """The target database is stopped and started while a partition is paused mid-apply; the
    partition then finds its connection gone (TransientError, retried)."""
    with reported(f"{name} restarted mid-apply") as row:
        dep = deploy(kind)
        marker = tmp_path / "paused"
        with _under_load(dep, pause=marker) as st:
            run = st.run
            try:
                service("stop", name)
            finally:
                service("start", name)
            resume(marker)
            _outcome(row, dep, st, run.wait(300))
        dep.converge(row)


def test_elasticsearch_stopped_mid_apply(deploy, elasticsearch, tmp_path):
    """Elasticsearch is stopped while a partition is paused mid-apply and started again after
    the run gave up (its indices persist)."""
    with reported("elasticsearch stopped mid-apply") as row:
        dep = deploy("es")
        marker = tmp_path / "paused"
        with _under_load(dep, pause=marker) as st:
            run = st.run
            try:
                service("stop", "elasticsearch")
                resume(marker)
                rc = run.wait(300)
            finally:
                service("start", "elasticsearch")
            _outcome(row, dep, st, rc)
            assert rc == 0 or "Elasticsearch" in run.output(20000), run.output()
        dep.converge(row)


def test_elasticsearch_429(deploy, elasticsearch, es, tmp_path):
    """The real server answers 429 (circuit_breaking_exception): the in-flight request breaker
    is lowered below a bulk request's size while the sync runs, and restored after the first
    rejections, while Sluice retries."""
    setting = "network.breaker.inflight_requests.limit"
    with reported("elasticsearch 429 (circuit breaker)") as row:
        dep = deploy("es")
        with _under_load(dep, 10) as st:
            def tripped() -> int:
                stats = es.nodes.stats(metric="breaker")["nodes"]
                return sum(n["breakers"]["inflight_requests"]["tripped"] for n in stats.values())
            base = tripped()
            es.cluster.put_settings(persistent={setting: "2kb"})
            try:
                run = Background(dep.sync_command(), tmp_path / "sync.log",
                                 dict(os.environ, PYSPARK_PYTHON=sys.executable))
                st.runs.append(run)
                deadline = time.monotonic() + 240
                while tripped() == base:
                    assert run.proc.poll() is None, f"sync ended without a 429:\n{run.output()}"
                    assert time.monotonic() < deadline, "no bulk request was rejected"
                    time.sleep(0.2)
                time.sleep(1.0)  # let a retry or two meet the 429 as well
            finally:
                es.cluster.put_settings(persistent={setting: None})
            rejected = tripped() - base
            _outcome(row, dep, st, run.wait(300), f"{rejected} bulk requests got 429; ")
        dep.converge(row)


def test_hbase_thrift_stopped_mid_apply(deploy, hbase, tmp_path):
    """The Thrift gateway (the deployment's own, against the shared HBase) is SIGKILLed while a
    partition is paused mid-apply; the run fails closed; the gateway comes back on its port."""
    with reported("HBase Thrift stopped mid-apply") as row:
        gateway = OwnThrift(hbase, _free_port())
        try:
            dep = deploy("hbase", {"host": "127.0.0.1", "port": gateway.port})
            marker = tmp_path / "paused"
            with _under_load(dep, pause=marker) as st:
                run = st.run
                gateway.kill()
                resume(marker)
                _outcome(row, dep, st, run.wait(300))
                gateway = OwnThrift(hbase, gateway.port)
            dep.converge(row)
        finally:
            gateway.kill()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("damage", ["truncated", "corrupted"])
def test_damaged_batch_file(deploy, damage):
    """A pending batch file is cut short or has bytes changed: sync refuses it (CorruptBatchError
    naming the file), acks nothing; recovery: restore the file from a copy (truncated), or remove
    that batch and every later one and capture them again from the binlog (corrupted)."""
    with reported(f"batch file {damage}") as row:
        dep = deploy("mariadb")
        bench = dep.workload(10)
        try:
            time.sleep(3)
            dep.capture()
            store = dep.store()
            before = dep.cursor()
            victim = next(m for m in store.batches(since=max(before, 1)) if m.rows > 0)
            path = Path(victim.path)
            good = path.read_bytes()
            if damage == "truncated":
                path.write_bytes(good[: len(good) // 2])
            else:
                mid = len(good) // 2
                path.write_bytes(good[:mid] + bytes([good[mid] ^ 0x5A]) + good[mid + 1:])
            failed = dep.sync(check=False)
            text = failed.stdout + failed.stderr
            assert failed.returncode != 0, text
            assert path.name in text and "corrupt" in text, text
            assert dep.cursor() == before
            assert bench.wait(120) == 0, bench.output()
        finally:
            bench.kill()
        verify = _sluice_rc("store", "verify", "--config", str(dep.cfg))
        assert verify != 0
        if damage == "truncated":
            path.write_bytes(good)
            row.detail = f"batch {victim.batch_id} restored from a copy"
        else:
            rc = _sluice_rc("store", "recapture", "--config", str(dep.cfg), "--from", str(victim.batch_id))
            assert rc == 0 and dep.last_batch() == victim.batch_id - 1 and dep.cursor() < victim.batch_id
            row.detail = f"sluice store recapture --from {victim.batch_id}, captured again"
        assert _sluice_rc("store", "verify", "--config", str(dep.cfg)) == 0
        dep.converge(row)


def _sluice_rc(*args: str) -> int:
    import subprocess

    return subprocess.run([sys.executable, "-m", "pipeline.cli", *args], cwd=REPO, capture_output=True,
                          timeout=120).returncode


def test_same_batches_applied_twice(deploy):
    """Every batch is applied a second time (cursor set back to 0) after sysbench changed rows
    that were inserted, updated and deleted: the target does not move."""
    with reported("same batches applied twice (postgres)") as row:
        dep = deploy("postgres")
        with _under_load(dep, 10):
            pass  # captured 3 s in, sysbench done
        dep.converge(row)  # the first time
        acked = dep.cursor()
        assert _sluice_rc("store", "set-cursor", "--config", str(dep.cfg), "--group", "g1", "--to", "0") == 0
        summary = dep.sync().stdout
        assert dep.cursor() == acked
        row.batches_replayed = acked
        skipped = sum(last_json(summary)["skipped"].values())
        row.detail = f"cursor 0 -> {acked}: {skipped} inserts skipped as duplicates"
        assert skipped > 0
        row.rows_compared, row.rows_differing = dep.compare()
        assert row.rows_differing == 0


def test_ddl_breaks_a_mapping(deploy):
    """``ALTER TABLE ... DROP COLUMN pad`` on the source while a PostgreSQL mapping names
    ``pad`` in targetColumns: the run stops with a message naming the mapping and the column,
    nothing is acked; the operator removes the column from the mapping; the rerun converges."""
    with reported("DDL breaks a mapping (postgres)") as row:
        dep = deploy("postgres")
        with _under_load(dep, 8):
            pass  # captured 3 s in, sysbench done
        with sysbench.connect(dep.source, dep.db) as c, c.cursor() as cur:
            cur.execute("ALTER TABLE sbtest1 DROP COLUMN pad")
            cur.execute("UPDATE sbtest1 SET k = k + 1, c = CONCAT('after-ddl-', id) WHERE id <= 100")
            cur.execute("DELETE FROM sbtest1 WHERE id BETWEEN 101 AND 120")
        dep.capture()
        before = dep.cursor()
        failed = dep.sync(check=False)
        text = failed.stdout + failed.stderr
        assert failed.returncode != 0, text
        assert "sbtest1.yml" in text and "pad" in text, text
        assert dep.cursor() == before
        row.detail = f"exit {failed.returncode}: " + next(
            (line.strip() for line in text.splitlines() if "pad" in line), "")[:90]
        dep.drop_column("sbtest1", "pad")
        dep.converge(row)
