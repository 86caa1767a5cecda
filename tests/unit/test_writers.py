"""The writer-session runner (pipeline/writers.py) with an in-memory writer: what it sets up before
``open`` per the adapter's capabilities, one commit per transaction, transient errors tried again on
a new writer, row errors rolled back on the same writer, every writer closed on every exit path; and
that the pipeline's apply loops drive writers only through it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from adapters.base import ApplyStats, Capabilities
from pipeline.writers import Lineage, Options, Writers
from sluice_common.errors import RowError, TargetError, TransientError

REPO = Path(__file__).resolve().parents[2]


class Plan:
    mappings = ("m0", "m1")
    mapping_target = ("t", "t")
    targets = {"t": ("fake", None)}  # noqa: RUF012 - test data


class FakeWriter:
    made: list = []
    fail: list = []  # exceptions raised by the next applies, in order

    def __init__(self, mappings):
        self.mappings, self.stats, self.log = mappings, ApplyStats(), []
        FakeWriter.made.append(self)

    def track(self, scope, generation=0, recaptures=()):
        self.log.append(("track", scope, generation, recaptures))

    def track_position(self, applied_from, part):
        self.log.append(("track_position", applied_from, part))

    def open(self):
        self.log.append("open")

    def apply(self, mapping, changes):
        self.stats.inserted["db.t"] += len(changes)
        if FakeWriter.fail:
            raise FakeWriter.fail.pop(0)
        self.log.append(("apply", mapping, tuple(changes)))

    def commit(self):
        self.log.append("commit")

    def rollback(self):
        self.log.append("rollback")

    def close(self):
        self.log.append("close")


def _writers(caps: Capabilities, **options) -> Writers:
    FakeWriter.made, FakeWriter.fail = [], []
    ws = Writers(Plan(), Options(backoff_max=0.0, **options))
    ws._make_writer = lambda kind, target, mappings: FakeWriter(mappings)
    ws._capabilities = lambda kind: caps
    return ws


def test_set_up_per_capabilities_then_one_commit_per_transaction():
    ws = _writers(Capabilities(lineage=True, positions=True), lineage=Lineage("s/g", 2, (1,)),
                  applied_from="from", part=7)
    assert ws.transaction(0, lambda w: w.apply("m0", [1, 2]) or "done") == "done"
    ws.transaction(1, lambda w: w.apply("m1", [3]))
    assert ws.close().inserted["db.t"] == 3
    (w,) = FakeWriter.made  # one writer per target, with all of its mappings
    assert w.mappings == ("m0", "m1")
    assert w.log == [("track", "s/g", 2, (1,)), ("track_position", "from", 7), "open", ("apply", "m0", (1, 2)),
                     "commit", ("apply", "m1", (3,)), "commit", "close"]


def test_no_lineage_no_position_unless_asked_and_capable():
    ws = _writers(Capabilities(lineage=True, positions=True))  # the dead-letter replay: neither asked
    ws.transaction(0, lambda w: w.apply("m0", [1]))
    ws = _writers(Capabilities(), lineage=Lineage("s/g"), applied_from="from")  # asked, not capable
    ws.transaction(0, lambda w: w.apply("m0", [1]))
    assert FakeWriter.made[0].log[0] == "open"


def test_a_transient_error_drops_the_writer_and_tries_again_on_a_new_one():
    ws = _writers(Capabilities())
    FakeWriter.fail = [TransientError("lost connection")]
    seen = []
    ws.transaction(0, lambda w: w.apply("m0", [1]), before_sleep=lambda a, e, d: seen.append((a, str(e))))
    first, second = FakeWriter.made
    assert first.log == ["open", "rollback", "close"] and second.log == ["open", ("apply", "m0", (1,)), "commit"]
    assert seen == [(1, "lost connection")] and ws.retries == 1
    assert ws.close().inserted["db.t"] == 1  # the failed try's counts are not kept


def test_transient_errors_give_up_after_the_tries_with_the_error_itself():
    ws = _writers(Capabilities(), retries=2)
    FakeWriter.fail = [TransientError("down"), TransientError("still down")]
    with pytest.raises(TransientError, match="still down"):
        ws.transaction(0, lambda w: w.apply("m0", [1]))
    assert len(FakeWriter.made) == 2 and not ws.writers


def test_a_row_error_rolls_back_and_keeps_the_writer():
    ws = _writers(Capabilities())
    FakeWriter.fail = [RowError("data too long")]
    with pytest.raises(RowError):
        ws.transaction(0, lambda w: w.apply("m0", [1, 2]))
    ws.transaction(0, lambda w: w.apply("m0", [1]))
    (w,) = FakeWriter.made
    assert w.log == ["open", "rollback", ("apply", "m0", (1,)), "commit"]
    assert ws.close().inserted["db.t"] == 1


def test_any_other_error_drops_the_writer_quietly_and_abort_closes_the_rest():
    ws = _writers(Capabilities())
    FakeWriter.fail = [TargetError("access denied")]
    with pytest.raises(TargetError, match="access denied"):
        ws.transaction(0, lambda w: w.apply("m0", [1]))
    assert FakeWriter.made[0].log == ["open", "rollback", "close"] and not ws.writers
    ws.transaction(0, lambda w: w.apply("m0", [1]))
    ws.abort()
    assert FakeWriter.made[1].log[-2:] == ["rollback", "close"] and not ws.writers


def test_hold_is_entered_around_each_try_and_the_commit_is_inside_it():
    from contextlib import contextmanager

    ws = _writers(Capabilities(), begin_each=True)
    events = []

    @contextmanager
    def hold():
        events.append("lock")
        yield "snap"
        events.append(("unlock", tuple(FakeWriter.made[-1].log)))

    FakeWriter.fail = [TransientError("restarting")]
    ws.transaction(0, lambda w, snap: w.apply("m0", [snap]), hold=hold)
    assert events[0] == "lock" and events[1] == "lock"  # the failed try left the lock by its exception
    assert events[2] == ("unlock", ("open", "open", ("apply", "m0", ("snap",)), "commit"))


#: pipeline modules that make writers: the runner, and the ones that only ask a writer (pre-flight
#: ``check`` and ``check_key_collations``, verify's ``check``, the positions a new store reads), never
#: apply through it
MAKERS_OK = {"pipeline/writers.py", "pipeline/job/group.py", "pipeline/job/collations.py", "pipeline/ops/verify.py",
             "pipeline/job/positions.py"}


def test_the_pipeline_drives_writers_only_through_the_runner():
    makers, setup = set(), set()
    for path in sorted((REPO / "pipeline").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and any(a.name == "make_writer" for a in node.names):
                makers.add(str(path.relative_to(REPO)))
            if isinstance(node, ast.Attribute) and node.attr in ("track", "track_position", "source_charsets"):
                setup.add(str(path.relative_to(REPO)))
    assert makers <= MAKERS_OK, f"writers made outside pipeline/writers.py: {sorted(makers - MAKERS_OK)}"
    assert setup <= {"pipeline/writers.py"}, f"writers set up outside pipeline/writers.py: {sorted(setup)}"
