"""Transaction-aligned batching and split transactions, against a real BatchStore (no server)."""

from __future__ import annotations

from pymysqlreplication.constants import FIELD_TYPE as T

from pipeline.capture.batcher import Batcher
from pipeline.capture.columns import ColumnSpec
from pipeline.capture.items import Begin, Commit, Rows, Statement, Tick
from pipeline.capture.position import Position
from pipeline.capture.rowcodec import TableCodec
from pipeline.config import BatchLimits
from pipeline.store.files import BatchStore

CODEC = TableCodec.build("db", "t", [ColumnSpec("id", T.LONG, is_pk=True)], [0])
START = Position("bin.000001", 4, "0-1-0", 1)


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def tx(n_events: int, rows_per_event: int, pos: int, seq: int):
    """Items of one transaction starting at ``pos`` with GTID 0-1-seq."""
    items = [Begin(f"0-1-{seq}", "bin.000001", pos, f"0-1-{seq - 1}", 0)]
    for e in range(n_events):
        rows = [{"id": str(pos * 1000 + e * 100 + r)} for r in range(rows_per_event)]
        items.append(Rows("INSERT", CODEC, rows, "", "bin.000001", pos + 10 + e, 0, e + 1, 50))
    items.append(Commit("bin.000001", pos + 100, f"0-1-{seq}", 0))
    return items


def run(tmp_path, items, limits, start=START, clock=None):
    store = BatchStore(tmp_path / "store")
    with store.capture_lock():
        b = Batcher(store, limits, start, clock or Clock())
        for it in items:
            b.feed(it)
        b.finish()
    return store, b


def test_whole_transactions_per_batch(tmp_path):
    items = tx(2, 3, 100, 1) + tx(2, 3, 200, 2) + tx(1, 3, 300, 3)
    store, b = run(tmp_path, items, BatchLimits(maxRows=10))
    metas = store.batches()
    assert [m.rows for m in metas] == [6, 9]  # tx 2 would overflow batch 1: it starts batch 2
    assert metas[0].end == {"logfile": "bin.000001", "logpos": 200, "gtid": "0-1-1", "nextId": 3}
    assert metas[1].start == metas[0].end and not any(m.split for m in metas)
    recs = [r for m in metas for r in store.read(m)]
    assert [r["id"] for r in recs] == [1, 2, 3, 4, 5] and [r["gtid"] for r in recs][-1] == "0-1-3"
    assert b.transactions == 3 and b.rows == 15


def test_large_transaction_is_split_with_skip_events(tmp_path):
    items = tx(1, 2, 100, 1) + tx(6, 4, 200, 2) + tx(1, 1, 300, 3)
    store, _ = run(tmp_path, items, BatchLimits(maxRows=8))
    metas = store.batches()
    splits = [m for m in metas if m.split]
    assert splits and metas[0].rows == 2 and not metas[0].split  # complete transaction first
    first = splits[0].end
    assert first["logpos"] == 200 and first["gtid"] == "0-1-1" and first["skipEvents"] == 2
    assert first["splitGtid"] == "0-1-2"
    assert sum(m.rows for m in metas) == 2 + 24 + 1
    assert not metas[-1].split and metas[-1].end["gtid"] == "0-1-3"


def test_resume_inside_a_split_transaction_continues_counting(tmp_path):
    start = Position("bin.000001", 200, "0-1-1", 4, skip_events=2, split_gtid="0-1-2")
    items = [i for i in tx(6, 4, 200, 2) if not (isinstance(i, Rows) and i.event_no <= 2)]
    store, _ = run(tmp_path, items, BatchLimits(maxRows=8), start=start)
    metas = store.batches()
    assert metas[0].split and metas[0].end["skipEvents"] == 4 and metas[0].start == start.to_dict()
    assert store.read(metas[0])[0]["id"] == 4
    assert not metas[-1].split and metas[-1].end["logpos"] == 300


def test_ddl_counts_as_a_row_and_empty_progress_is_stored_at_finish(tmp_path):
    items = [Begin("0-1-1", "bin.000001", 10, "0-1-0", 0),
             Statement("TRUNCATE", "db", "t", True, "TRUNCATE t", "bin.000001", 11, 0),
             Commit("bin.000001", 50, "0-1-1", 0)]
    store, _ = run(tmp_path, items, BatchLimits())
    (meta,) = store.batches()
    assert meta.rows == 1 and store.read(meta)[0]["type"] == "TRUNCATE"
    # only filtered transactions: an empty batch still records the position progress
    store2, _ = run(tmp_path / "b", [Begin("0-1-2", "bin.000001", 60, "0-1-1", 0),
                                     Commit("bin.000001", 90, "0-1-2", 0)], BatchLimits())
    (empty,) = store2.batches()
    assert empty.records == 0 and empty.end["logpos"] == 90


def test_time_limit_cuts_on_idle(tmp_path):
    clock = Clock()
    store = BatchStore(tmp_path / "store")
    with store.capture_lock():
        b = Batcher(store, BatchLimits(maxSeconds=1.0), START, clock)
        for it in tx(1, 1, 100, 1):
            b.feed(it)
        b.feed(Tick(None))
        assert not store.batches()
        clock.t = 2.0
        b.feed(Tick(None))
        assert len(store.batches()) == 1


def test_heartbeats_of_an_idle_source_ask_the_store_to_keep_alive(tmp_path):
    """Only when nothing is pending: not inside a transaction, not with a batch to come."""
    clock, calls = Clock(), []
    store = BatchStore(tmp_path / "store")
    with store.capture_lock():
        b = Batcher(store, BatchLimits(maxSeconds=1.0), START, clock, idle=lambda: calls.append(clock.t))
        b.feed(Tick(None))
        assert calls == [0.0]
        items = tx(1, 1, 100, 1)
        b.feed(items[0])
        b.feed(Tick(None))  # a transaction is open
        for it in items[1:]:
            b.feed(it)
        b.feed(Tick(None))  # its batch is pending
        assert calls == [0.0]
        clock.t = 2.0
        b.feed(Tick(None))  # the pending batch is stored
        b.feed(Tick(None))
        assert calls == [0.0, 2.0] and len(store.batches()) == 1


def test_every_stored_end_names_the_server_and_the_files_creation(tmp_path):
    """The runner's stamp (server id/UUID, the file's format description time) is on every batch end,
    split parts included, and the next batch starts where the stamped end says."""
    store = BatchStore(tmp_path / "store")
    with store.capture_lock():
        b = Batcher(store, BatchLimits(maxRows=4), START, Clock(),
                    stamp=lambda p: p.with_(server_id=7, server_uuid="u-7", file_ts=1234))
        for it in tx(1, 2, 100, 1) + tx(6, 4, 200, 2) + tx(1, 1, 300, 3):
            b.feed(it)
        b.finish()
    metas = store.batches()
    assert any(m.split for m in metas) and len(metas) > 2
    assert all((m.end["serverId"], m.end["serverUuid"], m.end["fileTs"]) == (7, "u-7", 1234) for m in metas)
    assert all(later.start == earlier.end for earlier, later in zip(metas, metas[1:], strict=False))
    assert Position.from_dict(metas[-1].end).server_id == 7
