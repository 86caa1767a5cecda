"""Where a Dml record goes in Kafka: canal's MQ routing rules, in Python.

* **Topic** (``canal.mq.topic`` / ``canal.mq.dynamicTopic``): the default topic, or the first
  dynamicTopic item that matches ``db.table`` (then ``db``). An item is ``topic:pattern`` or just
  ``pattern`` (the topic is then the matched name, lowercased). A pattern with ``\\.`` is a table
  regex (matched against ``db.table``), any other regex a schema regex; a plain name compares
  case-insensitively. As in canal's ``MQMessageUtils.messageTopics``.
* **Partition** (``canal.mq.partitionsNum`` / ``canal.mq.partitionHash``): DDL and records of
  tables no hash item matches go to partition 0; ``db.table`` items hash the table name; items
  with ``:pk1^pk2`` or ``:$pk$`` hash each row's key values (Java ``String.hashCode``, XOR, the
  database's hash mixed in when ``databaseHash``), and a multi-row record is split into one record
  per partition, as canal's ``messagePartition(FlatMessage ...)`` does. Sluice's split records
  keep each row's original index in ``rowNo`` so positions ``(batchId, seq, row)`` are the same
  as in the file store.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import orjson

#: one (topic, partition)'s messages of a batch: see :meth:`Router.place_all`
Group = tuple[str, int, list[dict[str, Any]], int, list[tuple[int, int]]]
_WILD = re.compile(r"[*?+\[\]{}()|\\^$]")


def java_hash(text: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    if text.isascii():
        for c in text.encode():
            h = (31 * h + c) & 0xFFFFFFFF
    else:
        units = text.encode("utf-16-be")
        for i in range(0, len(units), 2):
            h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _items(config: str | None) -> list[str]:
    return [x.strip() for x in (config or "").replace(",", ";").split(";") if x.strip()]


def _matches(pattern: str, name: str) -> bool:
    if not _WILD.search(pattern):
        return pattern.lower() == name.lower()
    if "\\." in pattern:
        return "." in name and re.fullmatch(pattern, name, re.IGNORECASE) is not None
    return "." not in name and re.fullmatch(pattern, name, re.IGNORECASE) is not None


@dataclass(frozen=True)
class HashRule:
    """One partitionHash item: which tables, and table hash or which key columns."""

    pattern: str
    table_hash: bool
    auto_pk: bool
    columns: tuple[str, ...]


def parse_hash(config: str | None) -> tuple[HashRule, ...]:
    """``partitionHash`` items (``db.table:id^name``, ``regex:$pk$``, ``db.table``)."""
    rules = []
    for item in _items(config):
        i = item.rfind(":")
        if i > 0:
            cols = item[i + 1:]
            auto = cols.lower() == "$pk$"
            rules.append(HashRule(item[:i], False, auto, () if auto else tuple(c for c in cols.split("^") if c)))
        else:
            rules.append(HashRule(item, True, False, ()))
    return tuple(rules)


class Router:
    """Topic and partition of each Dml record (see the module docstring)."""

    def __init__(self, topic: str, dynamic: str | None, partitions: int, hash_config: str | None,
                 database_hash: bool = True):
        self.topic, self.partitions, self.database_hash = topic, partitions, database_hash
        self.dynamic = []
        for item in _items(dynamic):
            name, sep, pattern = item.partition(":")
            self.dynamic.append((name.strip(), pattern.strip()) if sep else (None, item))
        self.rules = parse_hash(hash_config)

    @lru_cache(maxsize=4096)  # noqa: B019 - one Router per capture run
    def topic_for(self, database: str, table: str) -> str:
        if not self.dynamic or not database or not table:
            return self.topic
        for name in (f"{database}.{table}", database):
            for topic, pattern in self.dynamic:
                if _matches(pattern, name):
                    return topic or name.lower()
        return self.topic

    @lru_cache(maxsize=4096)  # noqa: B019
    def rule_for(self, database: str, table: str) -> HashRule | None:
        """The first hash item whose name (case-insensitive) or regex (full match) fits ``db.table``."""
        if self.partitions == 1:
            return None
        name = f"{database}.{table}"
        for r in self.rules:
            if (r.pattern.lower() == name.lower() if not _WILD.search(r.pattern)
                    else re.fullmatch(r.pattern, name, re.IGNORECASE)):
                return r
        return None

    def place_all(self, lines: list[bytes], ddl: set[int], batch_id: int) -> list[Group]:
        """A batch's Kafka messages per ``(topic, partition)``, in batch order: each group is
        ``(topic, partition, messages, size, marks)``, ``messages`` the ``produce_batch`` dicts
        (``{"value": record + ',"batchId":B,"seq":S}'}``), ``size`` their bytes, ``marks`` the
        ``(seq, index)`` of the DDL records among them (``ddl``: their seqs). The native scanner
        (``sluice_binlog.kafka_place``, the same hashes) when it is built, with :meth:`route` for
        the records it leaves (rows on several partitions); this module alone without it."""
        native = _native_place()
        if native is not None:
            return native(lines, ddl, batch_id, self.partitions, self.database_hash, self.resolve,
                          lambda seq: self.route(lines[seq], seq in ddl), self.fixed_topic)
        groups: dict[tuple[str, int], Group] = {}
        for seq, line in enumerate(lines):
            topic, placed = self.route(line, seq in ddl)
            suffix = b',"batchId":%d,"seq":%d}' % (batch_id, seq)
            for part, rec in placed:
                group = groups.get((topic, part))
                if group is None:
                    group = groups[(topic, part)] = (topic, part, [], [0], [])
                value = rec + suffix
                if seq in ddl:
                    group[4].append((seq, len(group[2])))
                group[2].append({"value": value})
                group[3][0] += len(value)
        return [(topic, part, messages, size[0], marks) for topic, part, messages, size, marks in groups.values()]

    @property
    def fixed_topic(self) -> str | None:
        """The topic of every record when nothing needs a scan (one partition, no dynamic topic)."""
        return self.topic if self.partitions == 1 and not self.dynamic else None

    def resolve(self, database: str, table: str) -> tuple[int, list[str] | None, str]:
        """The native scanner's rule and topic of a table: mode 0 partition 0, 1 the table's hash,
        2 the key columns' hash (columns None: the record's pkNames)."""
        topic = self.topic_for(database, table)
        rule = self.rule_for(database, table)
        if rule is None:
            return 0, None, topic
        if rule.table_hash:
            return 1, None, topic
        return 2, None if rule.auto_pk else list(rule.columns), topic

    def route(self, line: bytes, is_ddl: bool) -> tuple[str, list[tuple[int, bytes]]]:
        """The topic and ``[(partition, record)]`` of one encoded record (``line``: its JSON
        without the closing ``}``): usually the record itself on one partition, split records for
        a key hash whose rows land on different partitions. One parse per record, none when there
        is one partition and no dynamic topic."""
        if self.partitions == 1 and not self.dynamic:
            return self.topic, [(0, line)]
        rec = orjson.loads(line + b"}")
        database, table = rec.get("database") or "", rec.get("table") or ""
        return self.topic_for(database, table), self.place(line, rec, database, table, is_ddl)

    def place(self, line: bytes, rec: dict, database: str, table: str, is_ddl: bool) -> list[tuple[int, bytes]]:
        """``[(partition, record)]`` for one decoded record (see :meth:`route`)."""
        rule = None if is_ddl else self.rule_for(database, table)
        if rule is None:
            return [(0, line)]
        n = self.partitions
        if rule.table_hash:
            return [(abs(abs(_cached_hash(table)) % n), line)]
        rows = rec.get("data") or []
        if not rows:
            return [(0, line)]
        cols = rec.get("pkNames") or () if rule.auto_pk else rule.columns
        base = _cached_hash(database) if self.database_hash else 0
        if len(rows) == 1:  # the common case: one row, one partition
            h = base
            row = rows[0]
            for c in cols:
                v = row.get(c)
                h ^= java_hash(v) if v else 0
            return [(abs(abs(h) % n), line)]
        parts = []
        for row in rows:
            h = base
            for c in cols:
                v = row.get(c)
                h ^= java_hash(v) if v else 0
            parts.append(abs(abs(h) % n))
        if parts.count(parts[0]) == len(parts):
            return [(parts[0], line)]
        old = rec.get("old")
        out = []
        for p in sorted(set(parts)):
            idx = [i for i, q in enumerate(parts) if q == p]
            sub = dict(rec)
            sub["data"] = [rows[i] for i in idx]
            if old:
                sub["old"] = [old[i] for i in idx]
            sub["rowNo"] = idx
            out.append((p, orjson.dumps(sub)[:-1]))
        return out


@lru_cache(maxsize=1)
def _native_place():  # noqa: ANN202 - the extension's function, or None
    """``sluice_binlog.kafka_place`` when the native extension is built and not turned off
    (``SLUICE_CAPTURE_NATIVE=0``, as for capture's decoder)."""
    from pipeline.native import load

    module = load()
    return getattr(module, "kafka_place", None) if module is not None else None


@lru_cache(maxsize=4096)
def _cached_hash(text: str) -> int:
    """:func:`java_hash` of a repeated name (database, table)."""
    return java_hash(text)
