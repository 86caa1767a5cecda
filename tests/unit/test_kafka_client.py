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


def test_the_readers_of_a_store_are_the_groups_with_a_sluice_cursor_and_a_partial_list_fails(monkeypatch):
    """cursor_groups: a group whose offset on the batch topic carries a batchId is a reader; a plain
    consumer's commit (no such metadata), a group without an offset there (-1001) and an empty id are
    not; a listing with errors fails (a broker down: transient), any other exception of the client is
    one StoreError."""
    from concurrent.futures import Future
    from types import SimpleNamespace as NS

    import pytest
    from confluent_kafka import KafkaError, KafkaException, TopicPartition

    from pipeline.store.kafka import client
    from sluice_common.errors import StoreError

    def done(value):
        f = Future()
        f.set_result(value)
        return f

    offsets = {"g1": (5, '{"batchId": 3}'), "plain": (7, None), "fresh": (-1001, None), "odd": (2, "x")}

    class Admin:
        errors: list = []

        def list_consumer_groups(self, request_timeout):
            return done(NS(valid=[NS(group_id=g) for g in [*offsets, ""]], errors=self.errors))

        def list_consumer_group_offsets(self, ask, request_timeout):
            (req,) = ask
            off, meta = offsets[req.group_id]
            tp = TopicPartition("t.sluice-batches", 0, off, *([meta] if meta is not None else []))
            return {req.group_id: done(NS(topic_partitions=[tp]))}

    topics = client.Topics("b:9092", "t", "t.sluice-batches", 1, 1, "sluice", ())
    admin = Admin()
    monkeypatch.setattr(client, "admin", lambda _topics: admin)
    assert client.cursor_groups(topics) == ["g1"]
    admin.errors = [KafkaException(KafkaError(KafkaError._TRANSPORT))]  # a broker that did not answer
    with pytest.raises(client.BrokerUnavailable, match="cannot list the consumer groups that read the store"):
        client.cursor_groups(topics)
    admin.errors = []  # a client that raises its own kind of error:
    monkeypatch.setattr(Admin, "list_consumer_group_offsets", lambda *a, **k: (_ for _ in ()).throw(ValueError("x")))
    with pytest.raises(StoreError, match="cannot list the consumer groups"):
        client.cursor_groups(topics)
