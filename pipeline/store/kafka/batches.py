"""The batch topic (``<topic>.sluice-batches``, one partition): one small JSON record per batch.

Capture writes a batch's Dml records to the data topics and, in the same Kafka transaction, its
batch record: batchId, record and row counts, the binlog positions before and after it, where
its DDL records landed, and the offsets of every data partition before (``from``) and after
(``to``) it. So a committed batch record proves its data is committed and says exactly which
offset ranges hold it: the job reads whole batches (a consistent cut across partitions), and
capture resumes at the last batch record's ``end``. A ``start`` record sets a start position
(bootstrap, or a new store), like the file store's ``position.json``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from pipeline.store.meta import BatchMeta
from sluice_common.errors import StoreError

from .client import Topics, consumer, fail, list_offsets, partitions_of

FORMAT = 1
Offsets = dict[tuple[str, int], int]


def offsets_json(offsets: Offsets) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (t, p), o in sorted(offsets.items()):
        out.setdefault(t, {})[str(p)] = o
    return out


def offsets_of(raw: dict[str, dict[str, int]] | None) -> Offsets:
    return {(t, int(p)): int(o) for t, parts in (raw or {}).items() for p, o in parts.items()}


@dataclass(frozen=True)
class KafkaBatch(BatchMeta):
    """A batch of the Kafka store: :class:`BatchMeta` plus where its records are."""

    #: offsets of every data partition before and after the batch
    start_offsets: dict = field(default_factory=dict, hash=False, compare=False)
    end_offsets: dict = field(default_factory=dict, hash=False, compare=False)
    #: (seq, topic, partition, offset) of each DDL record
    ddl_at: tuple = field(default=(), compare=False)
    #: the batch record's own offset in the batch topic
    offset: int = field(default=-1, compare=False)
    store: str = field(default="", compare=False)
    #: ``es`` (event time, ms) of the batch's last record (lag in ``sluice status``)
    last_es: int | None = field(default=None, compare=False)


def encode_batch(store_id: str, batch_id: int, records: int, rows: int, start: dict, end: dict, split: bool,
                 created: str, size: int, ddl_at: list[tuple[int, str, int, int]], before: Offsets,
                 after: Offsets, last_es: int | None = None) -> bytes:
    body = {"format": FORMAT, "kind": "batch", "storeId": store_id, "batchId": batch_id, "records": records,
            "rows": rows, "bytes": size, "start": start, "end": end, "split": split, "createdAt": created,
            "ddl": [list(d) for d in ddl_at], "from": offsets_json(before), "to": offsets_json(after),
            "lastEs": last_es}
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def encode_start(store_id: str, after_batch: int, position: dict, forced: bool, at: str, offsets: Offsets,
                 keep_alive: bool = False) -> bytes:
    """A start record: where capture starts (or, ``keep_alive``, still stands) and the next batch."""
    body = {"format": FORMAT, "kind": "start", "storeId": store_id, "afterBatch": after_batch,
            "position": position, "forced": forced, "setAt": at, "to": offsets_json(offsets)}
    if keep_alive:
        body["keepAlive"] = True
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def decode(value: bytes, topic: str, offset: int) -> dict[str, Any]:
    try:
        body = json.loads(value)
        if not isinstance(body, dict) or body.get("kind") not in ("batch", "start"):
            raise ValueError("not a Sluice batch record")
        if int(body.get("format", 0)) > FORMAT:
            raise StoreError(f"{topic} offset {offset}: written by a newer Sluice (format {body['format']})",
                             hint="run the Sluice version that wrote the topic")
        return body
    except (ValueError, TypeError) as e:
        raise StoreError(f"Kafka store: the batch topic {topic} has an unreadable record at offset {offset}: {e}",
                         hint="the batch topic is written by Sluice's capture only; check store.kafka.batchTopic"
                         ) from None


def to_batch(body: dict[str, Any], offset: int) -> KafkaBatch:
    ddl = tuple(tuple(d) for d in body.get("ddl") or ())
    return KafkaBatch(batch_id=int(body["batchId"]), file="", sha256="", size=int(body.get("bytes", 0)),
                      records=int(body["records"]), rows=int(body["rows"]), start=dict(body["start"]),
                      end=dict(body["end"]), split=bool(body.get("split")), created_at=str(body.get("createdAt", "")),
                      ddl=tuple(int(d[0]) for d in ddl), start_offsets=offsets_of(body.get("from")),
                      end_offsets=offsets_of(body.get("to")), ddl_at=ddl, offset=offset,
                      store=str(body.get("storeId", "")), last_es=body.get("lastEs"))


def read_to_end(topics: Topics, since: int = 0) -> tuple[list[tuple[int, dict[str, Any]]], int, int | None]:
    """``(offset, body)`` of the committed batch records from offset ``since`` (or the topic's log
    start, when retention deleted older records) to the topic's end, where the read started, and
    the end offset it read up to (None: no batch topic yet). Records retention deleted are no error
    here: whether a group needed them is for its ``get`` to say."""
    if topics.batch_topic not in partitions_of(topics, [topics.batch_topic]):
        return [], since, None  # a new store: capture has not created it yet
    tp = (topics.batch_topic, 0)
    end = list_offsets(topics, [tp])[tp]
    start = max(since, list_offsets(topics, [tp], "earliest")[tp])
    return (_consume(topics, start, end) if start < end else []), start, end


def _consume(topics: Topics, since: int, end: int) -> list[tuple[int, dict[str, Any]]]:
    """The committed records of the batch topic in ``[since, end)``. Read with ``poll``, which
    returns as soon as a record or the partition's end (EOF event) is there: ``consume(n)`` waits
    for ``n`` records or its whole timeout, and a range holds fewer records than offsets
    (transaction markers, aborted records)."""
    c = consumer(topics)
    out: list[tuple[int, dict[str, Any]]] = []
    try:
        c.assign([TopicPartition(topics.batch_topic, 0, since)])
        while True:
            m = c.poll(10.0)
            if m is None:
                raise StoreError(f"Kafka store: no answer reading {topics.batch_topic} from offset {since}")
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    return out
                raise fail(KafkaException(err), f"read {topics.batch_topic}", topics)
            if m.offset() >= end:
                return out
            out.append((m.offset(), decode(m.value(), topics.batch_topic, m.offset())))
            if m.offset() >= end - 1:
                return out
    except KafkaException as e:
        raise fail(e, f"read {topics.batch_topic}", topics) from None
    finally:
        c.close()


def log_start(topics: Topics) -> int | None:
    """The batch topic's first offset retention kept (None: no batch topic yet). Above 0 on a
    topic without committed records: retention deleted all of them, the newest too."""
    if topics.batch_topic not in partitions_of(topics, [topics.batch_topic]):
        return None
    tp = (topics.batch_topic, 0)
    return list_offsets(topics, [tp], "earliest")[tp]


def age_s(body: dict[str, Any], now: float) -> float | None:
    """Seconds since a batch record was cut or a start record set (None: no time in it)."""
    from datetime import datetime

    at = body.get("createdAt") if body.get("kind") == "batch" else body.get("setAt")
    try:
        return now - datetime.fromisoformat(str(at)).timestamp()
    except ValueError:
        return None


def last_record(topics: Topics) -> tuple[int, dict[str, Any]] | None:
    """The newest committed batch record (control markers and aborted records take offsets too, so
    look back in growing windows)."""
    if topics.batch_topic not in partitions_of(topics, [topics.batch_topic]):
        return None
    tp = (topics.batch_topic, 0)
    end = list_offsets(topics, [tp])[tp]
    low = list_offsets(topics, [tp], "earliest")[tp]
    window = 16
    while end > low:
        got = _consume(topics, max(low, end - window), end)
        if got:
            return got[-1]
        if end - window <= low:
            return None
        window *= 4
    return None
