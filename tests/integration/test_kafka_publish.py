"""Capture's Kafka producer against the real broker: every record on the partition canal's hash
gives it, in order, and the batch record's offsets and DDL marks exactly where the records are.

A record on another partition than the router's, or an offset range that misses one, loses rows
silently downstream (the job reads the batch record's ranges), so this reads the topic back and
checks every record.
"""

from __future__ import annotations

import json
import random
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from pipeline.config import load_config
from pipeline.store import open_store
from pipeline.store.kafka import routing, txnative
from pipeline.store.kafka.txconfluent import ConfluentTx
from pipeline.store.kafka.txnative import NativeTx
from tests.support.deploy import kafka_store, write_deployment

POS = {"logfile": "mysql-bin.000001", "logpos": 4}


def _records(rng: random.Random, db: str, n: int) -> list[dict]:
    out = []
    for i in range(n):
        if i % 50 == 7:
            out.append({"database": db, "table": "t", "isDdl": True, "type": "ALTER", "sql": "ALTER TABLE t ADD c INT",
                        "data": None, "es": 1, "ts": 2})
            continue
        rows = [{"id": str(rng.randint(1, 500)), "v": rng.choice(["é", "x", None])}
                for _ in range(rng.choice([1, 1, 1, 3]))]
        out.append({"id": i, "database": db, "table": rng.choice(["t", "u"]), "pkNames": ["id"], "isDdl": False,
                    "type": "UPDATE", "es": 1, "ts": 2, "sql": "", "data": rows, "old": [{"v": "o"} for _ in rows]})
    return out


def _read(bootstrap: str, topic: str, partitions: int) -> dict[int, list[tuple[int, dict]]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex}", "enable.partition.eof": True,
                  "isolation.level": "read_committed"})
    got: dict[int, list[tuple[int, dict]]] = {p: [] for p in range(partitions)}
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    eof = set()
    try:
        while len(eof) < partitions:
            m = c.poll(10)
            assert m is not None, "no answer from the broker"
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                eof.add(m.partition())
                continue
            got[m.partition()].append((m.offset(), json.loads(m.value())))
    finally:
        c.close()
    return got


def _hashed_store(tmp_path, mariadb, kafka, prefix: str, parts: int):
    """A Kafka store on a fresh topic of ``parts`` partitions, rows hashed by primary key."""
    db = f"{prefix}_{uuid.uuid4().hex[:6]}"
    section = kafka_store(kafka, db, partitionsNum=parts, partitionHash=rf"{db}\..*:$pk$")
    cfg = load_config(write_deployment(tmp_path, mariadb, name=db, include=rf"{db}\..*", groups=[], mappings={},
                                       kafka=section))
    return db, open_store(cfg)


@pytest.mark.parametrize("producer,router,parts", [
    ("native", "native", 3), ("confluent", "native", 3), ("confluent", "python", 3), ("native", "native", 1),
    ("confluent", "native", 1)], ids=["native-producer", "confluent-native-router", "confluent-python-router",
                                      "native-producer-1-partition", "confluent-1-partition"])
def test_every_record_on_its_hashed_partition_and_the_batch_offsets_exact(tmp_path, mariadb, kafka, monkeypatch,
                                                                         producer, router, parts):
    """Each of capture's producers (the native one, confluent-kafka's with the native or the
    Python router) places and reports the same."""
    if routing._native_place() is None or not txnative.supports({}):
        # scripts/bootstrap builds them: without them these cases would test the fallback three times
        pytest.fail("the native extension (sluice_binlog) is not built (scripts/bootstrap)", pytrace=False)
    if producer == "confluent":
        monkeypatch.setattr(txnative, "supports", lambda settings: False)
    if router == "python":
        monkeypatch.setattr(routing, "_native_place", lambda: None)
    db, store = _hashed_store(tmp_path, mariadb, kafka, "kp", parts)  # 1: one topic, nothing scanned
    rng = random.Random(7)
    batches = [_records(rng, db, 400) for _ in range(3)]
    with store.capture_lock():
        store.set_start_position(POS)
        metas = [store.append(recs, start=POS, end={**POS, "logpos": 5 + i}) for i, recs in enumerate(batches)]
        used = type(store._producer._p)
    assert used is (NativeTx if producer == "native" else ConfluentTx)
    got = _read(kafka["bootstrap"], db, parts)
    router = routing.Router(db, None, parts, rf"{db}\..*:$pk$")
    for b, recs in enumerate(batches, start=1):
        meta = metas[b - 1]
        for seq, rec in enumerate(recs):
            line = json.dumps(rec, ensure_ascii=False, separators=(",", ":")).encode()[:-1]
            _, placed = router.route(line, bool(rec.get("isDdl")))
            for part, _ in placed:
                mine = [r for _, r in got[part] if r["batchId"] == b and r["seq"] == seq]
                assert len(mine) == 1, (b, seq, part)
        for p in range(parts):  # the batch's range on each partition holds exactly its records
            lo, hi = meta.start_offsets.get((db, p), 0), meta.end_offsets.get((db, p), 0)
            inside = [r for off, r in got[p] if lo <= off < hi]
            assert inside and all(r["batchId"] == b for r in inside), (b, p, lo, hi)
            assert [r["seq"] for r in inside] == sorted(r["seq"] for r in inside)  # in order within a partition
            assert not [r for off, r in got[p] if r["batchId"] == b and not lo <= off < hi]
        for seq, _topic, p, off in meta.ddl_at:  # DDL marks point at the DDL records
            assert dict(got[p])[off]["isDdl"] and dict(got[p])[off]["seq"] == seq


def test_a_round_is_acked_with_one_commit_in_order_only(tmp_path, mariadb, kafka):
    """``ack_round``: the group's offsets move from before the round to the end of its last batch
    in one commit (lag 0 on every partition after it); a round that does not start right after
    the cursor, or skips a batch, is refused and commits nothing."""
    from pipeline.store.kafka.client import committed, list_offsets
    from sluice_common.errors import OutOfOrderAckError

    parts = 2
    db, store = _hashed_store(tmp_path, mariadb, kafka, "ka", parts)
    rng = random.Random(3)
    with store.capture_lock():
        store.set_start_position(POS)
        for i in range(4):
            store.append(_records(rng, db, 60), start=POS, end={**POS, "logpos": 5 + i})
    got = [b.batch_id for b in store.get("g", 10)]
    assert got == [1, 2, 3, 4]
    for bad in ([2, 3], [1, 3], [1, 2, 2]):
        with pytest.raises(OutOfOrderAckError):
            store.ack_round("g", bad)
        assert store.cursor("g") == 0
    store.ack_round("g", [1, 2])
    assert store.cursor("g") == 2
    store.ack_round("g", [3, 4])
    assert store.cursor("g") == 4
    tps = [(db, p) for p in range(parts)]
    ends = list_offsets(store.topics, tps, "latest")
    offsets = committed(store.topics, "g", tps)
    assert {tp: o for tp, (o, _) in offsets.items()} == ends  # lag 0 everywhere


@pytest.mark.parametrize("producer", ["native", "confluent"])
def test_a_fenced_producer_fails_clearly_and_publishes_nothing(tmp_path, mariadb, kafka, monkeypatch, producer):
    """A second producer with the same transactional id fences the first: the first's next batch
    is refused with one clear error (librdkafka's fatal fencing, through either backend's error
    translation), nothing of it becomes visible, and the second publishes normally."""
    from pipeline.store.kafka.producer import BatchProducer
    from sluice_common.errors import SluiceError

    if producer == "confluent":
        monkeypatch.setattr(txnative, "supports", lambda settings: False)
    db, store = _hashed_store(tmp_path, mariadb, kafka, "kf", 2)
    router = routing.Router(db, None, 2, rf"{db}\..*:$pk$")
    tid = f"sluice-test-fence.{db}"
    first, second = BatchProducer(store.topics, router, tid), BatchProducer(store.topics, router, tid)
    lines = [json.dumps(r, separators=(",", ":")).encode()[:-1] for r in _records(random.Random(5), db, 30)]
    try:
        first.open()
        first.publish("s", 1, lines, 30, (), POS, POS, False, {})
        second.open()  # fences the first
        with pytest.raises(SluiceError) as err:
            first.publish("s", 2, lines, 30, (), POS, POS, False, {})
        assert "cannot publish batch 2" in str(err.value) and "fenced" in str(err.value).lower(), str(err.value)
        second.publish("s", 2, lines, 30, (), POS, POS, False, {})
    finally:
        first.close()
        second.close()
    seen = sorted({(r["batchId"], r["seq"]) for recs in _read(kafka["bootstrap"], db, 2).values() for _, r in recs})
    assert seen == sorted({(b, s) for b in (1, 2) for s in range(30)})  # the fenced batch 2 is not among them twice


@pytest.mark.parametrize("producer", ["native", "confluent"])
def test_a_batch_that_fails_outside_the_client_leaves_no_open_transaction(tmp_path, mariadb, kafka, monkeypatch,
                                                                          producer):
    """A batch that fails inside its transaction for a reason that is not the Kafka client's (here:
    creating a new topic while the broker is away) aborts that transaction, so the next attempt
    (``--follow`` retries a transient error) publishes instead of failing on an open transaction."""
    from pipeline.store.kafka.client import BrokerUnavailable
    from pipeline.store.kafka.producer import BatchProducer

    if producer == "confluent":
        monkeypatch.setattr(txnative, "supports", lambda settings: False)
    db, store = _hashed_store(tmp_path, mariadb, kafka, "kx", 2)
    bp = BatchProducer(store.topics, routing.Router(db, None, 2, rf"{db}\..*:$pk$"), f"sluice-test-abort.{db}")
    lines = [json.dumps(r, separators=(",", ":")).encode()[:-1] for r in _records(random.Random(9), db, 20)]
    real = bp._ensure
    calls = []

    def flaky(topics: list[str]) -> None:
        calls.append(topics)
        if len(calls) == 1:
            raise BrokerUnavailable("Kafka store: cannot create topics (test)")
        real(topics)

    monkeypatch.setattr(bp, "_ensure", flaky)
    try:
        bp.open()
        with pytest.raises(BrokerUnavailable):
            bp.publish("s", 1, lines, 20, (), POS, POS, False, {})
        bp.publish("s", 1, lines, 20, (), POS, POS, False, {})
    finally:
        bp.close()
    deadline = time.monotonic() + 30
    while True:  # a read_committed consumer meets a partition's end at its last stable offset, which the
        # aborted attempt's marker may still hold back on a loaded machine: read again until it moved
        got = _read(kafka["bootstrap"], db, 2)
        if len({r["seq"] for recs in got.values() for _, r in recs}) >= 20 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    for recs in got.values():  # once each per partition (a split record is on both): the failed attempt left nothing
        seqs = [r["seq"] for _, r in recs]
        assert len(seqs) == len(set(seqs)) and all(r["batchId"] == 1 for _, r in recs)
    assert {r["seq"] for recs in got.values() for _, r in recs} == set(range(20))


def test_a_commit_whose_outcome_was_unknown_is_settled_before_capture_goes_on(tmp_path, mariadb, kafka, monkeypatch):
    """The broker committed a batch but the client saw an error (a timeout at commit): capture
    must resume after that batch and give the next one the next id, not the same id again."""
    from confluent_kafka import KafkaError, KafkaException

    from sluice_common.errors import SluiceError

    db, store = _hashed_store(tmp_path, mariadb, kafka, "ku", 2)
    lines = [json.dumps(r, separators=(",", ":")).encode()[:-1] for r in _records(random.Random(5), db, 10)]
    pos = [dict(POS, logpos=4 + i) for i in range(4)]
    with store.capture_lock():
        store.set_start_position(pos[0])
        store.append_lines(lines, rows=10, ddl=(), start=pos[0], end=pos[1])
        real = store._producer._commit

        def committed_then_lost(p):
            real(p)
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "commit answer lost (test)"))

        monkeypatch.setattr(store._producer, "_commit", committed_then_lost)
        with pytest.raises(SluiceError):
            store.append_lines(lines, rows=10, ddl=(), start=pos[1], end=pos[2])
        monkeypatch.undo()
        assert store.last_position() == pos[2]  # it did commit: capture resumes after it
        store.append_lines(lines, rows=10, ddl=(), start=pos[2], end=pos[3])
    got = _read(kafka["bootstrap"], f"{db}.sluice-batches", 1)[0]
    batches = [(r["batchId"], r["end"]["logpos"]) for _, r in got if r["kind"] == "batch"]
    assert batches == [(1, 5), (2, 6), (3, 7)]
