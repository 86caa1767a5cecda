"""A MySQL store whose GTID set is partial is never resumed by GTID (pipeline/capture/identity.py),
through the CLI on Oracle MySQL: ``capture --from FILE:POS`` starts a set that holds only what capture
reads (MySQL has no GTID state at a coordinate), so its positions are marked ``gtidPartial`` and
``source.resumeBy: gtid`` is refused by name, its fix followed; a store started at "now" holds the
server's whole executed set and is not marked. (Tagged GTIDs mark positions the same way: unit-tested
in tests/unit/test_capture_identity.py, and never written on the shared server, whose gtid_executed
python-mysql-replication, the tests' reference decoder, could then no longer parse.)"""

from __future__ import annotations

import json
import shutil

import yaml

from tests.support.operator import make


def _end(d) -> dict:
    metas = sorted((d.store / "batches").glob("*.meta.json"))
    return json.loads(metas[-1].read_text())["end"]


def test_a_from_start_on_mysql_is_never_resumed_by_gtid(tmp_path, mysql, mariadb_target):
    d = make(tmp_path, mysql, mariadb_target)  # started at "now": the server's executed set
    d.source(f"INSERT INTO `{d.db}`.t VALUES (1, 'a')")
    d.ok("capture", "--once")
    assert _end(d)["gtid"] and "gtidPartial" not in _end(d)

    logfile, pos = d.source("SHOW BINARY LOG STATUS")[0][:2]  # between transactions: a start
    d.source(f"INSERT INTO `{d.db}`.t VALUES (2, 'b')")
    shutil.rmtree(d.store)
    d.ok("capture", "--once", "--from", f"{logfile}:{pos}")
    end = _end(d)
    assert end["gtidPartial"] is True and end["gtid"], end

    raw = d.config()
    raw["source"]["resumeBy"] = "gtid"
    d.write_config(raw)
    d.source(f"INSERT INTO `{d.db}`.t VALUES (3, 'c')")
    proc = d.run("capture", "--once")
    assert proc.returncode != 0 and "has a partial GTID set: it lacks transactions before the position" \
        in proc.stderr, proc.stderr[-3000:]
    assert f"fix: set source.resumeBy: file (or auto) in {d.cfg}" in proc.stderr
    del raw["source"]["resumeBy"]  # follow it
    d.cfg.write_text(yaml.safe_dump(raw, sort_keys=False))
    d.ok("capture", "--once")
    assert _end(d)["gtidPartial"] is True  # every later position too
    d.ok("run")
    assert d.rows() == [(2, "b"), (3, "c")]  # row 1 came before the --from start


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
