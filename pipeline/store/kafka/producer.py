"""Capture's side of the Kafka store: one Kafka transaction per batch.

The producer is idempotent and transactional (``enable.idempotence``, ``acks=all``, a
``transactional.id`` per source and topic). A batch is: begin the transaction, produce its Dml
records to their topics and partitions (:mod:`.routing`), wait until the broker acked them (the
delivery reports give the offsets), produce the batch record (:mod:`.batches`) with those offsets,
commit. Read-committed consumers therefore see a batch whole or not at all -- the Kafka form of
the file store's "a batch file is written whole or not at all" -- and a capture killed in the
middle leaves an open transaction that the next capture's ``init_transactions`` aborts (it fences
the old producer) before it looks for its resume position.
"""

from __future__ import annotations

import os
import re
import time
from json.decoder import scanstring
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from pipeline.logs import get_logger
from pipeline.store.fsutil import now_iso

from . import batches as batch_records
from .batches import KafkaBatch, Offsets, to_batch
from .client import TIMEOUT, BrokerUnavailable, Topics, ensure_topics, fail
from .routing import Router

log = get_logger("capture")
MAX_MESSAGE = 64 * 1024 * 1024
#: one produce batch (uncompressed): below the broker's default max.message.bytes (1 MiB), which a
#: larger batch exceeded once lz4 could not shrink it enough (MSG_SIZE_TOO_LARGE, the batch aborted);
#: a single record above it is sent alone and fits the topics capture creates (MAX_MESSAGE)
BATCH_BYTES = 900_000
_ES = re.compile(rb'"es":(\d+)')


def _peek(line: bytes, key: bytes) -> str:
    """The string value of a top-level key near the start of an encoded record (database, table)."""
    i = line.find(b'"%s":"' % key)
    if i < 0:
        return ""
    i += len(key) + 4
    return scanstring(line[i:i + 1024].decode("utf-8", "replace"), 0)[0]


class BatchProducer:
    """Publishes batches of encoded Dml records (``append_lines`` arguments) transactionally."""

    def __init__(self, topics: Topics, router: Router, transactional_id: str):
        self.topics, self.router, self.tid = topics, router, transactional_id
        self._p: Producer | None = None
        self._known: set[str] = set()
        # fault-injection for the crash tests (SLUICE_TEST_KAFKA_PAUSE_AT / _MARKER): after producing that many
        # records of a batch (inside its transaction) write the marker file and wait to be killed
        pause = os.environ.get("SLUICE_TEST_KAFKA_PAUSE_AT")
        self._pause_at = int(pause) if pause else -1
        self._marker = os.environ.get("SLUICE_TEST_KAFKA_PAUSE_MARKER")

    def open(self) -> None:
        """Create the producer and ``init_transactions``: fences an older producer with the same
        id and aborts its open transaction, so what a killed capture left is never visible."""
        ensure_topics(self.topics, [self.topics.batch_topic, self.topics.topic], {self.topics.batch_topic: 1})
        self._known = {self.topics.batch_topic, self.topics.topic}
        self._p = Producer(self.topics.settings(**{
            "transactional.id": self.tid, "enable.idempotence": True, "acks": "all",
            "linger.ms": 20, "batch.size": BATCH_BYTES, "message.max.bytes": MAX_MESSAGE,
            "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 2 * 1024 * 1024,
            "transaction.timeout.ms": 120_000, "compression.type": "lz4"}))
        try:
            self._p.init_transactions(TIMEOUT * 2)
        except KafkaException as e:
            self._p = None
            raise fail(e, "start the transactional producer", self.topics) from None

    def close(self) -> None:
        if self._p is not None:
            try:
                self._p.flush(5)
            finally:
                self._p = None

    def publish(self, store_id: str, batch_id: int, lines: list[bytes], rows: int, ddl: tuple[int, ...],
                start: dict[str, Any], end: dict[str, Any], split: bool, before: Offsets) -> KafkaBatch:
        """One batch, one transaction; returns its batch (with the offsets after it)."""
        if self._p is None:
            self.open()
        p = self._p
        assert p is not None
        placed, ddl_set = self._place(lines, batch_id, set(ddl))
        last: dict[tuple[str, int], int] = {}
        for key in {(t, part) for t, part, _, _ in placed}:
            last[key] = -1
        marks: dict[int, tuple[str, int, int]] = {}
        errors: list[KafkaError] = []

        def remember(err: KafkaError | None, msg: Any, seq: int | None = None) -> None:
            if err is not None:
                errors.append(err)
                return
            key = (msg.topic(), msg.partition())
            last[key] = max(last.get(key, -1), msg.offset())
            if seq is not None:
                marks[seq] = (msg.topic(), msg.partition(), msg.offset())

        final = {}
        for i, (t, part, _, _) in enumerate(placed):
            final[(t, part)] = i
        size = 0
        try:
            p.begin_transaction()
            for i, (t, part, seq, value) in enumerate(placed):
                if i == self._pause_at:
                    self._pause(p)
                size += len(value)
                cb = None
                if seq in ddl_set:
                    cb = (lambda s: lambda err, msg: remember(err, msg, s))(seq)
                elif final[(t, part)] == i:
                    cb = remember
                self._produce(p, t, part, value, cb)
            self._flush(p)
            if errors:
                raise KafkaException(errors[0])
            after = dict(before)
            for key, off in last.items():
                if off >= 0:
                    after[key] = off + 1
            ddl_at = [(s, *marks[s]) for s in sorted(marks)]
            es = _ES.search(lines[-1]) if lines else None
            value = batch_records.encode_batch(store_id, batch_id, len(lines), rows, start, end, split, now_iso(),
                                               size, ddl_at, before, after, int(es.group(1)) if es else None)
            meta_offset: list[int] = []
            self._produce(p, self.topics.batch_topic, 0, value,
                          lambda err, msg: errors.append(err) if err else meta_offset.append(msg.offset()))
            self._flush(p)
            if errors:
                raise KafkaException(errors[0])
            self._commit(p)
        except KafkaException as e:
            self._abandon(p)
            raise fail(e, f"publish batch {batch_id}", self.topics) from None
        body = batch_records.decode(value, self.topics.batch_topic, meta_offset[0])
        return to_batch(body, meta_offset[0])

    def publish_start(self, store_id: str, after_batch: int, position: dict, forced: bool, offsets: Offsets) -> None:
        if self._p is None:
            self.open()
        p = self._p
        assert p is not None
        try:
            p.begin_transaction()
            self._produce(p, self.topics.batch_topic, 0,
                          batch_records.encode_start(store_id, after_batch, position, forced, now_iso(), offsets), None)
            self._flush(p)
            self._commit(p)
        except KafkaException as e:
            self._abandon(p)
            raise fail(e, "record the start position", self.topics) from None

    def _place(self, lines: list[bytes], batch_id: int, ddl: set[int]) -> tuple[list, set[int]]:
        out = []
        for seq, line in enumerate(lines):
            db, table = _peek(line, b"database"), _peek(line, b"table")
            topic = self.router.topic_for(db, table)
            if topic not in self._known:
                ensure_topics(self.topics, [topic], {})
                self._known.add(topic)
            suffix = b',"batchId":%d,"seq":%d}' % (batch_id, seq)
            for part, rec in self.router.place(line, db, table, seq in ddl):
                out.append((topic, part, seq, rec + suffix))
        return out, ddl

    @staticmethod
    def _produce(p: Producer, topic: str, part: int, value: bytes, cb: Any) -> None:
        while True:
            try:
                if cb is None:
                    p.produce(topic, value, partition=part)
                else:
                    p.produce(topic, value, partition=part, on_delivery=cb)
                return
            except BufferError:
                p.poll(0.05)

    @staticmethod
    def _flush(p: Producer) -> None:
        deadline = time.monotonic() + 300
        while p.flush(5) > 0:
            if time.monotonic() > deadline:
                raise BrokerUnavailable("Kafka store: records not acknowledged by the broker within 300 s",
                                        hint="check that the Kafka brokers are up")

    def _pause(self, p: Producer) -> None:
        p.flush(30)  # the records so far are on the broker, in the open transaction
        if self._marker and not os.path.exists(self._marker):
            with open(self._marker, "w") as f:
                f.write(f"{os.getpid()}\n")
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not os.path.exists(self._marker + ".go"):
                time.sleep(0.2)

    def _commit(self, p: Producer) -> None:
        for attempt in range(10):
            try:
                p.commit_transaction(TIMEOUT)
                return
            except KafkaException as e:
                err = e.args[0]
                if err.retriable() and attempt < 9:
                    time.sleep(min(5.0, 0.5 * 2 ** attempt))
                    continue
                raise

    def _abandon(self, p: Producer) -> None:
        """After a failure: abort the transaction if the producer can; a new producer (next ``open``)
        fences whatever is left either way."""
        try:
            p.abort_transaction(TIMEOUT)
        except KafkaException:
            pass
        self._p = None
