"""``status()`` of a canal topic: per group its committed offsets, pending records and Kafka lag
(there are no batch records to count)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipeline.state.locks import lock_holders

if TYPE_CHECKING:
    from .store import CanalTopicStore


def status(store: CanalTopicStore) -> dict[str, Any]:
    """The file store's status keys (no batches), ``writtenBy: canal`` and each group's partitions."""
    groups = {}
    for g in store.groups():
        start, end = store.group_range(g)
        groups[g] = {"cursor": sum(start.values()), "pending_batches": 1 if end != start else 0,
                     "pending_rows": sum(end[tp] - start[tp] for tp in start), "kafka_lag":
                     sum(end[tp] - start[tp] for tp in start),
                     "partitions": {f"{t}/{p}": end[(t, p)] - start[(t, p)] for t, p in start}}
    return {"root": str(store.root), "kind": "kafka", "writtenBy": "canal", "batches": 0, "first_batch": None,
            "last_batch": None, "bytes": 0, "rows": 0, "last_position": None, "groups": groups,
            "locks": lock_holders(store.lock_dir),
            "kafka": {"bootstrap": store.topics.bootstrap, "topic": store.topics.topic}}
