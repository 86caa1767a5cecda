"""BatchStore writing: file formats, batchIds, positions, orphan cleanup, Spark readability."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
from pathlib import Path

import pytest

from pipeline.store import BatchMeta
from pipeline.store.files import BatchStore
from sluice_common.errors import StoreError
from tests.support.prereq import missing


def insert(*ids: int, table: str = "t") -> dict:
    """A canal-style INSERT Dml with one row per id."""
    return {"database": "db", "table": table, "type": "INSERT", "isDdl": False, "pkNames": ["id"],
            "data": [{"id": str(i), "name": f"名前-{i}"} for i in ids], "old": None}


DDL = {"database": "db", "table": "t", "type": "ALTER", "isDdl": True, "sql": "ALTER TABLE t ADD c INT",
       "data": None}


def test_append_writes_jsonl_and_meta(tmp_path: Path) -> None:
    store = BatchStore(tmp_path)
    with store.capture_lock():
        meta = store.append([insert(1, 2), DDL, insert(3)], start={"logfile": "b.1", "logpos": 4},
                            end={"logfile": "b.1", "logpos": 900, "gtid": "0-1-42"}, split=True)
    data = tmp_path / "batches" / "000000000001.jsonl"
    assert meta.batch_id == 1 and meta.path == str(data) and meta.file == data.name
    raw = data.read_bytes()
    lines = raw.decode("utf-8").splitlines()
    assert len(lines) == 3 and raw.endswith(b"\n")
    first = json.loads(lines[0])
    assert list(first) == ["database", "table", "type", "isDdl", "pkNames", "data", "old", "batchId", "seq"]
    assert lines[0] == json.dumps(first, ensure_ascii=False, separators=(",", ":"))  # compact, raw UTF-8
    assert "名前-1" in lines[0]
    assert [json.loads(x)["seq"] for x in lines] == [0, 1, 2]
    assert {json.loads(x)["batchId"] for x in lines} == {1}
    assert (meta.records, meta.rows, meta.size, meta.split) == (3, 4, len(raw), True)  # DDL counts 1
    assert meta.sha256 == hashlib.sha256(raw).hexdigest()
    on_disk = json.loads((tmp_path / "batches" / "000000000001.meta.json").read_text())
    assert on_disk["batchId"] == 1 and on_disk["file"] == data.name and on_disk["rows"] == 4
    assert on_disk["end"] == {"logfile": "b.1", "logpos": 900, "gtid": "0-1-42"}
    assert on_disk["start"] == {"logfile": "b.1", "logpos": 4} and on_disk["split"] is True
    assert on_disk["createdAt"]
    assert store.batches() == [meta] and pickle.loads(pickle.dumps(meta)) == meta


def test_append_does_not_change_callers_records(tmp_path: Path) -> None:
    rec = insert(1)
    rec["batchId"], rec["seq"] = 99, 99
    before = json.dumps(rec)
    store = BatchStore(tmp_path)
    with store.capture_lock():
        meta = store.append([rec], start={"p": 0}, end={"p": 1})
    assert json.dumps(rec) == before
    assert store.read(meta)[0]["batchId"] == 1 and store.read(meta)[0]["seq"] == 0


def test_batch_ids_are_contiguous_across_reopen(tmp_path: Path) -> None:
    for _ in range(3):
        store = BatchStore(tmp_path)
        with store.capture_lock():
            store.append([insert(1)], start={"p": 0}, end={"p": 1})
            store.append([insert(2)], start={"p": 1}, end={"p": 2})
    assert BatchStore(tmp_path).batch_ids() == [1, 2, 3, 4, 5, 6]
    assert sorted(os.listdir(tmp_path / "batches"))[:2] == ["000000000001.jsonl", "000000000001.meta.json"]


def test_empty_batch_records_progress(tmp_path: Path) -> None:
    store = BatchStore(tmp_path)
    with store.capture_lock():
        meta = store.append([], start={"p": 0}, end={"p": 7})
    assert (meta.records, meta.rows, meta.size) == (0, 0, 0)
    assert store.read(meta) == [] and store.last_position() == {"p": 7}


def test_append_needs_the_capture_lock(tmp_path: Path) -> None:
    store = BatchStore(tmp_path)
    with pytest.raises(StoreError, match="capture lock"):
        store.append([insert(1)], start={}, end={})


@pytest.mark.parametrize(
    ("records", "problem"),
    [
        (["not a dict"], "record 0 is a str"),
        ([insert(1), {"type": "INSERT"}], "record 1 has no 'data' list"),
        ([{"data": [1, 2]}], "record 0 has no 'data' list"),
        ([{"data": [{"x": object()}]}], "record 0 is not JSON-serialisable"),
        ([{"data": [{"x": float("nan")}]}], "record 0 is not JSON-serialisable"),
        ([{"data": [{"x": "\ud800"}]}], "record 0 is not JSON-serialisable"),
    ],
)
def test_append_rejects_bad_records_and_writes_nothing(tmp_path: Path, records: list, problem: str) -> None:
    store = BatchStore(tmp_path)
    with store.capture_lock():
        with pytest.raises(StoreError, match=problem):
            store.append(records, start={"p": 0}, end={"p": 1})
        with pytest.raises(StoreError, match="position must be a JSON object"):
            store.append([insert(1)], start="mysql-bin.1:4", end={"p": 1})  # type: ignore[arg-type]
        assert store.append([insert(1)], start={"p": 0}, end={"p": 1}).batch_id == 1
    assert sorted(os.listdir(tmp_path / "batches")) == ["000000000001.jsonl", "000000000001.meta.json"]


def test_last_position_and_set_start_position(tmp_path: Path) -> None:
    store = BatchStore(tmp_path)
    assert store.last_position() is None
    with store.capture_lock():
        store.set_start_position({"gtid": "0-1-10"})
        assert store.last_position() == {"gtid": "0-1-10"}
        with pytest.raises(StoreError, match="already has a start position") as e:
            store.set_start_position({"gtid": "0-1-99"})
        assert "force=True" in str(e.value)
        store.set_start_position({"gtid": "0-1-20"}, force=True)
        assert store.last_position() == {"gtid": "0-1-20"}
        store.append([insert(1)], start={"gtid": "0-1-20"}, end={"gtid": "0-1-21"})
        assert store.last_position() == {"gtid": "0-1-21"}
        with pytest.raises(StoreError, match="already has batches up to 1"):
            store.set_start_position({"gtid": "0-1-5"})
        store.set_start_position({"gtid": "0-1-500"}, force=True)  # e.g. a new bootstrap
        assert BatchStore(tmp_path).last_position() == {"gtid": "0-1-500"}
        store.append([insert(2)], start={"gtid": "0-1-500"}, end={"gtid": "0-1-501"})
    assert BatchStore(tmp_path).last_position() == {"gtid": "0-1-501"}


def test_set_start_position_refuses_when_batches_exist(tmp_path: Path) -> None:
    store = BatchStore(tmp_path)
    with pytest.raises(StoreError, match="capture lock"):
        store.set_start_position({"p": 1})
    with store.capture_lock():
        store.append([insert(1)], start={"p": 0}, end={"p": 1})
        with pytest.raises(StoreError, match=r"capture would resume at \{\"p\": 1\}"):
            store.set_start_position({"p": 0})
    assert store.last_position() == {"p": 1}


def test_orphans_and_temp_files_are_removed_when_opened_for_writing(tmp_path: Path) -> None:
    store = BatchStore(tmp_path)
    with store.capture_lock():
        store.append([insert(1)], start={"p": 0}, end={"p": 1})
        store.append([insert(2)], start={"p": 1}, end={"p": 2})
    batches = tmp_path / "batches"
    orphan = batches / "000000000003.jsonl"  # crash between the data rename and the meta rename
    orphan.write_text('{"data":[]}\n')
    temps = [batches / ".000000000003.meta.json.4242.deadbeef.tmp",
             tmp_path / ".position.json.1.0badf00d.tmp"]
    for t in temps:
        t.write_text("half")
    keep = tmp_path / "groups" / ".g.json.77.0badf00d.tmp"  # a group's temp: cleaned by its apply lock
    keep.write_text("x")
    reader = BatchStore(tmp_path)
    assert reader.batch_ids() == [1, 2] and [m.batch_id for m in reader.get("g", 10)] == [1, 2]
    with reader.capture_lock() as held:
        assert sorted(held.cleaned) == sorted(str(p) for p in [orphan, *temps])
        assert not orphan.exists() and not any(t.exists() for t in temps) and keep.exists()
        assert reader.append([insert(3)], start={"p": 2}, end={"p": 3}).batch_id == 3
    with reader.apply_lock("g") as held:
        assert held.cleaned == [str(keep)] and not keep.exists()
    reader.verify(3)


def test_open_without_create_refuses_a_missing_store(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no batch store here"):
        BatchStore(tmp_path / "nope", create=False)
    BatchStore(tmp_path / "yes")
    assert BatchStore(tmp_path / "yes", create=False).batches() == []


def test_meta_round_trip(tmp_path: Path) -> None:
    store = BatchStore(tmp_path)
    with store.capture_lock():
        meta = store.append([insert(1)], start={"p": 0}, end={"p": 1})
    loaded = BatchMeta.load(tmp_path / "batches" / "000000000001.meta.json")
    assert loaded == meta and loaded.path == meta.path


def test_spark_reads_batch_files_directly(tmp_path: Path) -> None:
    if shutil.which("java") is None:
        missing("no java: cannot start Spark")
    import pyspark.sql as pyspark  # a dependency of the package: never missing
    import pyspark.sql.types as types
    store = BatchStore(tmp_path)
    with store.capture_lock():
        store.append([insert(1, 2), DDL], start={"p": 0}, end={"p": 1})
        store.append([insert(3, table="u")], start={"p": 1}, end={"p": 2})
    schema = types.StructType([
        types.StructField("database", types.StringType()),
        types.StructField("table", types.StringType()),
        types.StructField("type", types.StringType()),
        types.StructField("isDdl", types.BooleanType()),
        types.StructField("data", types.ArrayType(types.MapType(types.StringType(), types.StringType()))),
        types.StructField("batchId", types.LongType()),
        types.StructField("seq", types.LongType()),
    ])
    existing = pyspark.SparkSession.getActiveSession()  # another test's session: reuse, do not stop
    spark = existing or (pyspark.SparkSession.builder.master("local[1]").appName("test_store")
                         .config("spark.ui.enabled", "false").getOrCreate())
    try:
        got = []
        for uri in (False, True):
            paths = store.paths(store.get("g", 10), uri=uri)
            store.rollback("g")
            df = spark.read.schema(schema).option("mode", "FAILFAST").json(paths)
            got.append(sorted((r.batchId, r.seq, r.type, [dict(d) for d in (r.data or [])])
                              for r in df.collect()))
        rows, via_uri = got
    finally:
        if existing is None:
            spark.stop()
    assert rows == [
        (1, 0, "INSERT", [{"id": "1", "name": "名前-1"}, {"id": "2", "name": "名前-2"}]),
        (1, 1, "ALTER", []),
        (2, 0, "INSERT", [{"id": "3", "name": "名前-3"}]),
    ]
    assert via_uri == rows
