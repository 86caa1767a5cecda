"""A scan task's read of the round's batch files (pipeline/job/scan.py) on bad input; what it gives
against the JVM's plan is tests/integration/test_job_plan.py's."""

from __future__ import annotations

import json

import pytest

from pipeline.job.routing import Route
from pipeline.job.scan import ScanPlan, own_changes
from sluice_common.errors import SluiceError


def test_a_line_that_is_no_json_names_the_file_and_line(tmp_path):
    """The driver verified the file's checksum; a file changed since is refused by name, not skipped."""
    good = {"database": "db", "table": "t", "type": "INSERT", "pkNames": ["id"], "data": [{"id": "1"}],
            "batchId": 1, "seq": 0}
    path = tmp_path / "000000000001.jsonl"
    path.write_text(json.dumps(good) + "\n" + '{"database": "db", "tab\n')
    plan = ScanPlan((str(path),), (Route(0, "db", "t", None),), 2, frozenset())
    with pytest.raises(SluiceError) as e:
        own_changes(plan, 0)
    assert f"batch file {path}, line 2: not a JSON line" in str(e.value)
    assert "fix: run `sluice store verify" in str(e.value)


def test_the_round_frame_is_made_only_when_read_with_its_steps_in_order():
    """A round whose segments all scan builds no DataFrame (nor verifies its files twice); one that
    is read gets the waived-lines filter and the persist in the order the round asked for them,
    also when a step comes after it was made (the barrier scan of an older store reads it first)."""
    from pipeline.job.scan import RoundFrame

    made, log = [], []

    class Frame:
        def __init__(self, name):
            self.name = name

        def where(self, cond):
            log.append(("where", self.name, cond))
            return Frame(f"{self.name}+where")

        def persist(self):
            log.append(("persist", self.name))
            return Frame(f"{self.name}+persist")

        def unpersist(self):
            log.append(("unpersist", self.name))

    def make():
        made.append(1)
        return Frame("df")

    unused = RoundFrame(make)
    unused.where("c")
    unused.persist()
    unused.unpersist()
    assert made == [] and log == []
    late = RoundFrame(make)
    late.persist()
    assert late.frame().name == "df+persist"
    late.where("c")
    assert late.frame().name == "df+persist+where" and made == [1]
    late.unpersist()
    assert log == [("persist", "df"), ("where", "df+persist", "c"), ("unpersist", "df+persist+where")]
