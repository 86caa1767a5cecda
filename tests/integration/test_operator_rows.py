"""Runs that do not go through, through the real CLI against the real MariaDB source and target
(issue 37): a value larger than the target's ``max_allowed_packet`` is a row error naming the
setting, the table and the key (not four retries of "server has gone away"), it loses no row,
and its fix works when followed; with ``deadLetter: true`` the row is set aside and replayed.
Ctrl-C during a sync is one line, exit 130, nothing acked, and status/report call the run
interrupted, not ok. The report shows a failed run's whole error, never ``None``."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sluice_common import exitcodes
from tests.support.deploy import REPO
from tests.support.operator import make, sql, t_mapping

LIMIT = 64 * 1024
BIG = 200_000


@pytest.fixture
def small_packet(mariadb_target):
    """The target's max_allowed_packet at 64 KiB for new connections (restored afterwards)."""
    (before,), = sql(mariadb_target, "SELECT @@GLOBAL.max_allowed_packet")
    sql(mariadb_target, f"SET GLOBAL max_allowed_packet = {LIMIT}")
    yield
    sql(mariadb_target, f"SET GLOBAL max_allowed_packet = {before}")


def _fix(proc) -> str:
    """The SET GLOBAL statement the fix line names."""
    line = next(ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip().startswith("fix:"))
    return re.search(r"SET GLOBAL max_allowed_packet = \d+", line).group()


def test_a_value_larger_than_max_allowed_packet_is_a_row_error(tmp_path, mariadb, mariadb_target, small_packet):
    d = make(tmp_path, mariadb, mariadb_target, tables=("t",))
    d.source(f"CREATE TABLE `{d.db}`.big (id INT PRIMARY KEY, b MEDIUMTEXT)")
    d.target(f"CREATE TABLE `{d.tdb}`.big (id INT PRIMARY KEY, b MEDIUMTEXT)")
    d.add_mapping("big.yml", t_mapping(d.db, "big", "big"))
    d.source(f"INSERT INTO `{d.db}`.big VALUES (1, 'small'), (2, REPEAT('x', {BIG})), (3, REPEAT('y', 30000))")
    d.ok("capture", "--once")

    refused = d.run("run")  # a scheduled run: its summary, status and the report say what failed and why
    out = refused.stdout
    assert refused.returncode == exitcodes.FAILED and "Traceback" not in out + refused.stderr, out + refused.stderr
    for needle in (f"table {d.db}.big key {{id='2'}}", "key {id='2'} on", "SET GLOBAL max_allowed_packet = ",
                   f"more than the target's max_allowed_packet ({LIMIT} bytes)", "deadLetter: true"):
        assert needle in out, out
    assert out.count("fix:") == 1 and "retrying" not in refused.stderr and "retried by the job" not in out
    assert d.rows("big") == []  # nothing of the chunk committed, nothing acked
    status = d.ok("status").stdout
    assert "FAILED, nothing acked" in status and "max_allowed_packet" in status
    report = tmp_path / "report.html"
    d.ok("report", "--out", str(report))
    page = report.read_text()
    assert "None" not in page and "<td>failed</td>" in page  # the group's rows of a failed run
    assert "no batch was acked:" in page and "max_allowed_packet (65536 bytes)" in page  # the cause, not cut

    # the fix's second way: deadLetter sets the row aside and the others go on
    d.add_mapping("big.yml", {**t_mapping(d.db, "big", "big"), "deadLetter": True})
    proc = d.ok("sync", "--group", "g1")
    assert f"dead-lettered 1 rows of {d.db}.big (mappings/big.yml)" in proc.stdout
    assert [(i, len(b)) for i, b in d.rows("big")] == [(1, 5), (3, 30000)]
    listed = d.ok("deadletter", "list", "--group", "g1").stdout
    assert "{id='2'}" in listed and "max_allowed_packet" in listed
    # its first way: the setting raised as the fix says, the row applies (here by the replay)
    sql(mariadb_target, _fix(refused))
    proc = d.ok("deadletter", "replay", "--group", "g1")
    assert "applied 1, still failing 0" in proc.stdout
    assert [(i, len(b)) for i, b in d.rows("big")] == [(1, 5), (2, BIG), (3, 30000)]


def _interrupt(d, marker: Path, *args: str) -> subprocess.CompletedProcess:
    """Run ``sluice ARGS`` as a terminal would, pause its partition after the first committed chunk
    (the crash tests' hook), then press Ctrl-C: SIGINT to the whole process group (the CLI, the JVM,
    the Python workers)."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYSPARK_PYTHON": sys.executable,
           "SLUICE_TEST_PAUSE_AFTER_ROWS": "1", "SLUICE_TEST_PAUSE_MARKER": str(marker)}
    proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli", *args, "--config", str(d.cfg)], cwd=REPO, env=env,
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 300
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert marker.exists(), "the partition never paused"
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_ctrl_c_during_a_sync_is_one_line_and_the_run_is_not_called_ok(tmp_path, mariadb, mariadb_target):
    d = make(tmp_path, mariadb, mariadb_target, tables=("t",))
    d.source(f"USE `{d.db}`", "INSERT INTO t SELECT seq, CONCAT('v', seq) FROM seq_1_to_5000")
    d.ok("capture", "--once")

    proc = _interrupt(d, tmp_path / "run.marker", "run")
    out = proc.stdout + proc.stderr
    assert proc.returncode == exitcodes.INTERRUPTED, out[-5000:]
    for noise in ("Traceback", "reentrant", "Py4J", "KeyboardInterrupt"):
        assert noise not in out, out[-5000:]
    assert "interrupted (exit 130)" in proc.stdout and "error (run): interrupted (SIGINT/SIGTERM)" in proc.stdout
    status = d.ok("status").stdout
    assert "last run  " in status and ": INTERRUPTED, nothing acked" in status and ": ok," not in status, status
    assert "cursor 0, pending" in status
    report = tmp_path / "report.html"
    d.ok("report", "--out", str(report))
    page = report.read_text()
    assert "None" not in page and ">interrupted<" in page

    proc = _interrupt(d, tmp_path / "sync.marker", "sync", "--group", "g1")
    assert proc.returncode == exitcodes.INTERRUPTED, (proc.stdout + proc.stderr)[-5000:]
    assert "Traceback" not in proc.stderr and "Py4J" not in proc.stderr and "reentrant" not in proc.stderr
    assert [ln for ln in proc.stderr.splitlines() if ln.startswith("sluice:")] == ["sluice: interrupted"]

    d.ok("run")  # nothing was acked: the next run applies every row, none lost
    assert d.rows() == d.source_rows() and len(d.rows()) == 5000
