"""Bounded sync rounds (pipeline/job/rounds.py): a round's size by rows and by the rate recent
rounds reached, halved after a round that did not finish (also one whose process was killed:
the next process reads the round left in progress), grown again after rounds that finished; a
follower's claim on its groups, which other jobs leave the group to."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pipeline.config import SparkConfig, parse_config
from pipeline.job import rounds
from pipeline.job.rounds import DDL_UNITS, RoundSizer, follow_lock_path, follower_of, units
from pipeline.ops.follow import Follower
from pipeline.ops.run import run_once
from pipeline.store import BatchMeta
from pipeline.store.files import BatchStore
from sluice_common.errors import LockHeldError
from tests.unit.test_ops_run_plan import Cap, FakeSync, _append


def _meta(i: int, rows: int, ddl: int = 0) -> BatchMeta:
    return BatchMeta(i, f"b{i}", "", 0, rows + ddl, rows, {}, {}, False, "", ddl=tuple(range(ddl)))


def test_a_round_is_bounded_by_rows_and_by_seconds_at_the_recent_rate(tmp_path):
    rounds._WARM.discard("g1")
    s = RoundSizer.load(tmp_path, "g1", SparkConfig(roundRows=1000, roundSeconds=2.0))
    batches = [_meta(i, 300) for i in range(1, 11)]
    assert s.take(batches) == 3, "no rate known yet: roundRows alone bounds the round that measures it"
    s.begin(300)
    s.done(300, 30.0)                                             # the process's cold first round
    assert s.rate is None and s.budget() == 1000, "a cold round measures the JVM's start, not the rate"
    s.done(300, 0.5)                                              # 600 units/s, and the process is warm
    assert s.budget() == 1000 and s.take(batches) == 3            # 900 rows; a fourth batch would pass 1000
    assert s.take([_meta(1, 5000)]) == 1, "a round takes at least one batch"
    s.done(900, 9.0)                                              # the rate leans to the newest round
    assert s.rate == pytest.approx(350) and s.budget() == 700 and s.take(batches) == 2
    rounds._WARM.discard("g1")                                    # a new process: its JVM is cold
    assert RoundSizer.load(tmp_path, "g1", SparkConfig(roundRows=1000, roundSeconds=2.0)).budget() == 350
    assert units([_meta(1, 10, ddl=2)]) == 10 + 2 * DDL_UNITS, "a DDL weighs more than a row"


def test_a_small_round_that_drained_the_backlog_does_not_teach_the_rate(tmp_path):
    """A warm follower's rounds of a few rows each measure the per-round overhead (2 rows in 0.5 s:
    4 rows/s): learning it made the rounds one batch each when the load came (issue 38). Rounds cut
    by their budget, or at least half of it, teach the rate."""
    rounds._WARM.add("g1")
    s = RoundSizer.load(tmp_path, "g1", SparkConfig(roundRows=100_000, roundSeconds=10.0))
    for _ in range(5):
        assert s.take([_meta(1, 2)]) == 1
        s.done(2, 0.5)
    assert s.rate is None and s.budget() == 100_000, "the overhead of a round is not its rate"
    assert s.take([_meta(i, 20_000) for i in range(1, 11)]) == 5      # cut by its budget
    s.done(100_000, 4.0)
    assert s.rate == pytest.approx(25_000)
    assert s.take([_meta(1, 60_000)]) == 1                            # all that was pending, over half
    s.done(60_000, 6.0)
    assert s.rate == pytest.approx(17_500), "a round of at least half its budget teaches the rate too"
    s.take([_meta(1, 2)])
    s.done(2, 0.5)
    assert s.rate == pytest.approx(17_500)
    rounds._WARM.discard("g1")


def test_a_round_that_did_not_finish_halves_the_next_down_to_one_batch_then_grows(tmp_path):
    s = RoundSizer.load(tmp_path, "g1", SparkConfig(roundRows=10_000, roundSeconds=100.0))
    s.rate = 1e6
    rounds._WARM.add("g1")
    s.begin(8000)
    s.failed(8000)
    assert s.budget() == 4000
    for _ in range(20):
        s.failed(s.budget())
    assert s.budget() == 1 and s.take([_meta(1, 500), _meta(2, 500)]) == 1, "down to one batch"
    s.begin(500)
    s.done(500, 1.0)
    assert s.limit == 1000, "twice what the last round did"
    for _ in range(5):
        s.done(s.budget(), 0.01)
    assert s.limit is None and s.budget() == 10_000


def test_a_round_left_in_progress_by_a_killed_process_halves_the_next(tmp_path):
    """The round in progress is on disk: a process killed mid-round (kill -9, no handler runs)
    leaves it there, and the next process's sizer starts at half of it."""
    code = ("import os, sys; from pipeline.config import SparkConfig; from pipeline.job.rounds import RoundSizer;"
            f"s = RoundSizer.load({str(tmp_path)!r}, 'g1', SparkConfig());"
            "s.begin(6000); os.kill(os.getpid(), 9)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == -9
    s = RoundSizer.load(tmp_path, "g1", SparkConfig())
    assert s.limit == 3000 and s.open_units is None
    assert RoundSizer.load(tmp_path, "g1", SparkConfig()).limit == 3000, "halved once, not at every load"
    assert RoundSizer.load(tmp_path, "g2", SparkConfig()).limit is None, "per group"


@pytest.fixture
def env(tmp_path):
    cfg = parse_config({"source": {"name": "s1"}, "store": {"path": str(tmp_path / "store")},
                        "groups": [{"groupId": "g1"}, {"groupId": "g2"}]}, file=str(tmp_path / "sluice.yml"))
    return cfg, BatchStore(cfg.store_dir())


def test_other_jobs_leave_a_group_to_its_follower(env):
    """While a follower holds its claim on g1, a cron ``sluice run`` is refused for g1 before
    Spark starts (locked, naming the follower) and applies g2; a second follower of g1 is
    refused; once the follower ends, the cron run applies g1 again."""
    cfg, store = env
    _append(store, 3)
    f = Follower(cfg, ["g1"], None)
    f.claim()
    try:
        assert follower_of(store, "g1") is not None and follower_of(store, "g2") is None
        assert follow_lock_path(store, "g1").name == "follow.g1.lock"
        assert "follow:g1" in store.status()["locks"]
        sync = FakeSync(store)
        r = run_once(cfg, spark_factory=lambda rows: "SPARK", capture_fn=lambda cfg, follow: Cap(0), sync_fn=sync,
                     load_fn=lambda cfg, g: g, check_fn=lambda *a: None, with_source_lag=False)
        assert [g for g, _ in sync.calls] == ["g2"] and store.cursor("g1") == 0
        err = next(e for e in r.record["errors"] if e["group"] == "g1")
        assert err["type"] == "LockHeldError" and "a follower applies group g1" in err["message"]
        with pytest.raises(LockHeldError):
            Follower(cfg, ["g1"], None).claim()
    finally:
        f.release()
    assert follower_of(store, "g1") is None
    sync = FakeSync(store)
    run_once(cfg, spark_factory=lambda rows: "SPARK", capture_fn=lambda cfg, follow: Cap(0), sync_fn=sync,
             load_fn=lambda cfg, g: g, check_fn=lambda *a: None, with_source_lag=False)
    assert store.cursor("g1") == 1


def test_a_follower_refused_by_the_apply_lock_tries_again_next_round_without_backing_off(env):
    cfg, store = env
    _append(store, 2)
    f = Follower(cfg, ["g1"], lambda rows: "SPARK", capture_fn=lambda cfg, follow: Cap(0), sync_fn=FakeSync(store),
                 load_fn=lambda cfg, g: g, check_fn=lambda *a: None, with_source_lag=False)
    with store.apply_lock("g1"):  # a cron run's last round, a repair chunk
        rec = f.round().record
    assert rec["status"] == "locked" and f.states["g1"].failures == 0 and f.due() == ["g1"]
    f.round()
    assert store.cursor("g1") == 1


def test_round_rows_0_leaves_rounds_unbounded(tmp_path):
    """``spark.roundRows: 0``: every round takes what ``--max-batches`` gave, a round cut short
    does not shrink the next, and nothing is recorded (the crash-window tests rely on it)."""
    s = RoundSizer.load(tmp_path, "g1", SparkConfig(roundRows=0))
    batches = [_meta(i, 300) for i in range(1, 11)]
    assert not s.bounded and s.take(batches) == 10
    s.begin(3000)
    s.failed(3000)
    s.begin(3000)  # left in progress, as by a kill -9
    assert not (tmp_path / "rounds").exists()
    (tmp_path / "rounds").mkdir()
    (tmp_path / "rounds" / "g1.json").write_text('{"rate": 1.0, "limit": 5, "open": 3000}')
    assert RoundSizer.load(tmp_path, "g1", SparkConfig(roundRows=0)).take(batches) == 10


def test_a_sync_starts_no_round_once_a_stop_was_asked_for(tmp_path, monkeypatch):
    """A SIGTERM whose KeyboardInterrupt was lost (raised inside a finalizer, which Python ignores)
    leaves only the stop flag (sluice_common/stopping.py): the sync must take no batch after it, so
    nothing is applied or acked after the signal (a CI run's follower acked a round 3 s after one)."""
    from types import SimpleNamespace as NS

    from pipeline.job import driver
    from sluice_common import stopping

    cfg = parse_config({"source": {"name": "s1"}, "store": {"path": str(tmp_path / "store")},
                        "groups": [{"groupId": "g1"}]}, file=str(tmp_path / "sluice.yml"))
    store = BatchStore(cfg.store_dir())
    _append(store, 3)
    taken = []
    monkeypatch.setattr(store, "get", lambda group, n=1: taken.append(group) or [])
    monkeypatch.setattr(driver, "open_store", lambda cfg, create=False: store)
    plan = NS(mappings=(), group_id="g1", key_plan=lambda: None, default_schemas=dict)
    stopping.request()
    try:
        with pytest.raises(KeyboardInterrupt):
            driver.run_sync(cfg, "g1", None, plan=plan, locked=True, follower=True)
        assert taken == [] and store.cursor("g1") == 0
    finally:
        stopping.clear()
    driver.run_sync(cfg, "g1", None, plan=plan, locked=True, follower=True)  # no stop: it asks for batches
    assert taken == ["g1"]
