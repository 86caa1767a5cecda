"""canal flatMessage records built exactly in canal's documented format, and a canal adapter config.

What canal-server 1.1.x writes to Kafka in flatMessage mode (``canal.mq.flatMessage = true``):
one JSON object per record, produced by fastjson from ``com.alibaba.otter.canal.protocol.FlatMessage``
(fields in alphabetical order: data, database, es, gtid, id, isDdl, mysqlType, old, pkNames, sql,
sqlType, table, ts, type). Values are strings or null; ``old`` holds the before-values of the
changed columns of an UPDATE; a DDL has ``isDdl: true``, ``sql`` and null row fields. A multi-row
statement is one record with several rows ("batch"), split per partition when partitionHash hashes
rows; a single-row record has one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import Producer

from pipeline.store.kafka.routing import java_hash

USER_TYPES = {"id": ("int(11)", 4), "name": ("varchar(40)", 12), "role_id": ("bigint(20)", -5),
              "c_time": ("datetime", 93)}


def flat(mid: int, database: str, table: str, kind: str, rows: list[dict] | None, old: list[dict] | None = None,
         sql: str = "", es: int = 1_700_000_000_000, types: dict[str, tuple[str, int]] | None = None) -> dict:
    """One flatMessage (alphabetical keys, as fastjson writes them)."""
    ddl = rows is None
    types = types or USER_TYPES
    cols = list(rows[0]) if rows else []
    return {"data": rows, "database": database, "es": es, "gtid": "", "id": mid, "isDdl": ddl,
            "mysqlType": None if ddl else {c: types[c][0] for c in cols}, "old": old,
            "pkNames": None if ddl else ["id"], "sql": sql,
            "sqlType": None if ddl else {c: types[c][1] for c in cols}, "table": table, "ts": es + 512,
            "type": kind}


def canal_partition(msg: dict, partitions: int) -> dict[int, dict]:
    """canal's ``MQMessageUtils.messagePartition(FlatMessage, n, "db\\..*:$pk$", databaseHash=true)``:
    DDL to partition 0, rows by ``database.hashCode() ^ pk.hashCode()``, the record split per partition."""
    if msg["isDdl"] or not msg["data"] or partitions == 1:
        return {0: msg}
    out: dict[int, dict] = {}
    for i, row in enumerate(msg["data"]):
        h = java_hash(msg["database"])
        for pk in msg["pkNames"]:
            h ^= java_hash(row.get(pk) or "")
        p = abs(abs(h) % partitions)
        sub = out.setdefault(p, {**msg, "data": [], "old": [] if msg["old"] else None})
        sub["data"].append(row)
        if msg["old"]:
            sub["old"].append(msg["old"][i])
    return out


def publish(bootstrap: str, topic: str, messages: list[dict], partitions: int = 1) -> None:
    """Write the messages as canal-server does (plain idempotent producer, fastjson-like JSON)."""
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"})
    for m in messages:
        for part, sub in sorted(canal_partition(m, partitions).items()):
            p.produce(topic, json.dumps(sub, ensure_ascii=False, separators=(",", ":")).encode(), partition=part)
    assert p.flush(30) == 0


def adapter_config(tmp: Path, *, bootstrap: str, topic: str, group: str, source: dict[str, Any],
                   target: dict[str, Any], mapping: dict[str, Any], extra: dict[str, Any] | None = None) -> Path:
    """canal's client-adapter ``application.yml`` in Kafka mode plus ``rdb/<mapping>.yml``."""
    (tmp / "rdb").mkdir(parents=True, exist_ok=True)
    (tmp / "rdb" / "mapping.yml").write_text(yaml.safe_dump(mapping, sort_keys=False))
    conf = {
        "server": {"port": 8081},
        "spring": {"jackson": {"date-format": "yyyy-MM-dd HH:mm:ss", "time-zone": "GMT+8"}},
        "canal.conf": {
            "mode": "kafka", "flatMessage": True, "syncBatchSize": 1000, "retries": 0, "timeout": None,
            "consumerProperties": {"kafka.bootstrap.servers": bootstrap, "kafka.enable.auto.commit": False,
                                   "kafka.auto.commit.interval.ms": 1000, "kafka.auto.offset.reset": "latest",
                                   "kafka.request.timeout.ms": 40000, "kafka.session.timeout.ms": 30000,
                                   "kafka.isolation.level": "read_committed", "kafka.max.poll.records": 1000},
            "srcDataSources": {"defaultDS": {
                "url": f"jdbc:mysql://{source['host']}:{source['port']}/{mapping['dbMapping']['database']}"
                       "?useUnicode=true", "username": source["user"], "password": source["password"]}},
            "canalAdapters": [{"instance": topic, "groups": [{"groupId": group, "outerAdapters": [
                {"name": "logger"},
                {"name": "rdb", "key": "mysql1", "properties": {
                    "jdbc.driverClassName": "com.mysql.jdbc.Driver",
                    "jdbc.url": f"jdbc:mysql://{target['host']}:{target['port']}/{target['database']}?useUnicode=true",
                    "jdbc.username": target["user"], "jdbc.password": target["password"]}}]}]}],
        },
        **(extra or {}),
    }
    path = tmp / "application.yml"
    path.write_text(yaml.safe_dump(conf, sort_keys=False))
    return path
