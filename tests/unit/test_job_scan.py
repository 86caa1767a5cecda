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
