"""Kafka routing: canal's partition hash, and the native scanner agreeing with the Python rules.

The Python router (pipeline/store/kafka/routing.py) is the reference; the native
``sluice_binlog.kafka_place`` must give every record the same topic, partition and message
bytes, in the same order, or leave it to Python (its ``fallback``). A record on the wrong
partition breaks per-key order silently, so the records here are the awkward ones: non-ASCII
and astral keys, escapes, nulls, empty strings, composite keys (one column named twice), multi-row
records whose rows hash apart, DDL, column orders and key names that also appear as values.
"""

from __future__ import annotations

import json
import random

import pytest

from pipeline.store.kafka import routing
from pipeline.store.kafka.routing import Router, java_hash
from tests.support.prereq import missing

native = routing._native_place()
if native is None:  # scripts/bootstrap builds it; CI must not pass without it
    missing("the native extension (sluice_binlog.kafka_place) is not built (scripts/bootstrap)", module=True)


def test_java_hash_matches_java_string_hashcode():
    # values of java.lang.String#hashCode
    assert java_hash("") == 0
    assert java_hash("hello") == 99162322
    assert java_hash("Aa") == java_hash("BB") == 2112
    assert java_hash("polygenelubricants") == -2147483648
    assert java_hash("é") == 233
    assert java_hash("😀") == 0xD83D * 31 + 0xDE00  # a surrogate pair: two UTF-16 units


KEYS = ["1", "42", "", "abc", "ABC", "abc ", "é", "Ä ö", "😀x", 'q"uote', "back\\slash", "tab\tnl\n", "ßẞ",
        "\u0000nul", "中文", "a/b", "null"]


def _record(rng: random.Random, *, rows: int, db: str, table: str, pk: list[str]) -> bytes:
    cols = pk + ["name", "data", "database"]  # key names that are also top-level keys
    rng.shuffle(cols)

    def row() -> dict:
        return {c: rng.choice(KEYS + [None]) for c in cols}

    rec = {"id": rng.randint(1, 10**6), "database": db, "table": table, "pkNames": pk, "isDdl": False,
           "type": rng.choice(["INSERT", "UPDATE", "DELETE"]), "es": 1, "ts": 2,
           "sql": rng.choice(["", '"data":[{"id":"1"}]', "x"]), "sqlType": {c: 12 for c in cols},
           "mysqlType": {c: "varchar(9)" for c in cols}, "data": [row() for _ in range(rows)],
           "old": [row() for _ in range(rows)] if rng.random() < 0.5 else None, "gtid": "0-1-2",
           "logfile": "b.000001", "logpos": 4}
    text = json.dumps(rec, ensure_ascii=rng.random() < 0.5, separators=(",", ":"))
    return text.encode()[:-1]  # as capture hands lines to the store: without the closing brace


@pytest.mark.parametrize("hash_config", ["d1\\..*:$pk$", "d1.t1:name^id;d1\\..*", "d1.t1:id^id^name;d2.*:$pk$",
                                         "d2.*:$pk$", None])
@pytest.mark.parametrize("partitions", [2, 3, 7])
def test_native_and_python_place_every_record_alike(monkeypatch, hash_config, partitions):
    rng = random.Random(f"{hash_config}-{partitions}")
    router = Router("top", "dyn_a:d1\\.t2", partitions, hash_config, database_hash=partitions != 3)
    lines, ddl = [], set()
    for i in range(600):
        db, table = rng.choice([("d1", "t1"), ("d1", "t2"), ("d2", "t3"), ("d1", "T1")])
        if rng.random() < 0.05:
            ddl.add(i)
            lines.append(json.dumps({"database": db, "table": table, "isDdl": True, "type": "ALTER",
                                     "sql": "alter table x", "data": None})[:-1].encode())
            continue
        pk = rng.choice([["id"], ["id", "name"], []])
        lines.append(_record(rng, rows=rng.choice([1, 1, 1, 2, 5]), db=db, table=table, pk=pk))
    got = router.place_all(lines, ddl, 17)
    monkeypatch.setattr(routing, "_native_place", lambda: None)
    want = router.place_all(lines, ddl, 17)
    assert got == want
    assert sum(len(messages) for _, _, messages, _, _ in want) >= len(lines)
    assert {seq for *_, marks in want for seq, _ in marks} == ddl
    split = sum(len(messages) for _, _, messages, _, _ in want) > len(lines)
    assert split or partitions == 1 or hash_config != "d1\\..*:$pk$"


def test_one_partition_and_no_dynamic_topic_keeps_the_batch_order_unscanned(monkeypatch):
    router = Router("top", None, 1, "d\\..*:$pk$")
    lines = [b'{"database":"d","table":"t","pkNames":["id"],"data":[{"id":"%d"}]' % i for i in range(5)]
    lines.append(b"not json at all")  # not read: one partition, one topic
    got = router.place_all(lines, {5}, 3)
    assert got == [("top", 0, [{"value": line + b',"batchId":3,"seq":%d}' % i} for i, line in enumerate(lines)],
                    sum(len(line) + len(b',"batchId":3,"seq":0}') for line in lines), [(5, 5)])]


def _left(lines: list[bytes], partitions: int) -> tuple[list, list[int]]:
    """The native groups of ``lines`` (key hash by pkNames), and the seqs it left to Python."""
    left: list[int] = []

    def fallback(seq: int) -> tuple[str, list]:
        left.append(seq)
        return "py", [(9, b"{}")]

    return native(lines, set(), 1, partitions, True, lambda db, t: (2, None, "k"), fallback), left


def test_native_leaves_numbers_malformed_records_and_splits_to_python():
    lines = [b'{"database":"d","table":"t","pkNames":["id"],"data":[{"id":7}]',
             b'{"database":"d","table":"t","pkNames":["id"],"data":[{"id":"1"},{"id":"2"},{"id":"3"}]',
             b'{"database":"d","table":',
             b'{"database":"d","table":"t","pkNames":["id"],"data":[{"id":"1"}]']
    groups, left = _left(lines, 3)
    parts = {abs(abs(java_hash("d") ^ java_hash(k)) % 3) for k in "123"}
    assert left == ([0, 1, 2] if len(parts) > 1 else [0, 2])  # a number: Python decides (and refuses)
    assert [(topic, part, [m["value"][-8:] for m in messages]) for topic, part, messages, _, _ in groups][0] == \
        ("py", 9, [b'"seq":0}'] + ([b'"seq":1}'] if len(parts) > 1 else []) + [b'"seq":2}'])


def test_native_reads_a_record_without_its_closing_brace_and_with_one():
    line = b'{"database":"d\\u00e9","table":"t","pkNames":["id"],"data":[{"id":"\\ud83d\\ude00"}]'
    for text in (line, line + b"}"):
        groups, left = _left([text], 5)
        assert left == []
        assert [(topic, part) for topic, part, *_ in groups] == [("k", abs(abs(java_hash("dé") ^ java_hash("😀")) % 5))]
