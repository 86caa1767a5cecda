"""The dead-letter store: durable partition files, commit before ack, dedupe, replay records."""

from __future__ import annotations

import json

from pipeline.state.deadletter import COMMITTED, DeadLetterStore, content_id, write_part


def _entry(key: str, batch: int, seq: int, row: int = 0, kind: str = "INSERT", mapping: str = "m.yml",
           table: str = "db.t", error: str = "data too long") -> dict:
    return {"cid": content_id(mapping, table, key, kind, (batch, seq, row)), "mapping": mapping, "table": table,
            "key": key, "kind": kind, "batchId": batch, "seq": seq, "row": row, "error": error,
            "change": {"kind": kind, "database": "db", "table": "t", "data": {}, "old": None, "pkNames": [],
                       "mysqlType": {}}}


def test_round_is_live_only_after_commit_and_attempts_dedupe(tmp_path):
    dead = DeadLetterStore(tmp_path, "g1")
    rnd = dead.new_round(3, 5)
    a, b = _entry("id='1'", 3, 0), _entry("id='2'", 4, 1)
    write_part(rnd, "s000-p00001-a0.0.jsonl", [a, b])
    write_part(rnd, "s000-p00001-a0.1.jsonl", [a, b])  # a retried task wrote the same rows again
    assert dead.entries() == []  # not committed: the sync did not ack (yet)
    assert DeadLetterStore.round_entries(rnd)[0]["cid"] == a["cid"]
    counts = dead.commit_round(rnd)
    assert counts == {"m.yml": {"db.t": 2}}
    assert json.loads((rnd / COMMITTED).read_text())["counts"] == counts
    live = dead.entries()
    assert [e["key"] for e in live] == ["id='1'", "id='2'"]
    assert dead.blocked() == {("m.yml", "db.t", "id='1'"), ("m.yml", "db.t", "id='2'")}
    assert dead.summary()["live"] == {"m.yml": {"db.t": 2}}


def test_uncommitted_rounds_are_discarded(tmp_path):
    dead = DeadLetterStore(tmp_path, "g1")
    rnd = dead.new_round(1, 1)
    write_part(rnd, "s000-p00000-a0.0.jsonl", [_entry("id='1'", 1, 0)])
    assert dead.summary()["uncommitted_rounds"] == [rnd.name]
    assert dead.discard_uncommitted() == [rnd]
    assert not rnd.exists()
    assert dead.commit_round(dead.new_round(2, 2)) == {}  # nobody wrote: nothing to commit


def test_same_change_from_two_rounds_counts_once_in_source_order(tmp_path):
    dead = DeadLetterStore(tmp_path, "g1")
    r1, r2 = dead.new_round(1, 2), dead.new_round(1, 2)  # a re-run after a crash between commit and ack
    late, early = _entry("id='1'", 2, 0, kind="UPDATE"), _entry("id='1'", 1, 5)
    delete, insert = _entry("id='9'", 1, 7, kind="DELETE"), _entry("id='10'", 1, 7)
    write_part(r1, "s000-p00000-a0.0.jsonl", [late, early])
    write_part(r2, "s000-p00000-a0.0.jsonl", [insert, delete, early])
    dead.commit_round(r1)
    dead.commit_round(r2)
    live = dead.entries()
    assert [(e["batchId"], e["seq"], e["kind"]) for e in live] == [(1, 5, "INSERT"), (1, 7, "DELETE"),
                                                                    (1, 7, "INSERT"), (2, 0, "UPDATE")]
    assert len(live[0]["ids"]) == 2  # both copies: a replay resolves them together


def test_replay_records_resolve_and_keep_new_errors_then_compact(tmp_path):
    dead = DeadLetterStore(tmp_path, "g1")
    rnd = dead.new_round(1, 1)
    write_part(rnd, "s000-p00000-a0.0.jsonl", [_entry("id='1'", 1, 0), _entry("id='2'", 1, 1)])
    dead.commit_round(rnd)
    first, second = dead.entries()
    dead.record_replay(first["ids"], {second["ids"][0]: "still too long"})
    live = dead.entries()
    assert [(e["key"], e["error"]) for e in live] == [("id='2'", "still too long")]
    assert dead.compact() == 0  # one row is left in the round
    dead.record_replay(live[0]["ids"], {})
    assert dead.entries() == []
    assert dead.compact() == 1
    assert not rnd.exists()
    assert list((dead.dir / "replays").glob("*.json")) == []


def test_a_change_dead_lettered_again_after_a_replay_stays_live(tmp_path):
    dead = DeadLetterStore(tmp_path, "g1")
    r1 = dead.new_round(1, 1)
    write_part(r1, "s000-p00000-a0.0.jsonl", [_entry("id='1'", 1, 0)])
    dead.commit_round(r1)
    dead.record_replay(dead.entries()[0]["ids"], {})
    r2 = dead.new_round(1, 1)  # the batch was not acked and the row failed again
    write_part(r2, "s000-p00000-a0.0.jsonl", [_entry("id='1'", 1, 0)])
    dead.commit_round(r2)
    live = dead.entries()
    assert [e["ids"] for e in live] == [[f"{r2.name}/{live[0]['cid']}"]]
