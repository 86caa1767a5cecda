"""The other way round: canal's own Kafka client (canal.client 1.1.7, ``KafkaCanalConnector`` in
flatMessage mode) reads the topic Sluice's capture wrote, and parses every record as a canal
``FlatMessage``: as many messages as records, with database, table, type, isDdl, rows, old and
pkNames as Sluice wrote them (tests/support/canal/ReadFlat.java)."""

from __future__ import annotations

import json
import uuid

from confluent_kafka import Consumer, TopicPartition

from tests.support import sysbench
from tests.support.canal_client import read_flat
from tests.support.deploy import kafka_store, sluice, write_deployment


def _all(kafka: dict, topic: str) -> list[dict]:
    c = Consumer({"bootstrap.servers": kafka["bootstrap"], "group.id": f"probe-{uuid.uuid4().hex[:6]}",
                  "isolation.level": "read_committed", "enable.partition.eof": True})
    parts = c.list_topics(topic, timeout=10).topics[topic].partitions
    c.assign([TopicPartition(topic, p, 0) for p in parts])
    out, eof = [], set()
    while len(eof) < len(parts):
        m = c.poll(5)
        if m is None:
            break
        if m.error():
            eof.add(m.partition())
        else:
            out.append(json.loads(m.value()))
    c.close()
    return out


def test_canal_client_parses_every_record_sluice_wrote(tmp_path, mariadb, kafka):
    db = f"cc_{uuid.uuid4().hex[:6]}"
    cfg = write_deployment(tmp_path, mariadb, name=db, include=rf"{db}\..*", groups=[], mappings={},
                           kafka=kafka_store(kafka, db, partitionsNum=3, partitionHash=rf"{db}\..*:$pk$"))
    sluice("capture", "--config", str(cfg), "--once")
    sysbench.create_database(mariadb, db)
    try:
        sysbench.prepare(mariadb, db, tables=2, table_size=300, create=False)
        sysbench.run(mariadb, db, seconds=2, threads=2, tables=2, table_size=300)
        with sysbench.connect(mariadb, db) as c, c.cursor() as cur:
            cur.execute("ALTER TABLE sbtest1 ADD COLUMN extra INT")
            cur.execute("UPDATE sbtest1 SET extra = id WHERE id <= 50")  # one multi-row event, split by key
        sluice("capture", "--config", str(cfg), "--once")
    finally:
        sysbench.drop_database(mariadb, db)
    ours = _all(kafka, db)
    parsed = read_flat(kafka["bootstrap"], db, f"canal-client-{db}", len(ours))
    assert len(parsed) == len(ours) > 0
    assert sorted((p[0], p[1], p[2], p[3] == "true", int(p[4])) for p in parsed) == sorted(
        (r["database"], r["table"], r["type"], bool(r["isDdl"]), len(r["data"] or [])) for r in ours)
    ddl = [p for p in parsed if p[3] == "true"]
    assert any(p[2] == "ALTER" for p in ddl) and all(p[4] == "0" for p in ddl)
    updates = [p for p in parsed if p[2] == "UPDATE"]
    assert updates and all(int(p[7]) == int(p[4]) for p in updates)  # an old image per row
    assert all(p[8] == "id" for p in parsed if p[3] == "false")
