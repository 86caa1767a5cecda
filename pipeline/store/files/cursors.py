"""Durable per-group ack cursors: ``<root>/groups/<group>.json``.

A cursor is the batchId of the newest batch the group has acked (0 = nothing acked).
Each write replaces the whole file atomically, so a crash leaves the old or the new
cursor, never a torn one. The file also records the acked batch's end position and
when and how it was last changed, for ``sluice store status`` and for operators.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.fsutil import is_temp_name, now_iso, write_atomic
from sluice_common.errors import StoreError

from ..meta import validate_group

SUFFIX = ".json"


@dataclass(frozen=True)
class Cursor:
    """One group's durable cursor."""

    group: str
    batch_id: int
    position: dict[str, Any] | None
    updated_at: str
    how: str


class CursorFiles:
    """Reads and writes the cursor files under ``<root>/groups``."""

    def __init__(self, directory: Path):
        self.dir = directory

    def path(self, group: str) -> Path:
        """The cursor file of ``group`` (validated name)."""
        return self.dir / f"{validate_group(group)}{SUFFIX}"

    def read(self, group: str) -> Cursor | None:
        """The group's cursor, or None when the group has never been registered."""
        path = self.path(group)
        try:
            raw = json.loads(path.read_bytes())
            return Cursor(
                group=group,
                batch_id=int(raw["cursor"]),
                position=raw.get("position"),
                updated_at=str(raw.get("updatedAt", "")),
                how=str(raw.get("how", "")),
            )
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, OverflowError, RecursionError) as e:
            raise StoreError(
                f"{path}: the cursor of group {group!r} is unreadable: {e}",
                hint="reset the group's cursor to the last batchId it has applied (set_cursor; "
                "0 replays every batch still in the store)",
            ) from None

    def write(self, group: str, batch_id: int, position: dict[str, Any] | None, how: str) -> Cursor:
        """Durably set the group's cursor (atomic replace + directory fsync)."""
        cursor = Cursor(group, batch_id, position, now_iso(), how)
        body = {
            "group": group,
            "cursor": batch_id,
            "position": position,
            "updatedAt": cursor.updated_at,
            "how": how,
        }
        self.dir.mkdir(parents=True, exist_ok=True)
        write_atomic(self.path(group), (json.dumps(body, ensure_ascii=False) + "\n").encode("utf-8"))
        return cursor

    def groups(self) -> list[str]:
        """Names of all registered groups, sorted."""
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return []
        return sorted(
            n[: -len(SUFFIX)] for n in names if n.endswith(SUFFIX) and not n.startswith(".")
            and not is_temp_name(n)
        )
