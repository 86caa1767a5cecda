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

from confluent_kafka import KafkaException

from pipeline.fsutil import now_iso
from pipeline.retry import doubling, retrying
from sluice_common.logs import get_logger

from . import batches as batch_records
from . import txnative
from .batches import KafkaBatch, Offsets, to_batch
from .client import TIMEOUT, Topics, ensure_topics, fail
from .routing import Router
from .txconfluent import ConfluentTx
from .txnative import NativeTx

log = get_logger("capture")
MAX_MESSAGE = 64 * 1024 * 1024
#: one produce batch (uncompressed): below the broker's default max.message.bytes (1 MiB), which a
#: larger batch exceeded once lz4 could not shrink it enough (MSG_SIZE_TOO_LARGE, the batch aborted);
#: a single record above it is sent alone and fits the topics capture creates (MAX_MESSAGE)
BATCH_BYTES = 900_000
_ES = re.compile(rb'"es":(\d+)')
Tx = ConfluentTx | NativeTx


class BatchProducer:
    """Publishes batches of encoded Dml records (``append_lines`` arguments) transactionally."""

    def __init__(self, topics: Topics, router: Router, transactional_id: str):
        self.topics, self.router, self.tid = topics, router, transactional_id
        self._p: Tx | None = None
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
        settings = self.topics.settings(**{
            "transactional.id": self.tid, "enable.idempotence": True, "acks": "all",
            "linger.ms": 20, "batch.size": BATCH_BYTES, "message.max.bytes": MAX_MESSAGE,
            "queue.buffering.max.kbytes": 2 * 1024 * 1024, "transaction.timeout.ms": 120_000,
            "compression.type": "lz4", "delivery.report.only.error": False})  # offsets come from the reports
        # the native producer (no Python object per message, GIL released) where it is built and
        # the settings are plaintext; confluent-kafka's otherwise (docs/kafka.md)
        try:
            self._p = (NativeTx if txnative.supports(settings) else ConfluentTx)(settings, self.router)
        except KafkaException as e:
            raise fail(e, "create the transactional producer", self.topics) from None
        self._init_error = None
        self._check = check
        self._init = threading.Thread(target=self._init_transactions, args=(self._p,), name="kafka-init", daemon=True)
        self._init.start()
        if wait:
            self._ready()

    def _init_transactions(self, p: Tx) -> None:
        try:
            p.init_transactions(TIMEOUT * 2)
        except KafkaException as e:
            self._init_error = e

    def _ready(self) -> Tx:
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

    def settle(self) -> None:
        """Make sure a producer is up (a new one after a failure: its ``init_transactions``
        completes or aborts the transaction the failed one left)."""
        self._ready()

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
        try:
            p.begin_transaction()
            sent = p.send_batch(lines, batch_id, set(ddl), self._ensure, self._pause_at, lambda: self._pause(p))
            after = {**before, **sent.after}
            es = _ES.search(lines[-1]) if lines else None
            value = batch_records.encode_batch(store_id, batch_id, len(lines), rows, start, end, split, now_iso(),
                                               sent.size, sent.ddl_at, before, after,
                                               int(es.group(1)) if es else None)
            meta_offset = p.send_one(self.topics.batch_topic, 0, value)
            self._commit(p)
        except (KafkaException, BufferError) as e:  # BufferError: produce_batch found the local queue full
            self._abandon(p)
            raise fail(e, f"publish batch {batch_id}", self.topics) from None
        except BaseException:  # creating a topic, a flush that timed out: the transaction must not stay open
            self._abandon(p)
            raise
        body = batch_records.decode(value, self.topics.batch_topic, meta_offset)
        return to_batch(body, meta_offset)

    def publish_start(self, store_id: str, after_batch: int, position: dict, forced: bool, offsets: Offsets,
                      keep_alive: bool = False) -> None:
        p = self._ready()
        try:
            p.begin_transaction()
            p.send_one(self.topics.batch_topic, 0, batch_records.encode_start(store_id, after_batch, position, forced,
                                                                              now_iso(), offsets, keep_alive))
            self._commit(p)
        except KafkaException as e:
            self._abandon(p)
            raise fail(e, "record the start position", self.topics) from None
        except BaseException:
            self._abandon(p)
            raise

    def _ensure(self, topics: list[str]) -> None:
        """Create the topics of a batch that are new to this producer (dynamic topics)."""
        new = [t for t in dict.fromkeys(topics) if t not in self._known]
        if new:
            ensure_topics(self.topics, new, {})
            self._known.update(new)

    def _pause(self, p: Tx) -> None:
        self._pause_at = -1  # once per process
        p.flush(30)  # the records so far are on the broker, in the open transaction
        if self._marker and not os.path.exists(self._marker):
            with open(self._marker, "w") as f:
                f.write(f"{os.getpid()}\n")
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not os.path.exists(self._marker + ".go"):
                time.sleep(0.2)

    def _commit(self, p: Tx) -> None:
        """Commit the open transaction; an error librdkafka calls retriable is tried again (10
        tries, waits doubling from 0.5 s up to 5 s)."""
        retrying(attempts=10, on=_retriable, wait=doubling(0.5, 5.0))(p.commit_transaction, TIMEOUT)

    def _abandon(self, p: Tx) -> None:
        """After a failure: abort the transaction if the producer can; a new producer (next ``open``)
        fences whatever is left either way."""
        try:
            p.abort_transaction(TIMEOUT)
        except KafkaException:
            pass
        self._p = None


def _retriable(e: BaseException) -> bool:
    """A commit error librdkafka says may succeed when tried again."""
    return isinstance(e, KafkaException) and e.args[0].retriable()
