"""pipeline/store/kafka/client.py: which group-offset errors are retried."""

from __future__ import annotations


def test_only_a_busy_coordinator_is_retried():
    """client.committed/commit retry "not coordinator" (a fresh broker's __consumer_offsets), not a
    broker that does not answer (that fails at once)."""
    from confluent_kafka import KafkaError, KafkaException

    from pipeline.store.kafka.client import _coordinator_busy

    assert _coordinator_busy(KafkaException(KafkaError(KafkaError.NOT_COORDINATOR)))
    assert _coordinator_busy(KafkaException(KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS)))
    assert not _coordinator_busy(KafkaException(KafkaError(KafkaError._TRANSPORT)))
    assert not _coordinator_busy(KafkaException(KafkaError(KafkaError._TIMED_OUT)))
