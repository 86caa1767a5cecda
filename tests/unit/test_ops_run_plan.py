"""``run_once`` with stand-ins for capture and sync: outcomes, exit codes, the run record,
status numbers against the store, and the report page."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pytest
from structlog.testing import capture_logs

from pipeline.config import parse_config
from pipeline.job.segment import ApplyFailed
from pipeline.ops.report import render, svg_chart
from pipeline.ops.run import EXIT_FAILED, EXIT_INVALID, EXIT_LOCKED, EXIT_NOTHING, EXIT_OK, run_once
from pipeline.ops.status import binlog_behind, deployment_status, group_status, last_event_ms
from pipeline.state.runlog import RunLog
from pipeline.store.files import BatchStore
from sluice_common.errors import ConfigError, LockHeldError, SourceError, TargetMismatchError


@dataclass
class Cap:
    rows: int
    batches: int = 1
    stopped: str = "end of binlog"

    def to_dict(self):
        return {"rows": self.rows, "batches": self.batches, "transactions": 1, "rows_per_s": 10.0,
                "stopped": self.stopped}


@pytest.fixture
def env(tmp_path):
    cfg = parse_config({"source": {"name": "s1"}, "store": {"path": str(tmp_path / "store")},
                        "groups": [{"groupId": "g1"}, {"groupId": "g2"}],
                        "metrics": {"textfile": "m/s.prom", "json": "m/s.json"}}, file=str(tmp_path / "sluice.yml"))
    store = BatchStore(cfg.store_dir())
    return cfg, store


def _append(store: BatchStore, rows: int, es: int = 1_700_000_000_000) -> None:
    recs = [{"database": "d", "table": "t", "type": "INSERT", "es": es + i, "data": [{"id": str(i)}]}
            for i in range(rows)]
    with store.capture_lock():
        n = len(store.batch_ids())
        store.append(recs, start={"logfile": "b.1", "logpos": n}, end={"logfile": "b.1", "logpos": n + 1})


class FakeSync:
    """run_sync's stand-in: run_once calls it with the group's apply lock held (``locked=True``)."""

    def __init__(self, store: BatchStore, fail: dict | None = None):
        self.store, self.fail, self.calls = store, fail or {}, []

    def __call__(self, cfg, group, spark, **kw):
        assert kw["locked"] is True and kw["plan"] == group
        self.calls.append((group, spark))
        if group in self.fail:
            raise self.fail[group]
        batches = self.store.get(group, 1000)
        for b in batches:
            self.store.ack(group, b.batch_id)

        class S:
            def as_dict(s):
                return {"group": group, "batches": len(batches), "rows": sum(b.rows for b in batches),
                        "seconds": 1.0, "rows_per_s": 5.0, "cursor": self.store.cursor(group),
                        "inserted": {"d.t": sum(b.rows for b in batches)}, "executor": {"rows": 1}}
        return S()


def _run(cfg, store, capture_rows=None, capture_error=None, sync=None, **kw):
    def capture(cfg, follow):
        if capture_error:
            raise capture_error
        if capture_rows:
            _append(store, capture_rows)
        return Cap(capture_rows or 0)
    sync = sync or FakeSync(store)
    kw.setdefault("check_fn", lambda cfg, plan, store: None)
    kw.setdefault("load_fn", lambda cfg, g: g)
    return run_once(cfg, spark_factory=lambda rows: "SPARK", capture_fn=capture, sync_fn=sync, with_source_lag=False,
                    **kw)


def test_work_done_then_nothing_to_do(env):
    cfg, store = env
    sync = FakeSync(store)
    r = _run(cfg, store, capture_rows=5, sync=sync)
    assert r.exit_code == EXIT_OK and r.record["status"] == "ok"
    assert [g for g, _ in sync.calls] == ["g1", "g2"] and sync.calls[0][1] == "SPARK"
    assert r.record["sync"]["g1"]["pending_before"] == {"batches": 1, "rows": 5, "cursor": 0}
    assert r.record["lag"]["groups"]["g1"]["pending_batches"] == 0
    r2 = _run(cfg, store, sync=sync)
    assert r2.exit_code == EXIT_NOTHING and r2.record["status"] == "nothing" and len(sync.calls) == 2
    assert _run(cfg, store, sync=sync, nothing_exit=0).exit_code == 0
    runs = RunLog(store.root).runs()
    assert [x["status"] for x in runs] == ["ok", "nothing", "nothing"]
    assert (cfg.path("m/s.prom")).exists() and runs[-1]["metrics"]["json"].endswith("m/s.json")


def test_empty_batches_are_acked_without_spark(env):
    cfg, store = env
    with store.capture_lock():
        store.append([], start={"logfile": "b.1", "logpos": 0}, end={"logfile": "b.1", "logpos": 9})

    def no_spark(rows):
        raise AssertionError("Spark started for empty batches")
    sync = FakeSync(store)
    r = run_once(cfg, spark_factory=no_spark, capture_fn=lambda cfg, follow: Cap(0, 0), sync_fn=sync,
                 with_source_lag=False, load_fn=lambda cfg, g: g)
    assert r.exit_code == EXIT_NOTHING and not sync.calls
    assert store.cursor("g1") == store.cursor("g2") == 1


def test_a_failed_group_fails_the_run_but_not_the_other_group(env):
    cfg, store = env
    sync = FakeSync(store, fail={"g1": ApplyFailed("1 of 4 partitions failed; no batch was acked")})
    r = _run(cfg, store, capture_rows=3, sync=sync)
    assert r.exit_code == EXIT_FAILED and r.record["status"] == "failed"
    assert r.record["errors"] == [{"stage": "sync", "group": "g1", "type": "ApplyFailed",
                                   "message": "1 of 4 partitions failed; no batch was acked", "exit": 1}]
    assert store.cursor("g1") == 0 and store.cursor("g2") == 1
    assert r.record["sync"]["g1"]["ok"] is False
    st = deployment_status(cfg, with_source=False)
    assert st["last_run"]["status"] == "failed" and st["groups"]["g1"]["last_run"]["ok"] is False
    assert st["groups"]["g1"]["pending_rows"] == 3 and st["groups"]["g2"]["pending_rows"] == 0


def test_capture_failure_still_syncs_and_unexpected_errors_are_recorded(env):
    cfg, store = env
    _append(store, 2)
    r = _run(cfg, store, capture_error=SourceError("cannot connect to the source", hint="start it"))
    assert r.exit_code == EXIT_FAILED and store.cursor("g1") == 1
    assert r.record["errors"][0]["stage"] == "capture" and "fix: start it" in r.record["errors"][0]["message"]
    _append(store, 1)
    r = _run(cfg, store, sync=FakeSync(store, fail={"g2": RuntimeError("py4j: boom")}))
    assert r.exit_code == EXIT_FAILED and r.record["errors"][0]["type"] == "RuntimeError"


def test_lock_held_is_its_own_exit_code(env):
    cfg, store = env
    _append(store, 1)
    lock = LockHeldError("the apply lock of g1 is held by pid 1")
    r = _run(cfg, store, sync=FakeSync(store, fail={"g1": lock, "g2": lock}))
    assert r.exit_code == EXIT_LOCKED and r.record["status"] == "locked"


def test_a_held_group_is_refused_before_spark_starts(env):
    cfg, store = env
    _append(store, 1)
    started = []

    def spark(rows):
        started.append(1)
        return "SPARK"

    sync = FakeSync(store)
    with BatchStore(store.root, create=False).apply_lock("g1"):  # another job applies g1
        r = run_once(cfg, groups=["g1"], spark_factory=spark, capture_fn=lambda cfg, follow: Cap(0, 0),
                     sync_fn=sync, with_source_lag=False, load_fn=lambda cfg, g: g)
    assert r.exit_code == EXIT_LOCKED and not started and not sync.calls
    assert r.record["sync"]["g1"]["note"] == "another job applies this group (locked)"


def test_a_group_with_wrong_mappings_is_left_out_and_the_run_exits_2(env):
    """A mapping file that does not load, or a mapping that does not fit its tables: that group
    does not start (recorded, status invalid, exit 2), the other group still syncs, and Spark
    starts only for groups that passed."""
    cfg, store = env
    _append(store, 2)

    def load(cfg, g):
        if g == "g1":
            raise ConfigError("m1.yml", "dbMapping.targetPk", "is required")
        return g

    sync = FakeSync(store)
    r = _run(cfg, store, sync=sync, load_fn=load)
    assert r.exit_code == EXIT_INVALID == 2 and r.record["status"] == "invalid"
    assert [g for g, _ in sync.calls] == ["g2"] and store.cursor("g2") == 1 and store.cursor("g1") == 0
    assert r.record["errors"][0] | {"message": ""} == {"stage": "config", "group": "g1", "type": "ConfigError",
                                                       "message": "", "exit": 2}
    assert "m1.yml: dbMapping.targetPk: is required" in r.record["errors"][0]["message"]
    assert r.record["sync"]["g1"]["ok"] is False and "mapping" in r.record["sync"]["g1"]["note"]

    def check(cfg, plan, store):
        raise TargetMismatchError(f"m-{plan}.yml: dbMapping.targetTable: target table t does not exist")

    started = []
    r = run_once(cfg, spark_factory=lambda rows: started.append(1), capture_fn=lambda cfg, follow: Cap(0, 0),
                 sync_fn=sync, with_source_lag=False, load_fn=lambda cfg, g: g, check_fn=check)
    assert r.exit_code == EXIT_INVALID and not started and [e["stage"] for e in r.record["errors"]] == ["config"]


def test_failed_preflight_checks_keep_spark_from_starting(env):
    cfg, store = env
    _append(store, 2)

    def check(cfg, plan, store):
        raise SourceError("cannot connect to the source root@127.0.0.1:1: refused")

    started = []
    r = run_once(cfg, spark_factory=lambda rows: started.append(1), capture_fn=lambda cfg, follow: Cap(0, 0),
                 sync_fn=FakeSync(store), with_source_lag=False, load_fn=lambda cfg, g: g, check_fn=check)
    assert r.exit_code == EXIT_FAILED and not started
    assert [(e["stage"], e["group"]) for e in r.record["errors"]] == [("sync", "g1"), ("sync", "g2")]
    assert r.record["sync"]["g1"]["note"] == "its pre-flight check failed (see the error)"


def test_the_apply_lock_is_held_from_the_checks_to_the_end_of_the_sync(env):
    """A second run (or sync) of the group is refused while the first checks, starts Spark and syncs."""
    cfg, store = env
    _append(store, 1)
    seen = []

    def probe(*_args, **_kw):
        with pytest.raises(LockHeldError):
            BatchStore(store.root, create=False).check_apply_free("g1")
        seen.append(1)

    class Sync(FakeSync):
        def __call__(self, cfg, group, spark, **kw):
            probe()
            return super().__call__(cfg, group, spark, **kw)

    r = _run(cfg, store, groups=["g1"], sync=Sync(store), check_fn=probe)
    assert r.exit_code == EXIT_OK and seen == [1, 1]
    BatchStore(store.root, create=False).check_apply_free("g1")  # released afterwards


def test_a_metrics_file_that_cannot_be_written_is_one_error_naming_it(env, tmp_path):
    cfg, store = env
    (tmp_path / "m").write_text("a file where the metrics folder should be")
    _append(store, 1)
    r = _run(cfg, store)
    assert r.exit_code == EXIT_FAILED and store.cursor("g1") == 1  # the work is done; the run is failed
    err = r.record["errors"][-1]
    assert err["stage"] == "metrics" and err["message"].startswith(f"{tmp_path / 'm'}: cannot write the metrics file")
    assert "fix: check the owner and permissions" in err["message"]
    assert RunLog(store.root).last()["run"] == r.record["run"]  # still recorded


def test_spark_that_does_not_start_is_recorded(env):
    cfg, store = env
    _append(store, 1)

    def no_java(rows):
        raise RuntimeError("Java gateway process exited before sending its port number")

    r = run_once(cfg, spark_factory=no_java, capture_fn=lambda cfg, follow: Cap(0, 0), sync_fn=FakeSync(store),
                 with_source_lag=False, load_fn=lambda cfg, g: g, check_fn=lambda cfg, plan, store: None)
    assert r.exit_code == EXIT_FAILED and r.record["errors"][0]["stage"] == "spark"
    assert "Java gateway" in r.record["errors"][0]["message"]
    assert r.record["sync"]["g1"]["note"] == "Spark did not start"
    assert RunLog(store.root).last()["run"] == r.record["run"]


def test_group_selection_and_unknown_group(env):
    cfg, store = env
    _append(store, 1)
    sync = FakeSync(store)
    r = _run(cfg, store, sync=sync, groups=["g2"])
    assert [g for g, _ in sync.calls] == ["g2"] and r.record["groups"] == ["g2"]
    with pytest.raises(Exception, match="no group 'nope'"):
        _run(cfg, store, groups=["nope"])


def test_status_numbers_are_the_store_numbers(env):
    cfg, store = env
    for n in (3, 4, 5):
        _append(store, n, es=1_700_000_000_000 + n)
    with store.apply_lock("g1"):
        store.get("g1", 1)
        store.ack("g1", 1)
    st = deployment_status(cfg, with_source=False)
    raw = store.status()
    assert st["groups"]["g1"]["pending_batches"] == raw["groups"]["g1"]["pending_batches"] == 2
    assert st["groups"]["g1"]["pending_rows"] == raw["groups"]["g1"]["pending_rows"] == 9
    assert st["groups"]["g2"]["pending_rows"] == 12 and st["groups"]["g2"]["registered"] is False
    assert st["source"]["rows"] == raw["rows"] == 12 and st["source"]["last_batch"] == 3
    assert last_event_ms(store) == 1_700_000_000_000 + 5 + 4
    assert st["source"]["capture"]["last_event_age_s"] > 0 and st["source"]["capture"]["lag_s"] is None
    gs = group_status(store, ["g1"], now=10**10)
    assert gs["g1"]["oldest_pending_batch"] == 2 and gs["g1"]["lag_s"] > 0


def test_binlog_behind():
    logs = [("b.1", 1000), ("b.2", 500), ("b.3", 300)]
    assert binlog_behind({"logfile": "b.3", "logpos": 100}, ("b.3", 300), logs) == 200
    assert binlog_behind({"logfile": "b.1", "logpos": 900}, ("b.3", 120), logs) == 100 + 500 + 120
    assert binlog_behind({"logfile": "b.0", "logpos": 9}, ("b.3", 120), logs) is None  # purged: unknown
    assert binlog_behind(None, ("b.3", 1), logs) is None


def test_report_page_is_self_contained():
    runs = [{"run": f"r{i}", "started": f"2026-05-09T07:0{i}:00+00:00", "status": "ok" if i != 2 else "failed",
             "exit": 0, "seconds": 3.0, "capture": {"rows": 100 * i, "rows_per_s": 50.0 * i},
             "sync": {"g<1>": {"rows": 100 * i, "rows_per_s": 20.0 * i}},
             "lag": {"capture": {"lag_s": 0.5 * i}, "groups": {"g<1>": {"lag_s": i}}},
             "errors": [{"message": "<script>x</script>"}] if i == 2 else []} for i in range(5)]
    page = render(runs, source="shop", store="/data/s")
    assert page.count("<svg") == 4 and "<script>" not in page and "&lt;script&gt;" in page
    assert "g&lt;1&gt;" in page and "r4" in page and "http" not in page.replace("http://www.w3.org/2000/svg", "")
    assert "no data" in svg_chart("empty", [], {}, "rows/s")


def test_a_steady_stream_starts_spark_while_capture_runs_and_a_failed_run_does_not(env):
    """After a run that ended ok and applied rows, the next run starts Spark (in a thread) before
    capture is done; after a run that did not end ok, Spark waits for the checks, as on a first run."""
    cfg, store = env
    assert _run(cfg, store, capture_rows=3).record["status"] == "ok"   # applied rows: a steady stream
    started = threading.Event()

    def capture(cfg, follow):
        assert started.wait(10), "Spark did not start while capture ran"
        _append(store, 2)
        return Cap(2)

    def spark(rows):
        started.set()
        return "SPARK"

    r = run_once(cfg, spark_factory=spark, capture_fn=capture, sync_fn=FakeSync(store), with_source_lag=False,
                 load_fn=lambda cfg, g: g, check_fn=lambda cfg, plan, store: None)
    assert r.exit_code == EXIT_OK and store.cursor("g1") == store.cursor("g2") == 2

    def check(cfg, plan, store):
        raise TargetMismatchError(f"m-{plan}.yml: dbMapping.targetTable: target table t does not exist")

    _append(store, 1)
    calls = []
    r = run_once(cfg, spark_factory=lambda rows: calls.append(rows) or "SPARK", capture_fn=lambda cfg, follow: Cap(0),
                 sync_fn=FakeSync(store), with_source_lag=False, load_fn=lambda cfg, g: g, check_fn=check)
    assert r.record["status"] == "invalid"
    # the last run was ok: Spark may have started with this one (unused); the next one waits for the checks
    r = run_once(cfg, spark_factory=lambda rows: calls.append(("after", rows)), capture_fn=lambda cfg, follow: Cap(0),
                 sync_fn=FakeSync(store), with_source_lag=False, load_fn=lambda cfg, g: g, check_fn=check)
    assert r.record["status"] == "invalid" and not [c for c in calls if isinstance(c, tuple)]


def test_a_capture_refusal_logs_its_fix(env):
    """``sluice run`` prints a capture refusal's fix with it (the run log line had the message only)."""
    cfg, store = env
    with capture_logs() as logs:
        _run(cfg, store, capture_error=SourceError("binlog b.1 is not the file", hint="take a new snapshot"))
    failed = [e for e in logs if e["event"] == "capture failed"]
    assert failed and failed[0]["fix"] == "take a new snapshot", logs


def test_an_interrupt_py4j_turned_into_a_failed_call_is_still_an_interrupted_run(env):
    """SIGTERM during a call into the Spark JVM: py4j raises "Answer from Java side is empty"
    instead of the handler's KeyboardInterrupt (seen in the hour-long chaos soak). The handler's
    stop request makes the run what it is: interrupted, exit 130, nothing acked."""
    from sluice_common import stopping

    cfg, store = env

    class Py4JError(Exception):
        pass

    class Eaten(FakeSync):
        def __call__(self, cfg, group, spark, **kw):
            stopping.request()  # the handler ran; py4j's call failed with its own error instead
            raise Py4JError("Answer from Java side is empty")
    try:
        r = _run(cfg, store, capture_rows=3, sync=Eaten(store))
    finally:
        stopping.clear()
    assert r.exit_code == 130 and r.record["status"] == "interrupted"
    assert store.cursor("g1") == 0
