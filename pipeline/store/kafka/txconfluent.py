"""Capture's transactional producer on confluent-kafka: the fallback of :mod:`.txnative`.

Used where the native extension is not built or turned off (``SLUICE_CAPTURE_NATIVE=0``), and
for settings the native build does not support (TLS, SASL: :func:`.txnative.supports`). A
batch's messages are placed by :meth:`Router.place_all` as ``produce_batch`` dicts and queued per
``(topic, partition)``; the delivery reports give the offsets. Both backends have the same
methods (:class:`Sent` is what a batch's records gave), so :class:`.producer.BatchProducer` does
not know which it drives.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from .client import BrokerUnavailable
from .routing import Group, Router

#: the producer's local queue (messages), and the slice one ``produce_batch`` call queues
QUEUE_MESSAGES = 1_000_000
CHUNK = 10_000
FLUSH_SECONDS = 300


@dataclass(frozen=True)
class Sent:
    """What a batch's records gave: the offset after each ``(topic, partition)``'s last record,
    the ``(seq, topic, partition, offset)`` of the DDL records, and the bytes of all values."""

    after: dict[tuple[str, int], int]
    ddl_at: list[tuple[int, str, int, int]]
    size: int


#: ``pause(produced)``: the crash tests' hook, called once ``pause_at`` messages are queued
Pause = Callable[[], None]
#: ``ensure(topics)``: create the topics not known yet (dynamic topics)
Ensure = Callable[[list[str]], None]


class ConfluentTx:
    """The transactional producer on confluent-kafka (see the module docstring)."""

    def __init__(self, settings: dict[str, Any], router: Router):
        self.p = Producer({**settings, "queue.buffering.max.messages": QUEUE_MESSAGES})
        self.router = router

    def init_transactions(self, timeout: float) -> None:
        self.p.init_transactions(timeout)

    def begin_transaction(self) -> None:
        self.p.begin_transaction()

    def commit_transaction(self, timeout: float) -> None:
        self.p.commit_transaction(timeout)

    def abort_transaction(self, timeout: float) -> None:
        self.p.abort_transaction(timeout)

    def flush(self, timeout: float) -> int:
        return self.p.flush(timeout)

    def send_batch(self, lines: list[bytes], batch_id: int, ddl: set[int], ensure: Ensure,
                   pause_at: int, pause: Pause) -> Sent:
        """Queue a batch's records in order per partition and wait for the broker's acks."""
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

        groups: list[Group] = self.router.place_all(lines, ddl, batch_id)
        ensure([g[0] for g in groups])
        size = produced = 0
        for topic, part, messages, group_size, group_marks in groups:
            for seq, i in group_marks:  # DDL records report their offsets (the batch record lists them)
                messages[i]["callback"] = lambda err, msg, seq=seq: remember(err, msg, seq)
            if "callback" not in messages[-1]:  # the offset after the batch: its last record's
                messages[-1]["callback"] = remember
            size += group_size
            produced = self._produce_many(topic, part, messages, produced, pause_at, pause)
        self._flush()
        if errors:
            raise KafkaException(errors[0])
        after = {key: off + 1 for key, off in last.items() if off >= 0}
        return Sent(after, [(s, *marks[s]) for s in sorted(marks)], size)

    def send_one(self, topic: str, part: int, value: bytes) -> int:
        """Produce one record, wait for its ack; its offset."""
        out: list[int] = []
        errors: list[KafkaError] = []
        while True:
            try:
                self.p.produce(topic, value, partition=part,
                               on_delivery=lambda err, msg: errors.append(err) if err else out.append(msg.offset()))
                break
            except BufferError:
                self.p.poll(0.05)
        self._flush()
        if errors:
            raise KafkaException(errors[0])
        return out[0]

    def _produce_many(self, topic: str, part: int, messages: list[dict[str, Any]], produced: int,
                      pause_at: int, pause: Pause) -> int:
        """Queue ``messages`` in order to one partition with ``produce_batch`` (its per-message
        ``partition`` is not honoured by confluent-kafka 2.16: the partition is the call's), in
        slices that always fit the local queue (so no slice is refused half-way, which could
        reorder a retry); returns the count produced so far in this batch (the crash tests' pause
        point counts them)."""
        i = 0
        while i < len(messages):
            n = min(len(messages) - i, CHUNK)
            if produced <= pause_at < produced + n:
                n = pause_at - produced
                if n == 0:
                    pause()
                    pause_at = -1
                    continue
            while len(self.p) + n > QUEUE_MESSAGES:
                self.p.poll(0.05)  # librdkafka sends; delivery reports free the queue
            chunk = messages[i:i + n]
            queued = self.p.produce_batch(topic, chunk, partition=part)
            if queued < n:
                err = next((m["_error"] for m in chunk if "_error" in m), None)
                raise KafkaException(err if isinstance(err, KafkaError) else KafkaError(KafkaError._QUEUE_FULL))
            i += n
            produced += n
        return produced

    def _flush(self) -> None:
        wait_acked(self._flush_once)

    def _flush_once(self, timeout: float) -> int:
        try:
            return self.p.flush(timeout)
        except SystemError as e:
            # a fatal error (fenced) raised while delivery callbacks still ran: confluent-kafka
            # wraps it; the KafkaException is the error
            if isinstance(e.__cause__, KafkaException):
                raise e.__cause__ from None
            raise


def wait_acked(flush: Callable[[float], int]) -> None:
    """Call ``flush`` (a producer's: returns the messages still in flight) until the broker acked
    every queued message; :class:`BrokerUnavailable` after :data:`FLUSH_SECONDS`."""
    deadline = time.monotonic() + FLUSH_SECONDS
    while flush(5) > 0:
        if time.monotonic() > deadline:
            raise BrokerUnavailable(f"Kafka store: records not acknowledged by the broker within {FLUSH_SECONDS} s",
                                    hint="check that the Kafka brokers are up")
