"""Executor-side dead-lettering (``ChunkRunner.flush``) with an in-memory writer: good rows
commit in order, each bad row is isolated, later changes of its key wait behind it, and errors
that are not caused by a row never go to the dead-letter store."""

from __future__ import annotations

import json

import pytest

from adapters.base import ApplyStats, Capabilities, Change
from pipeline.job.chunks import ChunkRunner
from pipeline.job.partition import JobContext
from pipeline.mapping import parse_mapping_text
from sluice_common.errors import RowError, TargetError, TransientError

MAPPING = """{dl}dbMapping:
  database: db
  table: t
  targetTable: t
  targetPk: {{id: }}
  mapAll: true
"""


class FakeWriter:
    """Rows with v == 'bad' fail like MySQL's 'data too long'; ``fail_with`` fails every chunk."""

    committed: list = []
    fail_with: Exception | None = None
    transient_left = 0

    def __init__(self, target, mappings):
        self.stats, self.pending = ApplyStats(), []

    def open(self):
        pass

    def apply(self, mapping, changes):
        if FakeWriter.transient_left:
            FakeWriter.transient_left -= 1
            raise TransientError("lost connection")
        if FakeWriter.fail_with is not None:
            raise FakeWriter.fail_with
        for c in changes:
            if c.data.get("v") == "bad":
                raise RowError(f"data too long for id={c.data['id']}")
            self.pending.append((c.kind, c.data["id"], c.data["v"]))
            self.stats.inserted["db.t"] += 1

    def commit(self):
        FakeWriter.committed += self.pending
        self.pending = []

    def rollback(self):
        self.pending = []

    def close(self):
        pass


def _run(tmp_path, dead_letter: bool, blocked: frozenset = frozenset()) -> ChunkRunner:
    FakeWriter.committed, FakeWriter.fail_with, FakeWriter.transient_left = [], None, 0
    m = parse_mapping_text(MAPPING.format(dl="deadLetter: true\n" if dead_letter else ""), "m.yml")
    ctx = JobContext((m,), ("rdb:t",), {"rdb:t": ("rdb", None)}, dead_letter_dir=str(tmp_path / "round"),
                     blocked=blocked, backoff_max=0.0)
    run = ChunkRunner(ctx, 3)
    run.session._make_writer = lambda kind, target, mappings: FakeWriter(target, mappings)
    run.session._capabilities = lambda kind: Capabilities()  # the fake tracks no lineage or positions
    return run


def _ch(i: int, v: str, seq: int, kind: str = "INSERT") -> Change:
    return Change(kind, "db", "t", {"id": str(i), "v": v}, pk_names=("id",), seq=(1, seq, 0))


def test_bad_rows_are_isolated_and_later_changes_of_their_key_wait(tmp_path):
    run = _run(tmp_path, True)
    chunk = [_ch(1, "a", 0), _ch(2, "bad", 1), _ch(3, "c", 2), _ch(2, "fine-now", 3, "UPDATE"),
             _ch(4, "bad", 4), _ch(5, "e", 5), _ch(6, "f", 6)]
    run.flush(0, chunk)
    assert FakeWriter.committed == [("INSERT", "1", "a"), ("INSERT", "3", "c"), ("INSERT", "5", "e"),
                                    ("INSERT", "6", "f")]
    assert [(e["key"], e["seq"], e["blocked"]) for e in run.dead.entries] == [
        ("id='2'", 1, False), ("id='2'", 3, True), ("id='4'", 4, False)]
    assert "data too long for id=2" in run.dead.entries[0]["error"]
    run.flush(0, [_ch(2, "later", 7, "UPDATE"), _ch(7, "g", 8)])  # the next chunk: key 2 still waits
    assert FakeWriter.committed[-1] == ("INSERT", "7", "g")
    run.close()
    assert run.stats.dead_lettered == {"db.t": 4}
    assert run.stats.inserted == {"db.t": 5}  # the rolled-back attempts are not counted
    lines = (tmp_path / "round" / "s000-p00003-a0.0.jsonl").read_text().splitlines()
    assert [json.loads(x)["seq"] for x in lines] == [1, 3, 4, 7]
    assert json.loads(lines[0])["change"]["data"] == {"id": "2", "v": "bad"}


def test_keys_dead_lettered_before_wait_too(tmp_path):
    run = _run(tmp_path, True, blocked=frozenset({("m.yml", "db.t", "id='1'")}))
    run.flush(0, [_ch(1, "x", 0, "UPDATE"), _ch(2, "y", 1)])
    assert FakeWriter.committed == [("INSERT", "2", "y")]
    assert [e["blocked"] for e in run.dead.entries] == [True]


def test_off_by_default_a_row_error_fails_the_partition(tmp_path):
    run = _run(tmp_path, False)
    with pytest.raises(RowError):
        run.flush(0, [_ch(1, "a", 0), _ch(2, "bad", 1)])
    assert FakeWriter.committed == [] and run.dead is None


@pytest.mark.parametrize("error", [TargetError("target table db.t does not exist"),
                                   TargetError("cannot connect: access denied")])
def test_errors_not_caused_by_a_row_are_never_dead_lettered(tmp_path, error):
    run = _run(tmp_path, True)
    FakeWriter.fail_with = error
    with pytest.raises(TargetError):
        run.flush(0, [_ch(1, "a", 0)])
    assert run.dead.entries == []


def test_transient_errors_are_retried_not_dead_lettered(tmp_path):
    run = _run(tmp_path, True)
    FakeWriter.transient_left = 2
    run.flush(0, [_ch(1, "a", 0), _ch(2, "bad", 1)])
    assert FakeWriter.committed == [("INSERT", "1", "a")]
    assert [e["key"] for e in run.dead.entries] == ["id='2'"]
