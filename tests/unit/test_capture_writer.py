"""The capture writer thread: batches stored in order, a failure raised to the capture thread,
and nothing stored after a failure (so the store never has a gap)."""

from __future__ import annotations

import pytest

from pipeline.capture.writer import AsyncAppender
from pipeline.store.files import BatchStore
from sluice_common.errors import StoreError


def _pos(n: int) -> dict:
    return {"logfile": "bin.000001", "logpos": n, "gtid": None, "nextId": n}


def _line(i: int) -> bytes:
    return b'{"id":%d,"database":"d","table":"t","isDdl":false,"type":"INSERT","data":[{"id":"%d"}]' % (i, i)


def test_batches_are_stored_in_order(tmp_path):
    store = BatchStore(tmp_path / "store")
    with store.capture_lock():
        w = AsyncAppender(store, depth=1)
        for b in range(1, 8):
            w.append([_line(b * 10 + i) for i in range(3)], rows=3, ddl=(), start=_pos(b), end=_pos(b + 1))
        w.drain()
        w.close()
        metas = store.batches()
        assert [m.end["logpos"] for m in metas] == list(range(2, 9))
        assert [r["id"] for r in store.read(metas[2])] == [30, 31, 32]
        assert all(r["batchId"] == 3 for r in store.read(metas[2]))


def test_a_failure_is_raised_and_nothing_after_it_is_stored(tmp_path):
    store = BatchStore(tmp_path / "store")
    with store.capture_lock():
        w = AsyncAppender(store)
        w.append([_line(1)], rows=1, ddl=(), start=_pos(1), end=_pos(2))
        w.append([_line(2)], rows=1, ddl=(), start=_pos(2), end={"logpos": float("nan")})  # not JSON: refused
        with pytest.raises(StoreError):  # on the next append or on drain, whichever comes after it
            w.append([_line(3)], rows=1, ddl=(), start=_pos(3), end=_pos(4))
            w.drain()
        w.drain()  # raised once
        w.close()
        assert [m.end["logpos"] for m in store.batches()] == [2]


def test_keep_alive_runs_on_the_writer_thread_after_the_queued_batches(tmp_path):
    """The store's writes stay on one thread, in order: a keep-alive after the batches before it."""
    import threading

    store = BatchStore(tmp_path / "store")
    seen = []
    store.keep_alive = lambda: seen.append((threading.current_thread().name, len(store.batches())))
    with store.capture_lock():
        w = AsyncAppender(store, depth=1)
        for b in range(1, 4):
            w.append([_line(b)], rows=1, ddl=(), start=_pos(b), end=_pos(b + 1))
        w.keep_alive()
        w.drain()
        w.close()
    assert seen == [("capture-writer", 3)]


def test_nothing_is_stored_after_a_failure_until_drain_even_once_its_error_was_raised(tmp_path):
    """The capture thread may see the error (here on a keep-alive) while batches are still queued
    or handed over: storing them would leave the failed batch's changes out for good, since the
    runner resumes from the store's position after ``drain()``."""
    import time

    store = BatchStore(tmp_path / "store")
    real = store.append_lines

    def failing_second(lines, **kw):
        if kw["end"]["logpos"] == 3:
            raise StoreError("disk full (test)")
        return real(lines, **kw)

    store.append_lines = failing_second
    with store.capture_lock():
        w = AsyncAppender(store)
        w.append([_line(1)], rows=1, ddl=(), start=_pos(1), end=_pos(2))
        w.append([_line(2)], rows=1, ddl=(), start=_pos(2), end=_pos(3))
        deadline = time.time() + 10
        while w._error is None and time.time() < deadline:
            time.sleep(0.01)
        with pytest.raises(StoreError):
            w.keep_alive()
        w.append([_line(3)], rows=1, ddl=(), start=_pos(3), end=_pos(4))  # would skip batch 2's changes
        w.drain()
        assert [m.end["logpos"] for m in store.batches()] == [2]
        w.append([_line(2)], rows=1, ddl=(), start=_pos(2), end=_pos(30))  # resumed from the store: taken again
        w.drain()
        w.close()
        assert [m.end["logpos"] for m in store.batches()] == [2, 30]
