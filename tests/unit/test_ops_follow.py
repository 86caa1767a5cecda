"""``sluice run --follow``'s loop with stand-ins for capture, sync and Spark, and a fake clock:
one session for every round, idle rounds off the run log, back-off of a failing group (never
acked, retried after the pre-flight again), pre-flight once, mapping files reloaded when they
change, SIGTERM between rounds, and the end-to-end freshness in status and metrics."""

from __future__ import annotations

import pytest

from pipeline.config import parse_config
from pipeline.job.driver import ApplyFailed
from pipeline.ops.follow import MAX_BACKOFF, Follower, mapping_files
from pipeline.ops.metrics import prometheus_text
from pipeline.ops.runlog import RunLog
from pipeline.ops.status import group_status
from pipeline.store import BatchStore
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
    assert r.record["status"] == "nothing" and clock.t == pytest.approx(1005.0), "one round a second"


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
    rec = f.round().record         # g1 sits out; the record says so
    assert rec["groups"] == ["g2"] and rec["follow"]["backoff"]["g1"] == {"failures": 2, "retry_in_s": 2.0}
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
