"""Under ``CI=true`` a missing prerequisite fails the run: no test module may skip on its own.

Every skip goes through :func:`tests.support.prereq.missing` (tools, built extensions, privileges)
or ``tests/conftest.py`` (services), which fail under CI. The only skips left are cases that do
not apply to one parameter (listed here with their reason); a new ``pytest.skip``, ``skipif`` or
``importorskip`` anywhere else fails this test.
"""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
SKIP = re.compile(r"pytest\.skip\(|mark\.skipif|importorskip\(|mark\.skip\b")
#: (file, the skip's text): not a prerequisite, a case that does not apply
NOT_APPLICABLE = {
    ("integration/test_etl_upsert.py", 'pytest.skip("SQLite keeps every type as given'),
}
#: the two places that decide between fail (CI) and skip
GATES = {"support/prereq.py", "conftest.py"}


def test_every_skip_fails_under_ci():
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        rel = path.relative_to(TESTS).as_posix()
        if rel in GATES or rel == "unit/test_no_silent_skips.py":
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if SKIP.search(line) and not any(rel == f and text in line for f, text in NOT_APPLICABLE):
                found.append(f"tests/{rel}:{n}: {line.strip()}")
    assert not found, ("skips that pass CI silently; use tests.support.prereq.missing():\n"
                       + "\n".join(found))


def test_the_gates_fail_under_ci():
    assert "pytest.fail" in (TESTS / "support" / "prereq.py").read_text()
    assert "pytest.fail(msg" in (TESTS / "conftest.py").read_text()
