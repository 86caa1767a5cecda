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
import threading
import time
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from pipeline.logs import get_logger
from pipeline.store.fsutil import now_iso

from . import batches as batch_records
from .batches import KafkaBatch, Offsets, to_batch
from .client import TIMEOUT, BrokerUnavailable, Topics, ensure_topics, fail
from .routing import Group, Router

log = get_logger("capture")
MAX_MESSAGE = 64 * 1024 * 1024
#: one produce batch (uncompressed): below the broker's default max.message.bytes (1 MiB), which a
#: larger batch exceeded once lz4 could not shrink it enough (MSG_SIZE_TOO_LARGE, the batch aborted);
#: a single record above it is sent alone and fits the topics capture creates (MAX_MESSAGE)
BATCH_BYTES = 900_000
#: the producer's local queue (messages), and the slice one ``produce_batch`` call queues
QUEUE_MESSAGES = 1_000_000
CHUNK = 10_000
_ES = re.compile(rb'"es":(\d+)')


class BatchProducer:
    """Publishes batches of encoded Dml records (``append_lines`` arguments) transactionally."""

    def __init__(self, topics: Topics, router: Router, transactional_id: str):
        self.topics, self.router, self.tid = topics, router, transactional_id
        self._p: Producer | None = None
        self._known: set[str] = set()
        self._init: threading.Thread | None = None
        self._init_error: KafkaException | None = None
        self._check: Any = None
        # fault-injection for the crash tests (SLUICE_TEST_KAFKA_PAUSE_AT / _MARKER): after producing that many
        # records of a batch (inside its transaction) write the marker file and wait to be killed
        pause = os.environ.get("SLUICE_TEST_KAFKA_PAUSE_AT")
        self._pause_at = int(pause) if pause else -1
        self._marker = os.environ.get("SLUICE_TEST_KAFKA_PAUSE_MARKER")

    def open(self, *, wait: bool = True, check: Any = None) -> None:
        """Create the producer and ``init_transactions``: fences an older producer with the same
        id and aborts its open transaction, so what a killed capture left is never visible.
        ``wait=False``: ``init_transactions`` (a few hundred ms) runs in a thread while capture
        starts reading; the first publish waits for it and then calls ``check`` (the store's proof
        that no other producer published between its resume read and the fence)."""
        ensure_topics(self.topics, [self.topics.batch_topic, self.topics.topic], {self.topics.batch_topic: 1})
        self._known = {self.topics.batch_topic, self.topics.topic}
        self._p = Producer(self.topics.settings(**{
            "transactional.id": self.tid, "enable.idempotence": True, "acks": "all",
            "linger.ms": 20, "batch.size": BATCH_BYTES, "message.max.bytes": MAX_MESSAGE,
            "queue.buffering.max.messages": QUEUE_MESSAGES, "queue.buffering.max.kbytes": 2 * 1024 * 1024,
            "transaction.timeout.ms": 120_000, "compression.type": "lz4"}))
        self._init_error = None
        self._check = check
        self._init = threading.Thread(target=self._init_transactions, args=(self._p,), name="kafka-init", daemon=True)
        self._init.start()
        if wait:
            self._ready()

    def _init_transactions(self, p: Producer) -> None:
        try:
            p.init_transactions(TIMEOUT * 2)
        except KafkaException as e:
            self._init_error = e

    def _ready(self) -> Producer:
        """The producer, once ``init_transactions`` finished (raises what it or ``check`` raised)."""
        if self._init is not None:
            self._init.join()
            self._init = None
            if self._init_error is not None:
                e, self._init_error, self._p = self._init_error, None, None
                raise fail(e, "start the transactional producer", self.topics) from None
        if self._p is None:  # a failed start: again, the check still to pass
            self.open(check=self._check)
        if self._check is not None:  # kept until it passed: a broker hiccup here is retried, never skipped
            self._check()
            self._check = None
        assert self._p is not None
        return self._p

    def close(self) -> None:
        if self._init is not None:
            self._init.join(TIMEOUT * 2)
            self._init = None
        if self._p is not None:
            try:
                self._p.flush(5)
            finally:
                self._p = None

    def publish(self, store_id: str, batch_id: int, lines: list[bytes], rows: int, ddl: tuple[int, ...],
                start: dict[str, Any], end: dict[str, Any], split: bool, before: Offsets) -> KafkaBatch:
        """One batch, one transaction; returns its batch (with the offsets after it)."""
        p = self._ready()
        last: dict[tuple[str, int], int] = {}
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

        # DDL records report their offsets (the batch record lists them: ddl_at)
        groups = self._place(lines, batch_id, set(ddl), lambda seq: lambda err, msg: remember(err, msg, seq))

        size = 0
        try:
            p.begin_transaction()
            produced = 0
            for topic, part, messages, group_size, _marks in groups:
                size += group_size
                last[(topic, part)] = -1  # the offset after the batch: its last record's (delivery report)
                if "callback" not in messages[-1]:
                    messages[-1]["callback"] = remember
                produced = self._produce_many(p, topic, part, messages, produced)
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
        except (KafkaException, BufferError) as e:  # BufferError: produce_batch found the local queue full
            self._abandon(p)
            raise fail(e, f"publish batch {batch_id}", self.topics) from None
        body = batch_records.decode(value, self.topics.batch_topic, meta_offset[0])
        return to_batch(body, meta_offset[0])

    def publish_start(self, store_id: str, after_batch: int, position: dict, forced: bool, offsets: Offsets) -> None:
        p = self._ready()
        try:
            p.begin_transaction()
            self._produce(p, self.topics.batch_topic, 0,
                          batch_records.encode_start(store_id, after_batch, position, forced, now_iso(), offsets), None)
            self._flush(p)
            self._commit(p)
        except KafkaException as e:
            self._abandon(p)
            raise fail(e, "record the start position", self.topics) from None

    def _place(self, lines: list[bytes], batch_id: int, ddl: set[int], mark: Any) -> list[Group]:
        """The batch's message groups (:meth:`Router.place_all`), each topic created if new, and
        a delivery callback on the DDL records (the batch record lists their offsets)."""
        groups = self.router.place_all(lines, ddl, batch_id)
        for topic, _part, messages, _size, marks in groups:
            if topic not in self._known:
                ensure_topics(self.topics, [topic], {})
                self._known.add(topic)
            for seq, i in marks:
                messages[i]["callback"] = mark(seq)
        return groups

    def _produce_many(self, p: Producer, topic: str, part: int, messages: list[dict[str, Any]], produced: int) -> int:
        """Queue ``messages`` in order to one partition with ``produce_batch`` (its per-message
        ``partition`` is not honoured by confluent-kafka 2.16: the partition is the call's), in
        slices that always fit the local queue (so no slice is refused half-way, which could
        reorder a retry); returns the count produced so far in this batch (the crash tests' pause
        point counts them)."""
        i = 0
        while i < len(messages):
            n = min(len(messages) - i, CHUNK)
            if produced <= self._pause_at < produced + n:
                n = self._pause_at - produced
                if n == 0:
                    self._pause(p)
                    self._pause_at = -1
                    continue
            while len(p) + n > QUEUE_MESSAGES:
                p.poll(0.05)  # librdkafka sends; delivery reports free the queue
            chunk = messages[i:i + n]
            queued = p.produce_batch(topic, chunk, partition=part)
            if queued < n:
                err = next((m["_error"] for m in chunk if "_error" in m), None)
                raise KafkaException(err if isinstance(err, KafkaError) else KafkaError(KafkaError._QUEUE_FULL))
            i += n
            produced += n
        return produced

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
