"""Rows a target cannot take, through the real CLI against the real MariaDB source and target
(issue 37): a value larger than the target's ``max_allowed_packet`` is a row error naming the
setting, the table and the key (not four retries of "server has gone away"), it loses no row,
and its fix works when followed; with ``deadLetter: true`` the row is set aside and replayed."""

from __future__ import annotations

import re

import pytest

from pipeline import exitcodes
from tests.support.cli import one_message
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
    line = next(ln for ln in proc.stderr.splitlines() if ln.strip().startswith("fix:"))
    return re.search(r"SET GLOBAL max_allowed_packet = \d+", line).group()


def test_a_value_larger_than_max_allowed_packet_is_a_row_error(tmp_path, mariadb, mariadb_target, small_packet):
    d = make(tmp_path, mariadb, mariadb_target, tables=("t",))
    d.source(f"CREATE TABLE `{d.db}`.big (id INT PRIMARY KEY, b MEDIUMTEXT)")
    d.target(f"CREATE TABLE `{d.tdb}`.big (id INT PRIMARY KEY, b MEDIUMTEXT)")
    d.add_mapping("big.yml", t_mapping(d.db, "big", "big"))
    d.source(f"INSERT INTO `{d.db}`.big VALUES (1, 'small'), (2, REPEAT('x', {BIG})), (3, REPEAT('y', 30000))")
    d.ok("capture", "--once")

    refused = d.run("sync", "--group", "g1")
    one_message(refused, exitcodes.FAILED, f"table {d.db}.big key {{id='2'}}", "key {id='2'} on",
                f"more than the target's max_allowed_packet ({LIMIT} bytes)", "SET GLOBAL max_allowed_packet = ",
                "deadLetter: true")
    assert "retrying" not in refused.stderr and "retried by the job" not in refused.stderr
    assert d.rows("big") == []  # nothing of the chunk committed, nothing acked

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
