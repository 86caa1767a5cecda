"""A repair task keeps the group's apply lock as long as it waited for it (0.5-5 s): against a
follower whose rounds hold the lock for seconds, a fixed 0.5 s lease left the repair waiting 300 of
its 320 s (docs/benchmarks.md, bench/repair.py)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from pipeline.repair.guard import LEASE, MAX_LEASE, ChunkGuard, lease_for
from pipeline.state.locks import acquire

pytestmark = pytest.mark.unit


def test_the_lease_is_the_wait_within_its_bounds() -> None:
    assert lease_for(0.0) == LEASE
    assert lease_for(1.7) == 1.7
    assert lease_for(60.0) == MAX_LEASE


def test_a_task_that_waited_for_a_round_keeps_the_lock_that_long(tmp_path: Path) -> None:
    lock = tmp_path / "apply.g.lock"
    round_held = acquire(lock, "apply (g)", "a sync round")  # the follower's round
    released = threading.Timer(1.5, round_held.release)
    released.start()
    guard = ChunkGuard(str(lock), None, "mariadb", "g")  # type: ignore[arg-type] - no source needed
    try:
        guard.take()
        assert guard.waited >= 1.4
        guard.tick()  # a chunk done soon after: the lease (the wait) is not over
        assert guard._lock is not None
        time.sleep(1.0)
        guard.tick()  # still inside 1.5 s
        assert guard._lock is not None
        time.sleep(0.7)
        guard.tick()  # over: given back, a waiting sync takes it
        assert guard._lock is None
        acquire(lock, "apply (g)", "the next round").release()
    finally:
        released.cancel()
        guard.close()
