"""``status()`` of the file store: batches, each group's cursor and pending work, lock holders."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipeline.state.locks import lock_holders

if TYPE_CHECKING:
    from .store import BatchStore


def status(store: BatchStore) -> dict[str, Any]:
    """Batch count, first/last batchId, last position, per-group progress, lock holders.

    A lock holder with ``alive: false`` died without releasing; the next acquirer takes
    the lock over. ``alive: null`` means the holder is on another host.
    """
    metas = store.batches()
    groups: dict[str, Any] = {}
    for g in store.groups():
        cursor = store.cursor(g)
        pending = [m for m in metas if m.batch_id > cursor]
        groups[g] = {
            "cursor": cursor,
            "pending_batches": len(pending),
            "pending_rows": sum(m.rows for m in pending),
        }
    return {
        "root": str(store.root),
        "batches": len(metas),
        "first_batch": metas[0].batch_id if metas else None,
        "last_batch": metas[-1].batch_id if metas else None,
        "bytes": sum(m.size for m in metas),
        "rows": sum(m.rows for m in metas),
        "last_position": store.last_position(),
        "groups": groups,
        "locks": lock_holders(store.lock_dir),
    }
