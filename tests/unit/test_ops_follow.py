"""``sluice run --follow``'s loop with stand-ins for capture, sync and Spark, and a fake clock:
one session for every round, idle rounds off the run log, back-off of a failing group (never
acked, retried after the pre-flight again), pre-flight once, mapping files reloaded when they
change, SIGTERM between rounds, and the end-to-end freshness in status and metrics."""

from __future__ import annotations

import pytest

from pipeline.config import parse_config
from pipeline.job.segment import ApplyFailed
from pipeline.ops.follow import MAX_BACKOFF, Follower, mapping_files
from pipeline.ops.metrics import prometheus_text
from pipeline.ops.status import group_status
from pipeline.state.runlog import RunLog
from pipeline.store.files import BatchStore
from tests.unit.test_ops_run_plan import Cap, FakeSync, _append


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


@pytest.fixture
def env(tmp_path):
    (tmp_path / "maps").mkdir()
    (tmp_path / "maps" / "a.yml").write_text("x: 1\n")
    cfg = parse_config({"source": {"name": "s1"}, "store": {"path": str(tmp_path / "store")},
                        "groups": [{"groupId": "g1", "mappings": ["maps/*.yml"]}, {"groupId": "g2"}],
                        "metrics": {"json": "m/s.json"}}, file=str(tmp_path / "sluice.yml"))
    return cfg, BatchStore(cfg.store_dir()), tmp_path


def _follower(cfg, store, clock, *, plan_rows=None, sync=None, checks=None, loads=None, sessions=None, **kw):
    """A Follower whose capture appends ``plan_rows[round]`` rows (if any) each round."""
    plan_rows = plan_rows or {}
    rounds = {"n": 0}

    def capture(cfg, follow=False):
        rounds["n"] += 1
        rows = plan_rows.get(rounds["n"], 0)
        if rows:
            _append(store, rows)
        return Cap(rows)

    def spark_factory(pending):
        (sessions if sessions is not None else []).append(pending)
        return "SPARK"

    def check(cfg, plan, store):
        (checks if checks is not None else []).append(plan)

    def load(cfg, g):
        (loads if loads is not None else []).append(g)
        return g

    return Follower(cfg, ["g1", "g2"], spark_factory, interval=1.0, capture_fn=capture,
                    sync_fn=sync or FakeSync(store), load_fn=load, check_fn=check, with_source_lag=False,
                    clock=clock, sleep=clock.sleep, **kw)


def test_one_session_idle_rounds_off_the_log_and_preflight_once(env):
    cfg, store, _ = env
    clock, sessions, checks = Clock(), [], []
    sync = FakeSync(store)
    f = _follower(cfg, store, clock, plan_rows={1: 3, 4: 2}, sync=sync, sessions=sessions, checks=checks)
    r = f.run(max_rounds=6)
    assert sessions == [0], "one session for every round, started once, with full JIT (pending 0)"
    assert [g for g, _ in sync.calls] == ["g1", "g2", "g1", "g2"]
    assert checks == ["g1", "g2"], "pre-flight once per group while nothing calls for another"
    runs = RunLog(store.root).runs()
    assert [x["status"] for x in runs] == ["ok", "ok"], "idle rounds write no run-log line"
    assert [x["follow"]["round"] for x in runs] == [1, 4] and runs[0]["follow"]["id"] == f.follower_id
    assert r.record["follow"]["round"] == 4 and r.exit_code == 0, "the last round that did something"
    assert clock.t == pytest.approx(1005.0), "one round a second"


def test_a_failing_group_backs_off_is_never_acked_and_is_checked_again(env):
    cfg, store, _ = env
    clock, checks = Clock(), []
    sync = FakeSync(store, fail={"g1": ApplyFailed("1 of 1 partitions failed; no batch was acked")})
    f = _follower(cfg, store, clock, plan_rows={1: 4}, sync=sync, checks=checks)
    f.round()
    assert store.cursor("g1") == 0 and store.cursor("g2") == 1
    assert f.states["g1"].failures == 1 and f.due() == ["g2"]
    clock.sleep(1.0)
    assert f.due() == ["g1", "g2"]
    f.round()                      # fails again: 2 s back-off
    assert f.states["g1"].failures == 2 and f.states["g1"].next_try == pytest.approx(clock.t + 2.0)
    rec = f.round().record         # g1 sits out; the record says so, as an error of the round
    assert rec["groups"] == ["g2", "g1"] and rec["follow"]["backoff"]["g1"] == {"failures": 2, "retry_in_s": 2.0}
    assert rec["status"] == "failed" and [e["type"] for e in rec["errors"]] == ["BackingOff"]
    assert "last error: 1 of 1 partitions failed" in rec["errors"][0]["message"]
    assert [g for g, _ in sync.calls].count("g1") == 2
    del sync.fail["g1"]            # the target is back
    clock.sleep(2.0)
    f.round()
    assert store.cursor("g1") == 1 and f.states["g1"].failures == 0
    assert checks.count("g1") == 3, "each try after a failure runs the pre-flight again"
    for n in range(1, 12):
        f.states["g1"].failures = n
        f._after({"errors": [{"group": "g1"}], "sync": {}}, ["g1"])
        assert f.states["g1"].next_try - clock.t <= MAX_BACKOFF


def test_a_ddl_calls_for_a_new_preflight_and_changed_files_are_loaded_again(env):
    cfg, store, tmp = env
    clock, checks, loads = Clock(), [], []
    f = _follower(cfg, store, clock, checks=checks, loads=loads)
    f.round()
    f.round()
    assert loads == ["g1", "g2"]
    (tmp / "maps" / "b.yml").write_text("y: 2\n")
    assert len(mapping_files(cfg, "g1")) == 2
    f.round()
    assert loads == ["g1", "g2", "g1"]
    f._after({"errors": [], "sync": {"g2": {"ddl": 1}}}, ["g2"])
    assert not f.states["g2"].checked and f.states["g1"].checked is False  # g1: reloaded, not synced since


def test_sigterm_between_rounds_stops_with_130(env):
    cfg, store, _ = env
    clock = Clock()
    f = _follower(cfg, store, clock, plan_rows={1: 1})

    def interrupted(_s):
        raise KeyboardInterrupt
    f.sleep = interrupted
    r = f.run()
    assert r.exit_code == 130 and r.record["status"] == "interrupted" and f.rounds == 1 and f.spark is None


def test_freshness_is_the_commit_time_of_the_newest_applied_row(env):
    cfg, store, _ = env
    _append(store, 3, es=1_700_000_000_000)
    _append(store, 2, es=1_700_000_100_000)
    gs = group_status(store, ["g1"], now=1_700_000_200.0, capture_behind=0)["g1"]
    assert gs["applied_event_at"] is None and gs["freshness_s"] is None and gs["caught_up"] is False
    store.ack("g1", 1)
    gs = group_status(store, ["g1"], now=1_700_000_200.0, capture_behind=0)["g1"]
    assert gs["freshness_s"] == pytest.approx(200.0 - 0.002) and not gs["caught_up"]
    store.ack("g1", 2)
    gs = group_status(store, ["g1"], now=1_700_000_200.0, capture_behind=0)["g1"]
    assert gs["freshness_s"] == pytest.approx(100.0 - 0.001) and gs["caught_up"]
    text = prometheus_text({"source": "s1", "lag": {"groups": {"g1": gs}}})
    assert 'sluice_group_freshness_seconds{group="g1",source="s1"} 99.999' in text


def test_a_group_backing_off_is_a_failure_in_status_metrics_and_the_last_success(env):
    """Rounds in which a failing group sits out its back-off are not successes: the run log,
    ``status`` and the metrics show the group failing with its last error, and the last success
    stays at the last round in which every group applied or had nothing to do. Idle rounds of
    a backing-off group are recorded at most every IDLE_METRICS_SECONDS (no run-log flood)."""
    from pipeline.ops.status import deployment_status

    cfg, store, tmp = env
    clock = Clock()
    sync = FakeSync(store)
    f = _follower(cfg, store, clock, plan_rows={1: 2, 3: 1, 5: 1}, sync=sync)
    f.round()                                      # both apply: a success
    ok_at = RunLog(store.root).last_success()["finished"]
    clock.sleep(1.0)
    f.round()
    sync.fail["g1"] = ApplyFailed("target down; no batch was acked")
    for _ in range(40):                            # g1 fails, then backs off for 1, 2, 4, 8, 16 s...
        clock.sleep(1.0)
        f.round()
    runs = RunLog(store.root).runs()
    assert RunLog(store.root).last_success()["finished"] == ok_at
    after = [r for r in runs if r["follow"]["round"] > 2]
    assert after and all(r["status"] == "failed" for r in after)
    held = [r for r in after if any(e["type"] == "BackingOff" for e in r["errors"])]
    assert held and all("last error: target down" in e["message"] for r in held for e in r["errors"]
                        if e["type"] == "BackingOff")
    assert len(after) <= 2 + 40 // 15 + 3, "idle back-off rounds are recorded at most every 15 s"
    st = deployment_status(cfg, with_source=False)
    lr = st["groups"]["g1"]["last_run"]
    assert lr["ok"] is False and "target down" in lr["errors"][0]["message"]
    assert st["groups"]["g2"]["last_run"]["ok"] is True and st["last_success_at"] == ok_at
    import json

    m = json.loads((tmp / "m" / "s.json").read_text())
    assert m["run"]["status"] == "failed" and m["last_success_at"] == ok_at
    text = prometheus_text(m["run"], RunLog(store.root).last_success())
    assert 'sluice_last_run_sync_success{group="g1",source="s1"} 0.0' in text
    assert 'sluice_last_run_success{source="s1"} 0.0' in text
    del sync.fail["g1"]
    clock.sleep(MAX_BACKOFF)
    f.round()
    assert RunLog(store.root).runs()[-1]["status"] == "ok" and store.cursor("g1") == store.cursor("g2")


def test_rounds_end_with_the_outcome_of_the_last_round_that_did_something(env):
    """``--follow --rounds 2``: a failed round followed by an idle one exits 1, not 4 (nothing);
    work followed by an idle round exits 0."""
    cfg, store, _ = env
    sync = FakeSync(store, fail={"g1": ApplyFailed("1 of 1 partitions failed; no batch was acked")})
    f = _follower(cfg, store, Clock(), plan_rows={1: 2}, sync=sync)
    r = f.run(max_rounds=2)
    assert r.exit_code == 1 and r.record["status"] == "failed"
    f = _follower(cfg, store, Clock(), plan_rows={1: 2}, sync=FakeSync(store))
    r = f.run(max_rounds=3)
    assert r.exit_code == 0 and r.record["status"] == "ok" and r.record["follow"]["round"] == 1
    f = _follower(cfg, store, Clock(), sync=FakeSync(store))
    assert f.run(max_rounds=2).exit_code == 4


def test_a_run_refused_as_locked_is_not_the_groups_last_run(env):
    """A cron ``sluice run`` refused because the follower held the group's lock: ``status`` shows
    the follower's round as the group's last run, not "FAILED, nothing acked"; the refused run
    writes no metrics over the follower's."""
    import json

    from pipeline.ops.run import run_once
    from pipeline.ops.status import deployment_status
    from sluice_common.errors import LockHeldError

    cfg, store, tmp = env
    clock = Clock()
    f = _follower(cfg, store, clock, plan_rows={1: 2})
    f.round()
    metrics = (tmp / "m" / "s.json").read_text()
    _append(store, 1)
    def capture(cfg, follow):  # as run_capture when another process holds the capture lock
        raise LockHeldError("the capture lock is held by pid 1 (sluice run --follow)")
    with store.apply_lock("g1"), store.apply_lock("g2"):
        r = run_once(cfg, spark_factory=lambda rows: "SPARK", capture_fn=capture,
                     sync_fn=FakeSync(store), load_fn=lambda cfg, g: g, check_fn=lambda *a: None,
                     with_source_lag=False)
    assert r.record["status"] == "locked" and r.exit_code == 3
    st = deployment_status(cfg, with_source=False)
    assert st["last_run"]["status"] == "locked"
    for g in ("g1", "g2"):
        lr = st["groups"][g]["last_run"]
        assert lr["ok"] is True and lr["run"] == RunLog(store.root).runs()[0]["run"], lr
    assert (tmp / "m" / "s.json").read_text() == metrics
    assert json.loads(metrics)["run"]["status"] == "ok"


def test_a_jvm_killed_while_the_session_starts_ends_the_follower(env, monkeypatch):
    """The JVM died while the session was starting (pyspark's process-wide gateway is dead): no
    session can start in this process any more, so the follower ends, exit 1, for its supervisor
    to start a new one, instead of failing every round (found by tests/e2e/test_chaos.py)."""
    from pyspark import SparkContext

    class DeadGateway:  # pyspark's launch_gateway sets ``gateway.proc`` to the JVM it started
        class proc:  # noqa: N801 - the attribute's name
            @staticmethod
            def poll() -> int:
                return -9

    monkeypatch.setattr(SparkContext, "_gateway", DeadGateway(), raising=False)
    cfg, store, _ = env
    clock = Clock()
    f = _follower(cfg, store, clock, plan_rows={1: 5})

    def no_spark(pending):
        raise ConnectionRefusedError(111, "Connection refused")
    f.spark_factory = no_spark
    r = f.run(max_rounds=5)
    assert r.exit_code == 1 and r.record["status"] == "failed" and f.rounds == 1



def test_a_sigterm_whose_interrupt_was_lost_stops_the_follower_after_its_round(env):
    """The chaos soak's SIGTERM once waited 90 s for a follower that went on round after round: the
    handler's KeyboardInterrupt, raised during a call into the Spark JVM, came out of py4j as a
    failed call ("Answer from Java side is empty"), a failed round like any other. The handler's
    stop request stays (sluice_common/stopping.py): the round in progress ends, then the follower
    stops with 130."""
    from sluice_common import stopping

    cfg, store, _ = env
    clock = Clock()
    f = _follower(cfg, store, clock, plan_rows={1: 1, 2: 1, 3: 1})
    rounds = f.round

    def round_whose_interrupt_is_lost():
        out = rounds()
        if f.rounds == 2:
            stopping.request()  # the handler ran; its KeyboardInterrupt went nowhere
        return out
    f.round = round_whose_interrupt_is_lost
    try:
        r = f.run(max_rounds=10)
    finally:
        stopping.clear()
    assert r.exit_code == 130 and r.record["status"] == "interrupted" and f.rounds == 2
