"""``status()`` of the Kafka store: batches, each group's cursor and pending work, its Kafka lag."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipeline.state.locks import lock_holders

from .client import committed, list_offsets

if TYPE_CHECKING:
    from .store import KafkaStore


def status(store: KafkaStore) -> dict[str, Any]:
    """The file store's status keys, plus ``kafka``: topics, end offsets, and per group its
    committed offsets and lag (what ``kafka-consumer-groups --describe`` shows)."""
    metas = store.batches()
    ends = metas[-1].end_offsets if metas else {}
    tps = sorted(ends)
    latest = list_offsets(store.topics, tps) if tps else {}
    groups: dict[str, Any] = {}
    for g in [c.groupId for c in store.cfg.groups]:
        cursor = store.cursor(g)
        pending = [m for m in metas if m.batch_id > cursor]
        got = committed(store.topics, g, tps)
        lag = {f"{t}/{p}": latest[(t, p)] - got.get((t, p), (0, ""))[0] for t, p in tps}
        groups[g] = {"cursor": cursor, "pending_batches": len(pending), "pending_rows": sum(m.rows for m in pending),
                     "kafka_lag": sum(lag.values()), "partitions": lag}
    return {
        "root": str(store.root), "kind": "kafka", "batches": len(metas),
        "first_batch": metas[0].batch_id if metas else None, "last_batch": metas[-1].batch_id if metas else None,
        "bytes": sum(m.size for m in metas), "rows": sum(m.rows for m in metas),
        "last_position": store.last_position(), "groups": groups, "locks": lock_holders(store.lock_dir),
        "kafka": {"bootstrap": store.topics.bootstrap, "topic": store.topics.topic,
                  "batch_topic": store.topics.batch_topic,
                  "end_offsets": {f"{t}/{p}": o for (t, p), o in latest.items()}},
    }
