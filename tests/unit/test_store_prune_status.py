"""BatchStore maintenance: prune never drops an unacked batch; status reports progress."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from pipeline.store.files import BatchStore
from sluice_common.errors import StoreError


def make_store(root: Path, n: int) -> BatchStore:
    """Batches 1..n; batch i holds one record with i rows."""
    store = BatchStore(root)
    with store.capture_lock():
        for i in range(1, n + 1):
            store.append([{"type": "INSERT", "data": [{"id": str(k)} for k in range(i)]}],
                         start={"p": i - 1}, end={"p": i})
    return store


def ack_to(store: BatchStore, group: str, upto: int) -> None:
    for meta in store.get(group, upto - store.cursor(group)):
        store.ack(group, meta.batch_id)
    store.rollback(group)


def test_prune_without_groups_deletes_nothing(tmp_path: Path) -> None:
    store = make_store(tmp_path, 3)
    assert store.prune() == [] and store.batch_ids() == [1, 2, 3]


def test_prune_keeps_every_unacked_batch(tmp_path: Path) -> None:
    store = make_store(tmp_path, 6)
    ack_to(store, "fast", 5)
    ack_to(store, "slow", 3)
    store.get("idle", 1)  # registered, acked nothing: protects everything
    assert store.prune(retain=0) == []
    store.set_cursor("idle", 4)
    deleted = store.prune(retain=1)
    assert [m.batch_id for m in deleted] == [1, 2]  # <= min cursor 3, newest 1 of those kept
    assert store.batch_ids() == [3, 4, 5, 6]
    assert not (tmp_path / "batches" / "000000000001.jsonl").exists()
    assert [m.batch_id for m in store.prune(retain=0)] == [3]
    assert store.batch_ids() == [4, 5, 6]
    assert [m.batch_id for m in store.get("slow", 10)] == [4, 5, 6]


def test_prune_keeps_the_newest_batch_and_ids_continue(tmp_path: Path) -> None:
    store = make_store(tmp_path, 3)
    ack_to(store, "g", 3)
    assert [m.batch_id for m in store.prune(retain=0)] == [1, 2]
    assert store.batch_ids() == [3] and store.last_position() == {"p": 3}
    reopened = BatchStore(tmp_path)
    with reopened.capture_lock():
        assert reopened.append([], start={"p": 3}, end={"p": 4}).batch_id == 4


def test_prune_rejects_bad_retain(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="retain"):
        make_store(tmp_path, 1).prune(retain=-1)


def test_prune_finishes_a_crashed_prune(tmp_path: Path) -> None:
    store = make_store(tmp_path, 3)
    ack_to(store, "g", 2)
    (tmp_path / "batches" / "000000000001.meta.json").unlink()  # a prune killed between the two unlinks
    with store.capture_lock() as held:
        assert held.cleaned == [str(tmp_path / "batches" / "000000000001.jsonl")]
    assert sorted(os.listdir(tmp_path / "batches"))[0] == "000000000002.jsonl"


def test_status(tmp_path: Path) -> None:
    store = make_store(tmp_path, 4)  # rows: 1, 2, 3, 4
    ack_to(store, "es", 1)
    ack_to(store, "rdb", 3)
    st = store.status()
    assert st["batches"] == 4 and (st["first_batch"], st["last_batch"]) == (1, 4)
    assert st["last_position"] == {"p": 4} and st["rows"] == 10 and st["root"] == str(tmp_path)
    assert st["groups"] == {
        "es": {"cursor": 1, "pending_batches": 3, "pending_rows": 9},
        "rdb": {"cursor": 3, "pending_batches": 1, "pending_rows": 4},
    }
    assert st["locks"] == {}
    with store.capture_lock(), store.apply_lock("es"):
        locks = store.status()["locks"]
        assert set(locks) == {"capture", "apply:es"}
        assert locks["capture"]["pid"] == os.getpid() and locks["capture"]["host"] == socket.gethostname()
        assert locks["capture"]["alive"] is True and locks["apply:es"]["since"]
    assert store.status()["locks"] == {}


def test_status_of_an_empty_store(tmp_path: Path) -> None:
    st = BatchStore(tmp_path).status()
    assert (st["batches"], st["first_batch"], st["last_batch"], st["last_position"]) == (0, None, None, None)


def test_a_group_added_after_a_prune_is_refused_with_commands_that_work(tmp_path: Path) -> None:
    """A group new to the store needs batch 1, which was pruned (only registered groups protect
    batches): refused, naming the CLI commands; the cursor the hint names is accepted."""
    store = make_store(tmp_path, 4)
    ack_to(store, "g1", 3)
    assert [m.batch_id for m in store.prune(retain=0)] == [1, 2, 3]
    with pytest.raises(StoreError) as e:
        store.get("g2", 1)
    assert "group 'g2' needs batch 1 (its cursor is 0) but the oldest batch" in str(e.value)
    assert "sluice store set-cursor --config <config> --group g2 --to 3" in str(e.value)
    assert "sluice repair --config <config> --group g2" in str(e.value)
    store.set_cursor("g2", 3)
    assert [m.batch_id for m in store.get("g2", 5)] == [4]
