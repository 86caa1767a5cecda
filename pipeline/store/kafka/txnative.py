"""Capture's transactional producer in the native extension (``sluice_binlog.TxProducer``,
librdkafka driven from Rust): a batch is placed into one buffer and queued with the GIL released,
without a Python object per message, so the thread that reads the binlog is not held up by the
publishing thread (docs/kafka.md). Same methods as :class:`.txconfluent.ConfluentTx`; the
extension's errors are raised as confluent-kafka's ``KafkaException``, so :func:`.client.fail`
and the retries read them the same way.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from .routing import Router
from .txconfluent import QUEUE_MESSAGES, Ensure, Pause, Sent, wait_acked

#: settings only confluent-kafka's build of librdkafka has (the native one has no TLS or SASL)
_SECURE = ("security.protocol", "ssl.", "sasl.")


@lru_cache(maxsize=1)
def _module() -> Any:
    """The extension when it is built (with the producer) and not turned off."""
    from pipeline.native import load

    module = load()
    return module if module is not None and hasattr(module, "TxProducer") else None


def supports(settings: dict[str, Any]) -> bool:
    """Whether the native producer is built (and not turned off) and can take these settings:
    plaintext only (``security.protocol`` plaintext or unset, no ``ssl.*``/``sasl.*``)."""
    if _module() is None:
        return False
    for key, value in settings.items():
        if key == "security.protocol" and str(value).lower() == "plaintext":
            continue
        if key.startswith(_SECURE):
            return False
    return True


def _text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _kafka_error(e: BaseException) -> KafkaException:
    """A ``KafkaNativeError(code, name, reason, fatal, retriable, txn_requires_abort)`` as
    confluent-kafka's exception."""
    code, name, reason, fatal, retriable, abort = e.args
    return KafkaException(KafkaError(code, f"{reason} ({name})", fatal=fatal, retriable=retriable,
                                     txn_requires_abort=abort))


class NativeTx:
    """The transactional producer in the native extension (see the module docstring)."""

    def __init__(self, settings: dict[str, Any], router: Router):
        self.m = _module()
        self.router = router
        try:
            self.p = self.m.TxProducer([(k, _text(v)) for k, v in
                                        {**settings, "queue.buffering.max.messages": QUEUE_MESSAGES}.items()])
        except self.m.KafkaNativeError as e:
            raise _kafka_error(e) from None

    def _call(self, name: str, *args: Any) -> Any:
        try:
            return getattr(self.p, name)(*args)
        except self.m.KafkaNativeError as e:
            raise _kafka_error(e) from None

    def init_transactions(self, timeout: float) -> None:
        self._call("init_transactions", timeout)

    def begin_transaction(self) -> None:
        self._call("begin_transaction")

    def commit_transaction(self, timeout: float) -> None:
        self._call("commit_transaction", timeout)

    def abort_transaction(self, timeout: float) -> None:
        self._call("abort_transaction", timeout)

    def flush(self, timeout: float) -> int:
        return self.p.flush(timeout)

    def send_batch(self, lines: list[bytes], batch_id: int, ddl: set[int], ensure: Ensure,
                   pause_at: int, pause: Pause) -> Sent:
        """Queue a batch's records (batch order, so in order per partition) and wait for the
        broker's acks."""
        r = self.router
        plan = self.m.kafka_plan(lines, ddl, batch_id, r.partitions, r.database_hash, r.resolve,
                                 lambda seq: r.route(lines[seq], seq in ddl), r.fixed_topic)
        ensure(list(plan.topics))
        self.p.take_reports()  # nothing left from an earlier, failed batch
        if 0 <= pause_at < len(plan):
            self._call("produce_plan", plan, 0, pause_at)
            pause()
            self._call("produce_plan", plan, pause_at, len(plan))
        else:
            self._call("produce_plan", plan, 0, len(plan))
        self._flush()
        last, marks, error = self.p.take_reports()
        if error is not None:
            raise _kafka_error(self.m.KafkaNativeError(*error))
        after = {(topic, part): off + 1 for topic, part, off in last}
        return Sent(after, sorted(marks), plan.size)

    def send_one(self, topic: str, part: int, value: bytes) -> int:
        """Produce one record, wait for its ack; its offset."""
        self.p.take_reports()
        self._call("produce", topic, part, value, 0)
        self._flush()
        _last, marks, error = self.p.take_reports()
        if error is not None:
            raise _kafka_error(self.m.KafkaNativeError(*error))
        return marks[0][3]

    def _flush(self) -> None:
        wait_acked(self.p.flush)
