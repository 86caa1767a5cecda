"""The newest captured event of a store's batches: its binlog time (``es``), read from the end of
the newest batch file that holds records (a Kafka batch records it), without verifying the file.
Status (capture lag, freshness) and the sync's pre-flight (which source tables capture has seen
created) read it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.store.meta import BatchMeta

#: how many empty batches (position progress only) are skipped looking for the newest event
EVENT_SCAN_BATCHES = 200


def last_record(meta: BatchMeta) -> dict[str, Any] | None:
    """The last Dml line of a batch file, read from its end (the file is not verified)."""
    if getattr(meta, "last_es", None):  # a Kafka batch records its last event's time
        return {"es": meta.last_es}
    if not meta.records or not meta.size or not meta.path:
        return None
    path = Path(meta.path)
    block = 1 << 16
    with path.open("rb") as f:
        while True:
            start = max(0, meta.size - block)
            f.seek(start)
            body = f.read(meta.size - start).rstrip(b"\n")
            cut = body.rfind(b"\n")
            if cut >= 0 or start == 0:
                try:
                    rec = json.loads(body[cut + 1:])
                except ValueError:
                    return None
                return rec if isinstance(rec, dict) else None
            block *= 4


def last_event_ms(store: Any, metas: list[BatchMeta] | None = None) -> int | None:
    """``es`` (binlog event time, ms) of the newest captured event (in ``metas``), or None."""
    metas = metas if metas is not None else store.batches()
    for meta in list(reversed(metas))[:EVENT_SCAN_BATCHES]:
        rec = last_record(meta)
        if rec is not None and rec.get("es"):
            return int(rec["es"])
    return None
