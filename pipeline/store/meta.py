"""Batch metadata, file naming and name validation for the batch store.

A committed batch ``N`` is two files in ``<root>/batches``: ``%012d.jsonl`` (the Dml
records, JSON Lines) and ``%012d.meta.json`` (a :class:`BatchMeta`, written after the
data file; its existence commits the batch).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sluice_common.errors import CorruptBatchError, StoreError

FORMAT = 1
ID_WIDTH = 12
DATA_SUFFIX = ".jsonl"
META_SUFFIX = ".meta.json"
META_RE = re.compile(rf"^(\d{{{ID_WIDTH},}})\.meta\.json$")
DATA_RE = re.compile(rf"^(\d{{{ID_WIDTH},}})\.jsonl$")
GROUP_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


def data_name(batch_id: int) -> str:
    """``42`` -> ``000000000042.jsonl``."""
    return f"{batch_id:0{ID_WIDTH}d}{DATA_SUFFIX}"


def meta_name(batch_id: int) -> str:
    """``42`` -> ``000000000042.meta.json``."""
    return f"{batch_id:0{ID_WIDTH}d}{META_SUFFIX}"


def validate_group(group: str) -> str:
    """Return ``group`` if it is a safe file-name component, else raise StoreError."""
    if not isinstance(group, str) or not GROUP_RE.match(group) or ".." in group:
        raise StoreError(
            f"invalid group name {group!r}: a group name is 1-100 characters of letters, digits, "
            "'_', '-' and '.', starts with a letter or digit and contains no '..'",
            hint="rename the group, e.g. 'es-orders' or 'rdb_main'",
        )
    return group


def validate_position(name: str, pos: Any) -> dict[str, Any]:
    """Positions are opaque JSON objects; check that ``pos`` is one and return it."""
    if not isinstance(pos, dict):
        raise StoreError(f"{name} position must be a JSON object (dict), got {type(pos).__name__}")
    try:
        json.dumps(pos, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise StoreError(f"{name} position {pos!r} is not JSON-serialisable: {e}") from None
    return pos


@dataclass(frozen=True)
class BatchMeta:
    """The committed description of one batch (picklable; what get/batches return).

    ``path`` is the absolute data file path on this machine; it is not stored in the
    meta file, so a store that is moved or mounted elsewhere still opens.
    """

    batch_id: int
    file: str
    sha256: str
    size: int
    records: int
    rows: int
    start: dict[str, Any] = field(hash=False, compare=True)
    end: dict[str, Any] = field(hash=False, compare=True)
    split: bool
    created_at: str
    path: str = field(default="", compare=False)
    #: seqs of the DDL records in this batch (None: not recorded by an older writer)
    ddl: tuple[int, ...] | None = field(default=None, compare=False)

    def to_json(self) -> dict[str, Any]:
        """The meta file's content (camelCase keys, like the Dml records)."""
        return {
            "format": FORMAT,
            "batchId": self.batch_id,
            "file": self.file,
            "sha256": self.sha256,
            "size": self.size,
            "records": self.records,
            "rows": self.rows,
            "start": self.start,
            "end": self.end,
            "split": self.split,
            "createdAt": self.created_at,
            "ddl": list(self.ddl) if self.ddl is not None else None,
        }

    def dumps(self) -> bytes:
        """Serialised meta file bytes."""
        return (json.dumps(self.to_json(), ensure_ascii=False, indent=1) + "\n").encode("utf-8")

    @classmethod
    def load(cls, meta_path: Path) -> BatchMeta:
        """Read a meta file; raise CorruptBatchError naming it if it is unreadable."""
        try:
            raw = json.loads(meta_path.read_bytes())
            newer = raw.get("format") if isinstance(raw, dict) else None
            if isinstance(newer, int) and not isinstance(newer, bool) and newer > FORMAT:
                raise StoreError(f"{meta_path}: this batch was written by a newer Sluice (format {newer}; this "
                                 f"Sluice reads {FORMAT})", hint="run the Sluice version that wrote the store "
                                 "(upgrade this installation)")
            if raw.get("format") != FORMAT:
                raise ValueError(f"unknown format {raw.get('format')!r} (this Sluice reads {FORMAT})")
            batch_id = int(raw["batchId"])
            expected = meta_name(batch_id)
            if meta_path.name != expected:
                raise ValueError(f"batchId {batch_id} does not match the file name (expected {expected})")
            if raw.get("file") != data_name(batch_id):
                raise ValueError(f"file {raw.get('file')!r} is not {data_name(batch_id)!r}")
            records = int(raw["records"])
            ddl = tuple(int(x) for x in raw["ddl"]) if raw.get("ddl") is not None else None
            if any(not 0 <= seq < records for seq in ddl or ()):
                raise ValueError(f"ddl seqs {list(ddl or ())} are not all within the {records} records")
            return cls(
                batch_id=batch_id,
                file=str(raw["file"]),
                sha256=str(raw["sha256"]),
                size=int(raw["size"]),
                records=records,
                rows=int(raw["rows"]),
                start=dict(raw["start"]),
                end=dict(raw["end"]),
                split=bool(raw["split"]),
                created_at=str(raw["createdAt"]),
                path=str(meta_path.with_name(str(raw["file"]))),
                ddl=ddl,
            )
        except FileNotFoundError:
            raise
        # OverflowError: int(Infinity); RecursionError: JSON nested too deeply
        except (OSError, ValueError, KeyError, TypeError, AttributeError, OverflowError, RecursionError) as e:
            raise CorruptBatchError(
                f"{meta_path}: batch metadata is unreadable: {e}",
                hint="restore the file from a backup; if the batch cannot be restored, re-capture "
                "from the previous batch's end position into a fresh store",
            ) from None
