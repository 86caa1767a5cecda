"""Read single records at known offsets (the DDL records a round's batch records point at)."""

from __future__ import annotations

import json
from typing import Any

from confluent_kafka import KafkaException, TopicPartition

from sluice_common.errors import StoreError

from .client import Topics, consumer, fail


def fetch_records(topics: Topics, where: list[tuple[str, int, int]]) -> list[dict[str, Any]]:
    """The decoded records at ``(topic, partition, offset)``, in the order given."""
    if not where:
        return []
    c = consumer(topics)
    out = []
    try:
        for t, p, o in where:
            c.assign([TopicPartition(t, p, o)])
            msg = None
            for _ in range(20):
                msg = c.poll(3.0)
                if msg is not None and msg.error() is None:
                    break
            if msg is None or msg.error() is not None or msg.offset() != o:
                raise StoreError(f"Kafka store: cannot read the DDL record at {t} partition {p} offset {o}"
                                 + (f": {msg.error().str()}" if msg is not None and msg.error() else ""),
                                 hint="check the broker; retention may have deleted it")
            try:
                out.append(json.loads(msg.value()))
            except ValueError as e:
                raise StoreError(f"poison record: topic {t} partition {p} offset {o}: not JSON ({e}); nothing "
                                 "was acked") from None
    except KafkaException as e:
        raise fail(e, "read DDL records", topics) from None
    finally:
        c.close()
    return out
