"""A bootstrap that did not finish: its targets may hold rows of its snapshot, the store no position.

A failed ``sluice bootstrap`` has loaded some targets from its snapshot P and recorded nothing (the
store's position is set only when every load succeeded). If capture then started on its own, at the
source's current position, every change between P and then would never reach those targets: a full
load records no apply position in the targets (adapters/rdb/applied.py), so
:func:`pipeline.capture.fresh.start_position` could not tell (a new user's probe: the load's hint
"run the load again" followed with ``sluice etl``, then ``sluice run``, skipped every change). So the
bootstrap leaves ``bootstrap-unfinished.json`` in the store's directory until it succeeds, and capture
of a store without a position refuses to start while it is there, naming the command to run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.fsutil import now_iso, write_atomic

NAME = "bootstrap-unfinished.json"


def mark(root: Any, position: Any) -> None:
    write_atomic(Path(root) / NAME, json.dumps({"position": position.text(), "started": now_iso()}).encode())


def clear(root: Any) -> None:
    (Path(root) / NAME).unlink(missing_ok=True)


def found(root: Any) -> dict | None:
    """The marker of a bootstrap that did not finish, or None."""
    try:
        return json.loads((Path(root) / NAME).read_text())
    except (OSError, ValueError):
        return None
