"""The executor side of a partition without Spark: decoding Arrow batches into Changes,
the order check, and cutting chunks of commitBatch per mapping."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from adapters.base import Change
from pipeline.job.feed import Decoded, Feed, Pipe, changes, check_order
from sluice_common.errors import SluiceError


def batch(rows: list[dict]) -> pa.RecordBatch:
    cols = ["midx", "kind", "database", "table", "d", "o", "pkNames", "mysqlType", "batchId", "seq", "row", "sub"]
    return pa.RecordBatch.from_pylist([{c: r.get(c) for c in cols} for r in rows])


def row(i: int, midx: int = 0, kind: str = "INSERT", old: dict | None = None, d: dict | None = None) -> dict:
    return {"midx": midx, "kind": kind, "database": "db", "table": "t",
            "d": json.dumps(d if d is not None else {"id": str(i), "v": None}),
            "o": json.dumps(old) if old is not None else None, "pkNames": '["id"]',
            "mysqlType": '{"id":"int","v":"text"}', "batchId": 1, "seq": i, "row": 0, "sub": 0}


def test_changes_are_decoded_column_by_column():
    pks, types = Decoded(()), Decoded({})
    b = batch([row(1), row(2, kind="UPDATE", old={"v": "x"}), {**row(3), "pkNames": None, "mysqlType": None}])
    midx, out = changes(b, pks, types)
    assert midx == [0, 0, 0]
    assert out[0] == Change("INSERT", "db", "t", {"id": "1", "v": None}, None, ("id",),
                                {"id": "int", "v": "text"}, (1, 1, 0))
    assert out[1].old == {"v": "x"} and out[1].kind == "UPDATE"
    assert out[2].pk_names == () and out[2].mysql_type == {}
    assert out[0].mysql_type is out[1].mysql_type  # decoded once per distinct text


def test_repeated_columns_keep_each_rows_value():
    rows = [{**row(i), "table": f"t{i % 3}", "database": None if i == 4 else "db",
             "mysqlType": '{"id":"int"}' if i % 2 else '{"id":"bigint"}'} for i in range(7)]
    _, out = changes(batch(rows), Decoded(()), Decoded({}))
    assert [c.table for c in out] == [f"t{i % 3}" for i in range(7)]
    assert [c.database for c in out] == ["db"] * 4 + [None] + ["db"] * 2
    assert [c.mysql_type["id"] for c in out] == ["bigint", "int"] * 3 + ["bigint"]
    assert out[1].mysql_type is out[3].mysql_type


def test_order_is_checked_within_and_across_batches():
    cs = [Change("INSERT", "db", "t", {}, seq=(1, i, 0)) for i in range(5)]
    start = (False, "", (-1, -1, -1))
    assert check_order(start, cs, 0) == (False, "", (1, 4, 0))
    with pytest.raises(SluiceError, match=r"\(1, 2, 0\) reached partition 3 out of order"):
        check_order(start, [cs[0], cs[3], cs[2]], 3)
    with pytest.raises(SluiceError, match="out of order"):
        check_order((False, "", (1, 9, 0)), cs, 0)


def test_key_grouped_rows_are_checked_by_key_then_seq_after_the_others():
    """A folding writer's rows come grouped by key (``hk``), each key in seq order, after the rows
    in plain seq order: an earlier seq of another key is in order, one of the same key is not."""
    cs = [Change("INSERT", "db", "t", {}, seq=(1, i, 0)) for i in range(6)]
    hks = [None, None, "10\x011", "10\x011", "9\x011", "9\x011"]
    order = [cs[0], cs[1], cs[4], cs[5], cs[2], cs[3]]  # seq 4, 5 under key "10"; seq 2, 3 under "9"
    last = check_order((False, "", (-1, -1, -1)), order, 0, hks)
    assert last == (True, "9\x011", (1, 3, 0))
    with pytest.raises(SluiceError, match="out of order"):
        check_order((False, "", (-1, -1, -1)), [cs[0], cs[1], cs[5], cs[4]], 0, [None, None, "7", "7"])
    with pytest.raises(SluiceError, match="out of order"):  # a plain row after a key-grouped one
        check_order((False, "", (-1, -1, -1)), [cs[2], cs[3]], 0, ["7", None])


class FakeRun:
    def __init__(self):
        self.flushed: list[tuple[int, list[int]]] = []

    def flush(self, midx: int, chunk: list[Change]) -> None:
        self.flushed.append((midx, [c.seq[1] for c in chunk]))


def test_feed_cuts_chunks_per_mapping_in_order():
    run = FakeRun()
    feed = Feed(run, [3, 2])
    cs = [Change("INSERT", "db", "t", {}, seq=(1, i, 0)) for i in range(10)]
    feed.add([0] * 4, cs[:4])                      # one mapping: sliced into chunks of 3
    feed.add([0, 1, 1, 0, 1, 1], cs[4:])           # mixed
    feed.drain()
    assert run.flushed == [(0, [0, 1, 2]), (1, [5, 6]), (0, [3, 4, 7]), (1, [8, 9])]
    feed.drain()
    assert len(run.flushed) == 4


def test_pipe_applies_in_order_on_its_own_thread_and_reports_the_first_failure():
    import threading
    import time

    class Run(FakeRun):
        def flush(self, midx, chunk):
            assert threading.current_thread().name == "sluice-apply"
            time.sleep(0.01)
            if chunk[0].seq[1] == 3:
                raise RuntimeError("boom")
            super().flush(midx, chunk)

    cs = [[Change("INSERT", "db", "t", {}, seq=(1, i, 0))] for i in range(3)]
    run = Run()
    pipe = Pipe(run)
    for c in cs:
        pipe.flush(0, c)
    pipe.finish()
    assert run.flushed == [(0, [0]), (0, [1]), (0, [2])]
    run, bad = Run(), [Change("INSERT", "db", "t", {}, seq=(1, 3, 0))]
    pipe = Pipe(run)
    pipe.flush(0, bad)
    pipe.flush(0, cs[0])
    with pytest.raises(RuntimeError, match="boom"):
        for _ in range(50):
            time.sleep(0.01)
            pipe.flush(0, cs[1])
    with pytest.raises(RuntimeError, match="boom"):
        pipe.finish()
    assert run.flushed == []   # nothing after the failure was applied
