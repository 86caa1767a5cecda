"""A MySQL store's GTID set is whole, or marked partial and never resumed by GTID
(pipeline/capture/identity.py), through the CLI on Oracle MySQL: ``capture --from FILE:POS`` reads the
set at the coordinate from the binlog (the file's Previous_gtids and the transactions before it), and
a set given with it must be that one; a store started at "now" holds the server's executed set; a
lost store resumes with the set its target recorded. (A set not known there -- further into a file
than the events read, or past a tagged GTID -- marks the positions ``gtidPartial`` and refuses GTID
resumes: unit-tested in tests/unit/test_capture_identity.py; tagged GTIDs are never written on the
shared server, whose gtid_executed python-mysql-replication, the tests' reference decoder, could
then no longer parse.)"""

from __future__ import annotations

import json
import shutil

from sluice_common import exitcodes
from tests.support.cli import one_message
from tests.support.operator import make


def _end(d) -> dict:
    metas = sorted((d.store / "batches").glob("*.meta.json"))
    return json.loads(metas[-1].read_text())["end"]


def _executed(d) -> str:
    return str(d.source("SELECT @@GLOBAL.gtid_executed")[0][0]).replace("\n", "")


def test_a_from_start_on_mysql_reads_the_gtid_set_there(tmp_path, mysql, mariadb_target):
    from pipeline.capture.gtidtext import canonical, intervals

    d = make(tmp_path, mysql, mariadb_target)  # started at "now": the server's executed set
    d.source(f"INSERT INTO `{d.db}`.t VALUES (1, 'a')")
    d.ok("capture", "--once")
    assert canonical(intervals(_end(d)["gtid"])) == canonical(intervals(_executed(d)))
    assert "gtidPartial" not in _end(d)

    d.source("FLUSH BINARY LOGS")  # a new file: the position is within the events read (CI's files are long)
    logfile, pos = d.source("SHOW BINARY LOG STATUS")[0][:2]  # between transactions: a start
    there = canonical(intervals(_executed(d)))
    d.source(f"INSERT INTO `{d.db}`.t VALUES (2, 'b')")
    shutil.rmtree(d.store)
    wrong = there.rsplit("-", 1)[0] + f"-{int(there.rsplit('-', 1)[1]) - 1}"  # one transaction short
    refused = d.run("capture", "--once", "--from", f"{logfile}:{pos} gtid={wrong}")
    one_message(refused, exitcodes.CONFIG, f"the GTID set at {logfile}:{pos} is {there}", "not the one given",
                f"fix: leave gtid= out, it is read from the binlog: sluice capture --config {d.cfg} --once --from "
                f"{logfile}:{pos}")
    d.ok("capture", "--once", "--from", f"{logfile}:{pos}")  # follow it
    start = json.loads((d.store / "position.json").read_text())["position"]
    assert start["gtid"] == there and "gtidPartial" not in start
    assert canonical(intervals(_end(d)["gtid"])) == canonical(intervals(_executed(d)))
    assert "gtidPartial" not in _end(d)
    d.ok("run")
    assert d.rows() == [(2, "b")]  # row 1 came before the --from start

    shutil.rmtree(d.store)  # the file's very start (its header: no transaction before it) holds that set too
    d.ok("capture", "--once", "--from", f"{logfile}:4")
    start = json.loads((d.store / "position.json").read_text())["position"]
    assert start["gtid"] == there and "gtidPartial" not in start


def test_a_lost_mysql_store_resumes_with_the_targets_gtid_set(tmp_path, mysql, mariadb_target):
    """The targets record the GTID set with each position: a lost store's refusal names it in its
    --from (MySQL cannot tell the set at a coordinate), so the resumed store is no partial one."""
    import shlex

    d = make(tmp_path, mysql, mariadb_target)
    d.source(f"INSERT INTO `{d.db}`.t VALUES (1, 'a')")
    d.ok("run")
    shutil.rmtree(d.store)
    d.source(f"INSERT INTO `{d.db}`.t VALUES (2, 'b')")
    refused = d.run("capture", "--once")
    fix = next(ln for ln in refused.stderr.splitlines() if ln.strip().startswith("fix:"))
    words = shlex.split(fix.split("resume where the targets stand: sluice ", 1)[1].split(";", 1)[0])
    assert words[:3] == ["capture", "--config", str(d.cfg)] and " gtid=" in words[-1], fix
    d.ok(*words[:1], *words[3:])  # follow it
    d.ok("run")
    assert "gtidPartial" not in _end(d) and _end(d)["gtid"]
    assert d.rows() == d.source_rows() == [(1, "a"), (2, "b")]
