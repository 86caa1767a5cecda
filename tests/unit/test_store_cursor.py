"""BatchStore consuming: canal-style get / ack / rollback, cursors, groups, gaps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.store.files import BatchStore
from sluice_common.errors import OutOfOrderAckError, StoreError


def make_store(root: Path, n: int) -> BatchStore:
    """A store with batches 1..n; batch i holds i rows and ends at position {"p": i}."""
    store = BatchStore(root)
    with store.capture_lock():
        for i in range(1, n + 1):
            store.append([{"type": "INSERT", "data": [{"id": str(k)} for k in range(i)]}],
                         start={"p": i - 1}, end={"p": i})
    return store


def ids(metas: list) -> list[int]:
    return [m.batch_id for m in metas]


def test_get_hands_out_next_batches_without_acking(tmp_path: Path) -> None:
    store = make_store(tmp_path, 5)
    assert store.cursor("es") == 0
    assert ids(store.get("es", 2)) == [1, 2]
    assert ids(store.get("es", 2)) == [3, 4]  # streaming: continues after what is un-acked
    assert ids(store.get("es", 2)) == [5]
    assert store.get("es", 2) == []
    assert store.cursor("es") == 0
    assert ids(BatchStore(tmp_path).get("es", 10)) == [1, 2, 3, 4, 5]  # another process: from the cursor


def test_ack_in_order_is_durable(tmp_path: Path) -> None:
    store = make_store(tmp_path, 3)
    for meta in store.get("rdb", 3):
        store.ack("rdb", meta.batch_id)
    assert store.cursor("rdb") == 3
    fresh = BatchStore(tmp_path)
    assert fresh.cursor("rdb") == 3 and fresh.get("rdb", 10) == []
    body = json.loads((tmp_path / "groups" / "rdb.json").read_text())
    assert body["cursor"] == 3 and body["position"] == {"p": 3} and body["how"] == "ack"


def test_out_of_order_ack_is_refused(tmp_path: Path) -> None:
    store = make_store(tmp_path, 4)
    store.get("g", 4)
    with pytest.raises(OutOfOrderAckError) as e:
        store.ack("g", 3)
    msg = str(e.value)
    assert "out-of-order ack of batch 3 for group 'g'" in msg
    assert "batches 1..2 are not acked yet" in msg and "next ack must be batch 1" in msg
    assert store.cursor("g") == 0
    store.ack("g", 1)
    with pytest.raises(OutOfOrderAckError, match="batch 1 is already acked"):
        store.ack("g", 1)
    with pytest.raises(OutOfOrderAckError, match="next ack must be batch 2"):
        store.ack("g", 4)
    store.ack("g", 2)
    assert store.cursor("g") == 2


def test_ack_of_a_batch_that_does_not_exist(tmp_path: Path) -> None:
    store = make_store(tmp_path, 1)
    store.ack("g", 1)
    with pytest.raises(OutOfOrderAckError, match="no such batch"):
        store.ack("g", 2)


def test_rollback_restarts_at_the_cursor(tmp_path: Path) -> None:
    store = make_store(tmp_path, 4)
    assert ids(store.get("g", 2)) == [1, 2]
    assert ids(store.get("g", 1)) == [3]
    store.rollback("g")
    assert ids(store.get("g", 2)) == [1, 2]
    store.ack("g", 1)
    store.rollback("g")
    assert ids(store.get("g", 10)) == [2, 3, 4]
    store.rollback("g")
    store.rollback("never-used")  # harmless, as in canal


def test_two_groups_are_independent(tmp_path: Path) -> None:
    store = make_store(tmp_path, 3)
    assert ids(store.get("a", 2)) == [1, 2]
    assert ids(store.get("b", 1)) == [1]
    store.ack("a", 1)
    store.ack("a", 2)
    assert (store.cursor("a"), store.cursor("b")) == (2, 0)
    store.rollback("b")
    assert ids(store.get("a", 5)) == [3] and ids(store.get("b", 5)) == [1, 2, 3]
    with pytest.raises(OutOfOrderAckError):
        store.ack("b", 3)
    assert store.groups() == ["a", "b"]


def test_get_registers_the_group(tmp_path: Path) -> None:
    store = make_store(tmp_path, 1)
    assert store.groups() == []
    store.get("hbase-main", 1)
    assert store.groups() == ["hbase-main"] and store.cursor("hbase-main") == 0


def test_set_cursor_replays_and_validates(tmp_path: Path) -> None:
    store = make_store(tmp_path, 4)
    for b in store.get("g", 4):
        store.ack("g", b.batch_id)
    store.get("g", 1)
    assert store.set_cursor("g", 0) == 4
    assert ids(store.get("g", 10)) == [1, 2, 3, 4]  # replay everything
    assert store.set_cursor("g", 2) == 0
    assert ids(store.get("g", 10)) == [3, 4]
    assert json.loads((tmp_path / "groups" / "g.json").read_text())["position"] == {"p": 2}
    with pytest.raises(StoreError, match="between 0 and the newest batch 4"):
        store.set_cursor("g", 5)
    with pytest.raises(StoreError, match="between 0"):
        store.set_cursor("g", -1)
    store.set_cursor("g", 4)
    store.prune(retain=0)
    with pytest.raises(StoreError, match="batches before 4 were pruned") as e:
        store.set_cursor("g", 0)
    assert "earliest possible cursor is 3" in str(e.value)
    store.set_cursor("g", 3)
    assert ids(store.get("g", 10)) == [4]


@pytest.mark.parametrize("name", ["", "../x", "a/b", ".hidden", "a b", "x" * 101, "a..b", "-x", "é"])
def test_bad_group_names_are_refused(tmp_path: Path, name: str) -> None:
    store = make_store(tmp_path, 1)
    for call in (lambda: store.get(name, 1), lambda: store.ack(name, 1), lambda: store.cursor(name),
                 lambda: store.rollback(name), lambda: store.set_cursor(name, 0)):
        with pytest.raises(StoreError, match="invalid group name"):
            call()
    with pytest.raises(StoreError, match="invalid group name"), store.apply_lock(name):
        pass
    assert store.groups() == []


@pytest.mark.parametrize("name", ["es", "rdb_main", "es-orders.v2", "G1"])
def test_good_group_names(tmp_path: Path, name: str) -> None:
    store = make_store(tmp_path, 1)
    store.get(name, 1)
    store.ack(name, 1)
    assert store.groups() == [name]


def test_a_missing_batch_is_reported_not_skipped(tmp_path: Path) -> None:
    store = make_store(tmp_path, 3)
    (tmp_path / "batches" / "000000000002.meta.json").unlink()
    assert ids(store.get("g", 1)) == [1]
    with pytest.raises(StoreError, match="batch 2 is missing") as e:
        store.get("g", 5)
    assert "000000000002.meta.json" in str(e.value)


def test_get_after_prune_names_the_gap(tmp_path: Path) -> None:
    store = make_store(tmp_path, 3)
    store.get("a", 3)
    for i in (1, 2, 3):
        store.ack("a", i)
    store.prune(retain=0)
    late = BatchStore(tmp_path)
    (tmp_path / "groups" / "b.json").write_text('{"cursor": 0}')  # a group that appeared after the prune
    with pytest.raises(StoreError, match="oldest batch .* is 3: the batches before it were pruned"):
        late.get("b", 1)


def test_max_batches_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="max_batches"):
        make_store(tmp_path, 1).get("g", 0)


def test_unreadable_cursor_file(tmp_path: Path) -> None:
    store = make_store(tmp_path, 1)
    (tmp_path / "groups" / "g.json").write_text("{not json")
    with pytest.raises(StoreError, match="cursor of group 'g' is unreadable"):
        store.cursor("g")
