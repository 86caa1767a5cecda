"""The job's read of the Kafka store's offset ranges (``sluice.spark.KafkaRanges`` in
sluice-spark.jar, pipeline/store/kafka/frame.py), against the real broker, on local Spark.

A range holds what a read-committed consumer sees: committed records only (aborted
transactions and commit markers take offsets but are no rows), nothing before its start or
from its end on. The rows equal what Spark's own Kafka source gives (the path taken without
that jar). A range retention deleted, or one that never fills, fails naming the range.
"""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from pipeline.store.kafka.client import Topics
from pipeline.store.kafka.frame import POISON, checked, kafka_frame, read_ranges


@pytest.fixture(scope="module")
def spark(kafka_spark):
    return kafka_spark


def dml(batch: int, seq: int, v: str) -> bytes:
    return json.dumps({"database": "db", "table": "t", "type": "INSERT", "isDdl": False, "pkNames": ["id"],
                       "data": [{"id": str(seq), "v": v}], "batchId": batch, "seq": seq}).encode()


def _topics(kafka: dict, topic: str) -> Topics:
    return Topics(kafka["bootstrap"], topic, topic + ".sluice-batches", 2, 1, "sluice", ())


@pytest.fixture
def topic(kafka):
    """A two-partition topic: committed, aborted, committed transactions; {partition: [(offset, v)]}
    of the committed records, and the end offsets."""
    name = f"ranges-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka["bootstrap"]})
    admin.create_topics([NewTopic(name, 2, 1)])[name].result()
    p = Producer({"bootstrap.servers": kafka["bootstrap"], "transactional.id": name, "enable.idempotence": True})
    p.init_transactions(30)
    seq = 0
    for batch, commit, parts in ((1, True, (0, 1)), (2, False, (0,)), (3, True, (0, 1)), (4, True, (0,))):
        p.begin_transaction()
        for part in parts:
            for _ in range(3):
                p.produce(name, dml(batch, seq, f"b{batch}-p{part}"), partition=part)
                seq += 1
        p.flush(30)
        (p.commit_transaction if commit else p.abort_transaction)(30)
    c_end = {}
    c = Consumer({"bootstrap.servers": kafka["bootstrap"], "group.id": name})
    for part in (0, 1):
        c_end[part] = c.get_watermark_offsets(TopicPartition(name, part), timeout=10)[1]
    c.close()
    return {"name": name, "end": c_end, "kafka": kafka}


def _rows(df) -> list[tuple]:
    return sorted((r["seq"], r["batchId"], r["data"][0]) for r in df.collect())


def test_a_range_is_what_a_read_committed_consumer_sees(spark, topic):
    t, end = topic["name"], topic["end"]
    df = checked(read_ranges(spark, [(t, 0, 0, end[0]), (t, 1, 0, end[1])],
                             {"bootstrap.servers": topic["kafka"]["bootstrap"]}), canal=False)
    got = _rows(df)
    assert [b for _, b, _ in got] == [1] * 6 + [3] * 6 + [4] * 3  # batch 2 was aborted
    assert len(got) == 15 and end[0] > 12  # its records and the commit markers took offsets


def test_start_and_end_bound_the_range(spark, topic):
    t = topic["name"]
    # partition 0: batch 1 at offsets 0-2, its marker 3, batch 2 (aborted) 4-6 and its marker 7,
    # batch 3 at 8-10: [2, 9) is batch 1's last record and batch 3's first
    raw = read_ranges(spark, [(t, 0, 2, 9)], {"bootstrap.servers": topic["kafka"]["bootstrap"]})
    assert sorted(r["offset"] for r in raw.collect()) == [2, 8]


def test_the_rows_equal_sparks_own_kafka_source(spark, topic, monkeypatch):
    topics = _topics(topic["kafka"], topic["name"])
    start = {(topic["name"], 0): 1, (topic["name"], 1): 0}
    end = {(topic["name"], p): o for p, o in topic["end"].items()}
    ours = kafka_frame(spark, topics, start, end, canal=False)
    monkeypatch.setenv("SLUICE_KAFKA_READER", "spark")
    theirs = kafka_frame(spark, topics, start, end, canal=False)
    assert sorted(ours.collect()) == sorted(theirs.collect())
    assert len(ours.collect()) == 14


def test_a_poison_record_names_its_place(spark, kafka):
    name = f"ranges-poison-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka["bootstrap"]})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result()
    p = Producer({"bootstrap.servers": kafka["bootstrap"]})
    for v in (dml(1, 0, "a"), b"{not json", dml(1, 1, "b")):
        p.produce(name, v, partition=0)
    p.flush(30)
    df = checked(read_ranges(spark, [(name, 0, 0, 3)], {"bootstrap.servers": kafka["bootstrap"]}), canal=False)
    with pytest.raises(Exception, match=f"{POISON}: topic {name} partition 0 offset 1:"):
        df.where("database = 'elsewhere'").collect()


def test_a_range_retention_deleted_fails_naming_it(spark, topic):
    t = topic["name"]
    admin = AdminClient({"bootstrap.servers": topic["kafka"]["bootstrap"]})
    tp = TopicPartition(t, 1, 2)
    admin.delete_records([tp])[tp].result()
    df = read_ranges(spark, [(t, 1, 0, topic["end"][1])], {"bootstrap.servers": topic["kafka"]["bootstrap"]})
    with pytest.raises(Exception) as e:
        df.collect()
    assert f"cannot read topic {t} partition 1 offsets [0, {topic['end'][1]})" in str(e.value)
    assert "offset 0 is outside the partition's log (retention deleted records the group had not acked" in str(
        e.value)


def test_a_range_that_never_fills_fails_naming_it(spark, topic):
    t, end = topic["name"], topic["end"][1]
    df = read_ranges(spark, [(t, 1, 0, end + 5)],
                     {"bootstrap.servers": topic["kafka"]["bootstrap"], "sluice.stall.ms": "1500"})
    with pytest.raises(Exception) as e:
        df.collect()
    assert f"cannot read topic {t} partition 1 offsets [0, {end + 5}): no record past offset {end}" in str(e.value)


def test_reads_one_after_another(spark, topic):
    """Later reads in the same JVM take the pooled consumers of earlier ones (same settings)."""
    t, end = topic["name"], topic["end"]
    settings = {"bootstrap.servers": topic["kafka"]["bootstrap"]}
    for _ in range(3):
        assert len(read_ranges(spark, [(t, 0, 0, end[0]), (t, 1, 0, end[1])], settings).collect()) == 15


def test_a_topic_the_broker_does_not_know_fails_naming_it(spark, kafka):
    name = f"ranges-gone-{uuid.uuid4().hex[:8]}"
    df = read_ranges(spark, [(name, 0, 0, 3)], {"bootstrap.servers": kafka["bootstrap"]})
    with pytest.raises(Exception) as e:
        df.collect()
    assert f"cannot read topic {name} partition 0 offsets [0, 3): the broker knows no such topic partition" in str(
        e.value)
