"""Kafka clients of the Kafka store (confluent-kafka, i.e. librdkafka): settings, topic names,
topic creation, listing offsets, committed group offsets, and the mapping of client errors to
Sluice's errors (a broker that does not answer is a :class:`BrokerUnavailable`, worth a retry).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    OFFSET_INVALID,
    Consumer,
    ConsumerGroupTopicPartitions,
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from pipeline.config import Config, KafkaStoreConfig
from pipeline.retry import doubling, retrying
from sluice_common.errors import StoreError, TransientError

TIMEOUT = 30.0


class BrokerUnavailable(TransientError):
    """The Kafka cluster did not answer (down, restarting, unreachable)."""


@dataclass(frozen=True)
class Topics:
    """The resolved names of a deployment's Kafka store (picklable)."""

    bootstrap: str
    topic: str
    batch_topic: str
    partitions: int
    replication: int
    written_by: str
    properties: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, cfg: Config) -> Topics:
        k = cfg.store.kafka
        assert isinstance(k, KafkaStoreConfig)
        topic = k.topic or cfg.source.name
        return cls(k.bootstrap_servers, topic, k.batchTopic or f"{topic}.sluice-batches", k.partitionsNum,
                   k.replicationFactor, k.writtenBy, tuple(sorted(k.properties.items())))

    def settings(self, **more: Any) -> dict[str, Any]:
        """Client settings: bootstrap servers, the configured properties, then ``more``."""
        return {"bootstrap.servers": self.bootstrap, **dict(self.properties), **more}


def fail(e: BaseException, what: str, topics: Topics) -> BaseException:
    """A Sluice error for a client exception while doing ``what``."""
    err = e.args[0] if isinstance(e, KafkaException) and e.args else None
    code = err.code() if isinstance(err, KafkaError) else None
    text = err.str() if isinstance(err, KafkaError) else str(e)
    transient = code in (KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN,
                         KafkaError.REQUEST_TIMED_OUT, KafkaError.NOT_COORDINATOR,
                         KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                         KafkaError._WAIT_COORD, KafkaError.NOT_LEADER_FOR_PARTITION,
                         KafkaError.LEADER_NOT_AVAILABLE, KafkaError.NETWORK_EXCEPTION) or (
        isinstance(err, KafkaError) and err.retriable())
    msg = f"Kafka store ({topics.bootstrap}, topic {topics.topic}): cannot {what}: {text}"
    if code in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH):
        return StoreError(msg, hint="another capture of this source (same transactional.id) started and took over "
                          "the topic: run only one capture per source; what this one had not committed is aborted")
    if code == KafkaError._FATAL:  # confluent-kafka's produce_batch names no cause
        return StoreError(msg, hint="the producer hit a fatal error (the broker's log says which; fenced by another "
                          "capture of this source?): run again, nothing uncommitted becomes visible")
    if transient:
        return BrokerUnavailable(msg, hint="check that the Kafka brokers are up and reachable; run again "
                                 "(nothing was acked, replays are idempotent)")
    return StoreError(msg, hint="check store.kafka in the config and the broker's logs")


_ADMINS: dict[tuple[str, tuple[tuple[str, str], ...]], AdminClient] = {}


def admin(topics: Topics) -> AdminClient:
    """The process's admin client for these brokers and client properties, made once: a new
    client per call paid a metadata round trip each time and, now and then, a 3 s wait before
    its first request."""
    key = (topics.bootstrap, topics.properties)
    client = _ADMINS.get(key)
    if client is None:
        client = _ADMINS[key] = AdminClient(topics.settings())
    return client


def ensure_topics(topics: Topics, names: list[str], partitions: dict[str, int]) -> None:
    """Create the topics that do not exist yet (``partitions`` per name; the batch topic: 1)."""
    client = admin(topics)
    try:
        existing = client.list_topics(timeout=TIMEOUT).topics
    except KafkaException as e:
        raise fail(e, "list topics", topics) from None
    from pipeline.store.kafka.producer import MAX_MESSAGE

    # max.message.bytes: a record (one Dml of a multi-row statement) may exceed the broker's 1 MiB default
    new = [NewTopic(n, num_partitions=partitions.get(n, topics.partitions), replication_factor=topics.replication,
                    config={"max.message.bytes": str(MAX_MESSAGE)})
           for n in names if n not in existing]
    if not new:
        return
    for name, fut in client.create_topics(new, request_timeout=TIMEOUT).items():
        try:
            fut.result()
        except KafkaException as e:
            if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise fail(e, f"create topic {name}", topics) from None


def partitions_of(topics: Topics, names: list[str]) -> dict[str, int]:
    """How many partitions each existing topic has (missing topics are left out).

    A metadata request for ``names`` only (DescribeTopics, which never creates a topic, where a
    plain metadata request for a missing topic may have the broker auto-create it): the whole
    cluster's metadata, asked several times a sync, grows with every topic of the cluster."""
    if not names:
        return {}
    try:
        futs = admin(topics).describe_topics(TopicCollection(list(dict.fromkeys(names))), request_timeout=TIMEOUT)
    except KafkaException as e:
        raise fail(e, "describe topics", topics) from None
    out: dict[str, int] = {}
    for name, fut in futs.items():
        try:
            out[name] = len(fut.result().partitions)
        except KafkaException as e:
            err = e.args[0] if e.args else None
            if isinstance(err, KafkaError) and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                continue
            raise fail(e, f"describe topic {name}", topics) from None
    return out


def list_offsets(topics: Topics, tps: list[tuple[str, int]], spec: str = "latest") -> dict[tuple[str, int], int]:
    """Offsets of ``tps``: ``latest`` (the last stable offset: committed transactions only) or
    ``earliest`` (the log start: what retention kept)."""
    if not tps:
        return {}
    client = admin(topics)
    want = {TopicPartition(t, p): (OffsetSpec.latest() if spec == "latest" else OffsetSpec.earliest())
            for t, p in tps}

    def ask() -> dict[tuple[str, int], int]:
        futs = client.list_offsets(want, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=TIMEOUT)
        return {(tp.topic, tp.partition): f.result().offset for tp, f in futs.items()}

    def renew(_attempt: int, _e: BaseException, _delay: float) -> None:
        # after a broker restart the cached client keeps asking with the old leader epoch
        # ("Leader epoch is older than broker epoch") and does not refresh its metadata by
        # itself: a new client starts from fresh metadata
        nonlocal client
        _ADMINS.pop((topics.bootstrap, topics.properties), None)
        client = admin(topics)

    try:  # a topic created a moment ago may not have its leader in the metadata yet
        return retrying(attempts=6, on=_leaderless, wait=doubling(0.5), before_sleep=renew)(ask)
    except KafkaException as e:
        raise fail(e, f"list {spec} offsets", topics) from None


def _leaderless(e: BaseException) -> bool:
    return isinstance(e, KafkaException) and "leader" in str(e).lower()


def consumer(topics: Topics, group: str | None = None) -> Consumer:
    """A read-committed consumer without auto-commit (``group``: for committed offsets)."""
    return Consumer(topics.settings(**{"group.id": group or "sluice-reader", "enable.auto.commit": False,
                                       "isolation.level": "read_committed", "enable.partition.eof": True,
                                       "auto.offset.reset": "error",
                                       "fetch.wait.max.ms": 10}))


#: attempts of a group-offset request that failed transiently: a broker that has just created
#: ``__consumer_offsets`` answers "not coordinator" / "coordinator loading" for a few seconds
RETRIES = 8


#: the waits between them: 0.25, 0.5, 1, then 2 s
_BACKOFF = doubling(0.25, 2.0)


def _coordinator_busy(e: BaseException) -> bool:
    """The group's coordinator moved or is still loading (retried); a broker that does not answer
    is not (it fails at once, as a BrokerUnavailable)."""
    if not isinstance(e, KafkaException):
        return False
    err = e.args[0] if e.args else None
    return isinstance(err, KafkaError) and err.code() in (
        KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.COORDINATOR_LOAD_IN_PROGRESS)


#: one consumer per brokers+properties+group for reading committed offsets: each call asks the
#: group's coordinator afresh, but a new consumer per call paid the connection and the coordinator
#: lookup again (a sync reads its cursor several times)
_READERS: dict[tuple[str, tuple[tuple[str, str], ...], str], Consumer] = {}


def _group_client(topics: Topics, group: str) -> Consumer:
    """The process's consumer for ``group``'s offsets (reused: a new consumer must find the
    group's coordinator first, and a sync reads and commits several times)."""
    key = (topics.bootstrap, topics.properties, group)
    c = _READERS.get(key)
    if c is None:
        c = _READERS[key] = consumer(topics, group)
    return c


def _drop_group_client(topics: Topics, group: str) -> None:
    """Forget the group's consumer after an error: its coordinator may be stale."""
    c = _READERS.pop((topics.bootstrap, topics.properties, group), None)
    if c is not None:
        c.close()


def _raise_partition_error(tps: list[TopicPartition]) -> None:
    """Raise the first per-partition error of a commit's or committed-read's answer."""
    for tp in tps:
        if tp.error is not None:
            raise KafkaException(tp.error)


def committed(topics: Topics, group: str, tps: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, str]]:
    """The group's committed (offset, metadata) per partition; partitions without one are left out."""
    if not tps:
        return {}

    def read() -> list[TopicPartition]:
        try:
            got = _group_client(topics, group).committed([TopicPartition(t, p) for t, p in tps], timeout=TIMEOUT)
            _raise_partition_error(got)  # a partition's own error is not "no offset"
            return got
        except KafkaException:
            _drop_group_client(topics, group)  # the next attempt asks afresh
            raise

    try:
        got = retrying(attempts=RETRIES, on=_coordinator_busy, wait=_BACKOFF)(read)
    except KafkaException as e:
        raise fail(e, f"read the committed offsets of group {group}", topics) from None
    return {(tp.topic, tp.partition): (tp.offset, tp.metadata or "") for tp in got
            if tp.offset != OFFSET_INVALID and tp.offset >= 0}


def cursor_groups(topics: Topics) -> list[str]:
    """Every consumer group with a Sluice cursor on the batch topic (a committed offset whose
    metadata holds a ``batchId``): the groups of each deployment sharing this store. On a cluster
    with ACLs only the groups this client may describe are seen. A cluster that cannot list all
    its groups raises (a partial list would let ``store restart`` move a store others read)."""
    client, found = admin(topics), []
    try:
        listed = client.list_consumer_groups(request_timeout=TIMEOUT).result()
        if listed.errors:  # KafkaExceptions: a broker that did not answer, a group it could not list
            raise listed.errors[0]
        for g in sorted(x.group_id for x in listed.valid if x.group_id):
            ask = [ConsumerGroupTopicPartitions(g, [TopicPartition(topics.batch_topic, 0)])]
            got = client.list_consumer_group_offsets(ask, request_timeout=TIMEOUT)[g].result()
            tps = got.topic_partitions or ()
            if any(tp.error is None and tp.offset >= 0 and _is_cursor(tp.metadata) for tp in tps):
                found.append(g)
    except Exception as e:  # noqa: BLE001 - KafkaException and the client's own (ValueError, ...): one message
        raise fail(e, "list the consumer groups that read the store", topics) from None
    return found


def _is_cursor(metadata: str | None) -> bool:
    """Does a committed offset's metadata hold a Sluice batchId (not a plain consumer's commit)?"""
    try:
        return isinstance(json.loads(metadata or "").get("batchId"), int)
    except (ValueError, AttributeError):
        return False


def commit(topics: Topics, group: str, offsets: dict[tuple[str, int], int], metadata: dict[tuple[str, int], str]
           ) -> None:
    """Commit the group's offsets, all partitions in one request (one record batch in the group's
    ``__consumer_offsets`` partition: all of them or none). librdkafka reports an error of some
    partitions only in the returned list, not as an exception: those raise too."""
    tps = [TopicPartition(t, p, off, metadata=metadata[(t, p)]) if (t, p) in metadata else TopicPartition(t, p, off)
           for (t, p), off in sorted(offsets.items())]

    def send() -> None:
        try:
            _raise_partition_error(_group_client(topics, group).commit(offsets=tps, asynchronous=False) or [])
        except KafkaException:
            _drop_group_client(topics, group)
            raise

    try:  # committing the same offsets again is harmless
        retrying(attempts=RETRIES, on=_coordinator_busy, wait=_BACKOFF)(send)
    except KafkaException as e:
        raise fail(e, f"commit the offsets of group {group}", topics) from None
