"""Checking and decoding batch data files against their committed metadata.

A batch file is trusted only if its size and sha256 match the meta file and every line
is a JSON object carrying the right ``batchId`` and ``seq``. Anything else raises
CorruptBatchError naming the file, what is wrong and what to do.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, NoReturn

from sluice_common.errors import CorruptBatchError

from ..meta import BatchMeta


def encode_records(records: list[dict[str, Any]], batch_id: int) -> tuple[bytes, int, tuple[int, ...]]:
    """JSON Lines bytes for ``records`` (with batchId and seq set), their row count and
    the seqs of the DDL records (so the apply job finds its barriers without a scan).

    Raises ValueError naming the record index for a record that is not a Dml object.
    """
    out: list[bytes] = []
    rows = 0
    ddl: list[int] = []
    for seq, record in enumerate(records):
        if not isinstance(record, dict):
            raise ValueError(f"record {seq} is a {type(record).__name__}, not a dict")
        data = record.get("data")
        if record.get("isDdl") is True:
            rows += 1
            ddl.append(seq)
        elif isinstance(data, list) and all(isinstance(r, dict) for r in data):
            rows += len(data)
        else:
            raise ValueError(f"record {seq} has no 'data' list of row dicts and is not DDL (isDdl: true)")
        line = {**record, "batchId": batch_id, "seq": seq}
        try:
            text = json.dumps(line, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
            out.append(text.encode("utf-8") + b"\n")
        except (TypeError, ValueError) as e:  # UnicodeEncodeError (lone surrogate) is a ValueError
            raise ValueError(f"record {seq} is not JSON-serialisable: {e}") from None
    return b"".join(out), rows, tuple(ddl)


def encode_lines(lines: list[bytes], batch_id: int) -> bytes:
    """JSON Lines bytes from pre-encoded records (each an object's JSON without its closing
    brace), with batchId and seq added as ``encode_records`` adds them."""
    tail = b',"batchId":%d,"seq":%%d}\n' % batch_id
    return b"".join([line + tail % seq for seq, line in enumerate(lines)])


def decode_records(raw: bytes, batch_id: int) -> tuple[list[dict[str, Any]], str | None]:
    """Parse JSON Lines; return the records and a description of the first problem, if any."""
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    records: list[dict[str, Any]] = []
    for n, line in enumerate(lines, start=1):
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
            return records, f"bad JSON at line {n}: {str(e)[:200]}"
        if not isinstance(rec, dict):
            return records, f"line {n} is a JSON {type(rec).__name__}, not an object"
        if rec.get("batchId") != batch_id or rec.get("seq") != n - 1:
            return records, (
                f"line {n} has batchId={rec.get('batchId')!r} seq={rec.get('seq')!r}, "
                f"expected batchId={batch_id} seq={n - 1}"
            )
        records.append(rec)
    return records, None


def check_batch(
    meta: BatchMeta, data_path: Path, previous_end: dict[str, Any] | None, decode: bool = True
) -> list[dict[str, Any]]:
    """Verify one batch file against ``meta`` and return its records.

    With ``decode=False`` only size and sha256 are checked (they prove the bytes are the ones
    ``append`` wrote, which it had encoded from valid records) and ``[]`` is returned: the
    job's pre-read check, which must not parse every line in Python.

    ``previous_end`` (the previous batch's end position, if known) goes into the
    error's hint as the position to re-capture from.
    """
    try:
        raw = data_path.read_bytes()
    except FileNotFoundError:
        _fail(meta, data_path, previous_end, "the data file is missing")
    except OSError as e:
        _fail(meta, data_path, previous_end, f"the data file cannot be read: {e}")
    problem = None
    if len(raw) < meta.size:
        problem = f"truncated: size {len(raw)} of {meta.size} bytes"
    elif len(raw) > meta.size:
        problem = f"size {len(raw)} bytes, expected {meta.size}: data was added after the batch was committed"
    else:
        digest = hashlib.sha256(raw).hexdigest()
        if digest != meta.sha256:
            problem = f"checksum mismatch: sha256 {digest}, expected {meta.sha256}"
    if not decode:
        if problem:
            _fail(meta, data_path, previous_end, problem)
        return []
    records, bad = decode_records(raw, meta.batch_id)
    if problem is None and bad is None and len(records) != meta.records:
        bad = f"{len(records)} records, expected {meta.records}"
    if problem or bad:
        _fail(meta, data_path, previous_end, "; ".join(p for p in (problem, bad) if p))
    return records


def _fail(meta: BatchMeta, path: Path, previous_end: dict[str, Any] | None, what: str) -> NoReturn:
    resume = previous_end if previous_end is not None else meta.start
    raise CorruptBatchError(
        f"{path}: batch {meta.batch_id} is corrupt: {what}",
        hint=f"restore {path.name} from a backup; or `sluice store recapture --from {meta.batch_id}` and run "
        f"capture: it reads batches {meta.batch_id}.. again from {json.dumps(resume, sort_keys=True)}",
    )
