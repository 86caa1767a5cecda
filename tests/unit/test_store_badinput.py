"""Property: whatever is on disk in a batch store (damaged data files, meta files, cursors,
start position), reading it gives ONE SluiceError naming the file (CorruptBatchError for a
batch, naming the line when a line is at fault), never a raw exception or a traceback."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.store.files import BatchStore
from sluice_common.errors import CorruptBatchError, SluiceError, StoreError

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parents[2]
RECORDS = [{"database": "d", "table": "t", "type": "INSERT", "data": [{"id": "1", "v": "café"}]},
           {"database": "d", "table": "t", "type": "ALTER", "isDdl": True, "sql": "ALTER TABLE t ADD c INT"},
           {"database": "d", "table": "t", "type": "DELETE", "data": [{"id": "1"}, {"id": "2"}]}]
SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=12)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> dict:
    """One good store with batch 1; tests copy its bytes back before each example."""
    store = BatchStore(tmp_path_factory.mktemp("bad") / "store")
    with store.capture_lock():
        store.append(RECORDS, start={"logfile": "b.1", "logpos": 4}, end={"logfile": "b.1", "logpos": 99})
    data = store.batch_dir / "000000000001.jsonl"
    meta = store.batch_dir / "000000000001.meta.json"
    return {"store": store, "data": data, "meta": meta, "data_bytes": data.read_bytes(),
            "meta_json": json.loads(meta.read_bytes())}


def _reset(p: dict) -> BatchStore:
    p["data"].write_bytes(p["data_bytes"])
    p["meta"].write_bytes(json.dumps(p["meta_json"]).encode())
    for f in (p["store"].group_dir / "g.json", p["store"].root / "position.json"):
        f.unlink(missing_ok=True)
    return BatchStore(p["store"].root, create=False)


def _every_reader(store: BatchStore) -> list[SluiceError]:
    """Run what the job and the CLI read; return the SluiceErrors (any other exception fails)."""
    errors = []
    for call in (lambda: store.read(1), lambda: store.paths(store.get("g", 5)), store.status,
                 store.last_position, store.batches, lambda: store.cursor("g")):
        try:
            call()
        except SluiceError as e:
            errors.append(e)
    return errors


@SETTINGS
@given(at=st.integers(0, 400), junk=st.binary(min_size=1, max_size=30), mode=st.sampled_from(["over", "insert", "cut"]))
def test_damaged_data_file_is_one_corrupt_batch_error(pristine, at, junk, mode):
    store = _reset(pristine)
    good = pristine["data_bytes"]
    at = min(at, len(good))
    bad = {"over": good[:at] + junk + good[at + len(junk):], "insert": good[:at] + junk + good[at:],
           "cut": good[:at]}[mode]
    pristine["data"].write_bytes(bad)
    if bad == good:
        assert store.read(1) and not _every_reader(store)
        return
    with pytest.raises(CorruptBatchError) as err:
        store.read(1)
    msg = str(err.value)
    assert msg.startswith(f"{pristine['data']}: batch 1 is corrupt: ") and "fix: " in msg
    with pytest.raises(CorruptBatchError):
        store.paths([1])                       # the job's pre-read check (size + sha256)
    for e in _every_reader(store):
        assert isinstance(e, CorruptBatchError) and str(pristine["data"]) in str(e)


@SETTINGS
@given(key=st.sampled_from(["format", "batchId", "file", "sha256", "size", "records", "rows", "start", "end",
                            "split", "createdAt", "ddl", "extra"]),
       value=st.one_of(json_values, st.sampled_from([float("inf"), -1, 10**30, "Infinity", [5], [-1]])),
       drop=st.booleans())
def test_damaged_meta_file_names_the_meta_file(pristine, key, value, drop):
    store = _reset(pristine)
    meta = dict(pristine["meta_json"])
    if drop:
        meta.pop(key, None)
    else:
        meta[key] = value
    pristine["meta"].write_text(json.dumps(meta))
    for e in _every_reader(store):
        assert isinstance(e, StoreError)
        assert str(pristine["meta"]) in str(e) or str(pristine["data"]) in str(e), str(e)


@SETTINGS
@given(raw=st.one_of(st.binary(max_size=60), json_values.map(lambda v: json.dumps(v).encode())))
def test_unreadable_meta_cursor_or_position_is_one_store_error(pristine, raw):
    for target in ("meta", "cursor", "position"):
        store = _reset(pristine)
        path = {"meta": pristine["meta"], "cursor": store.group_dir / "g.json",
                "position": store.root / "position.json"}[target]
        path.write_bytes(raw)
        for e in _every_reader(store):
            assert isinstance(e, StoreError) and str(path) in str(e), (target, str(e))


lines = st.one_of(
    st.sampled_from([b"", b"{", b"[1]", b"null", b"\"x\"", b"\xff\xfe", b"{\"batchId\": 1}", b"[" * 5000,
                     b"{\"batchId\": 1, \"seq\": 0, \"data\": []}", b"{\"batchId\": 2, \"seq\": 0}", b"NaN"]),
    st.binary(max_size=20), json_values.map(lambda v: json.dumps(v).encode()))


@SETTINGS
@given(body=st.lists(lines, min_size=1, max_size=5), records=st.integers(0, 6))
def test_consistent_but_bad_lines_name_the_line(pristine, body, records):
    """A file whose size and sha256 match its meta (e.g. written by another tool) is still
    refused line by line: the message names the file and the first bad line."""
    store = _reset(pristine)
    raw = b"\n".join(body) + b"\n"
    meta = {**pristine["meta_json"], "size": len(raw), "sha256": hashlib.sha256(raw).hexdigest(),
            "records": records, "ddl": []}
    pristine["data"].write_bytes(raw)
    pristine["meta"].write_text(json.dumps(meta))
    try:
        got = store.read(1)
    except CorruptBatchError as e:
        msg = str(e)
        assert msg.startswith(f"{pristine['data']}: batch 1 is corrupt: ")
        assert "line " in msg or f"records, expected {records}" in msg, msg
    else:
        assert len(got) == records and all(r["batchId"] == 1 for r in got)


def test_ddl_seq_outside_the_batch_is_refused(pristine):
    store = _reset(pristine)
    pristine["meta"].write_text(json.dumps({**pristine["meta_json"], "ddl": [7]}))
    with pytest.raises(CorruptBatchError, match=r"000000000001\.meta\.json: .*ddl seqs \[7\]"):
        store.get("g", 5)


def test_deeply_nested_json_is_one_error(pristine):
    store = _reset(pristine)
    pristine["meta"].write_bytes(b"[" * 200000 + b"]" * 200000)
    with pytest.raises(CorruptBatchError, match="metadata is unreadable"):
        store.meta(1)
    (store.group_dir / "g.json").write_bytes(b"{\"cursor\": " + b"[" * 200000)
    with pytest.raises(StoreError, match="cursor of group 'g' is unreadable"):
        store.cursor("g")


def test_cli_store_verify_prints_one_line_and_no_traceback(pristine, tmp_path):
    _reset(pristine)
    good = pristine["data_bytes"]
    first_end = good.index(b"\n") + 1
    pristine["data"].write_bytes(good[:first_end] + b"{oops" + good[first_end + 5:])
    cfg = tmp_path / "sluice.yml"
    store_root = pristine["store"].root
    cfg.write_text(yaml.safe_dump({"source": {"name": store_root.name}, "store": {"path": str(store_root.parent)}}))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "pipeline.cli", "store", "verify", "--config", str(cfg)],
                          cwd=REPO, env=env, text=True, capture_output=True, timeout=120)
    _reset(pristine)
    assert proc.returncode == 5, proc.stderr  # docs/operations.md: a check that found damage
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    first = proc.stderr.strip().splitlines()[0]
    assert first.startswith(f"sluice: error: {pristine['data']}: batch 1 is corrupt: checksum mismatch")
    assert "bad JSON at line 2" in first
