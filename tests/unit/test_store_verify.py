"""BatchStore verification: damaged batch files are detected with an actionable message."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipeline.store.files import BatchStore
from sluice_common.errors import CorruptBatchError, StoreError


@pytest.fixture
def store(tmp_path: Path) -> BatchStore:
    """Three batches of three INSERT records each; batch i ends at {"logpos": 100 * i}."""
    s = BatchStore(tmp_path)
    with s.capture_lock():
        for i in range(1, 4):
            recs = [{"type": "INSERT", "data": [{"id": str(10 * i + k), "v": "x" * 20}]} for k in range(3)]
            s.append(recs, start={"logfile": "bin.1", "logpos": 100 * (i - 1)},
                     end={"logfile": "bin.1", "logpos": 100 * i})
    return s


def data_file(store: BatchStore, batch_id: int) -> Path:
    return store.batch_dir / f"{batch_id:012d}.jsonl"


def corrupt_message(store: BatchStore, batch_id: int) -> str:
    with pytest.raises(CorruptBatchError) as e:
        store.verify(batch_id)
    with pytest.raises(CorruptBatchError):
        store.read(store.meta(batch_id))
    with pytest.raises(CorruptBatchError):
        store.paths(store.batches())
    return str(e.value)


def test_intact_batches_verify(store: BatchStore) -> None:
    for meta in store.batches():
        store.verify(meta)
        recs = store.read(meta)
        assert [r["seq"] for r in recs] == [0, 1, 2] and {r["batchId"] for r in recs} == {meta.batch_id}
    paths = store.paths(store.batches())
    assert paths == [str(data_file(store, i)) for i in (1, 2, 3)] and all(os.path.isabs(p) for p in paths)
    assert store.paths([2]) == [paths[1]]


def test_truncated_file(store: BatchStore) -> None:
    path = data_file(store, 2)
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(size - 10)
    msg = corrupt_message(store, 2)
    assert str(path) in msg and f"truncated: size {size - 10} of {size} bytes" in msg
    assert "restore 000000000002.jsonl from a backup" in msg
    assert "sluice store recapture --from 2` and run capture: it reads batches 2.. again from " \
        '{"logfile": "bin.1", "logpos": 100}' in msg
    store.verify(1)
    store.verify(3)


def test_flipped_byte(store: BatchStore) -> None:
    path = data_file(store, 1)
    raw = bytearray(path.read_bytes())
    raw[raw.index(b"xxxx")] = ord("y")  # still valid JSON: only the checksum can tell
    path.write_bytes(bytes(raw))
    msg = corrupt_message(store, 1)
    assert str(path) in msg and "checksum mismatch" in msg and "bad JSON" not in msg
    assert '{"logfile": "bin.1", "logpos": 0}' in msg  # batch 1: its own start position


def test_garbage_line_appended(store: BatchStore) -> None:
    path = data_file(store, 3)
    size = path.stat().st_size
    with open(path, "ab") as f:
        f.write(b"\x00\x00garbage\n")
    msg = corrupt_message(store, 3)
    assert str(path) in msg and f"size {size + 10} bytes, expected {size}" in msg
    assert "bad JSON at line 4" in msg


def test_garbage_line_in_place(store: BatchStore) -> None:
    path = data_file(store, 2)
    lines = path.read_bytes().split(b"\n")
    lines[1] = b"#" * len(lines[1])
    path.write_bytes(b"\n".join(lines))
    msg = corrupt_message(store, 2)
    assert "checksum mismatch" in msg and "bad JSON at line 2" in msg and str(path) in msg


def test_line_moved_between_batches_is_detected(store: BatchStore) -> None:
    one, two = data_file(store, 1), data_file(store, 2)
    a, b = one.read_bytes().split(b"\n"), two.read_bytes().split(b"\n")
    assert len(a[0]) == len(b[0])
    a[0] = b[0]
    one.write_bytes(b"\n".join(a))
    assert "line 1 has batchId=2 seq=0, expected batchId=1 seq=0" in corrupt_message(store, 1)


def test_missing_data_file(store: BatchStore) -> None:
    data_file(store, 2).unlink()
    msg = corrupt_message(store, 2)
    assert "000000000002.jsonl" in msg and "the data file is missing" in msg


def test_unreadable_meta_file(store: BatchStore) -> None:
    meta = store.batch_dir / "000000000002.meta.json"
    meta.write_text('{"format": 1, "batchId": 2')
    with pytest.raises(CorruptBatchError) as e:
        store.batches()
    assert str(meta) in str(e.value) and "batch metadata is unreadable" in str(e.value)


def test_unknown_batch(store: BatchStore) -> None:
    with pytest.raises(StoreError, match="batch 9 is not in the store"):
        store.verify(9)
