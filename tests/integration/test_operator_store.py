"""A lost batch store does not restart capture at "now" (issue 37), through the real CLI against the
real MariaDB source and target: the target records, with the rows it commits, where its round
started in the source's binlog (``_sluice_applied``; ``sluice bootstrap`` records its snapshot), and
a store without a position refuses to start at the current position while a target holds such a
record, naming it and how to resume; followed, no row is lost. A store started at the wrong place
starts again (`sluice store restart`) while no group has acked a batch of it."""

from __future__ import annotations

import re
import shutil

import yaml

from sluice_common import exitcodes
from tests.support.cli import cli, one_message
from tests.support.operator import make, t_mapping


def _resume(d, proc) -> list[str]:
    """Follow the refusal's fix: the arguments of its ``sluice capture ... --from FILE:POS``."""
    fix = next(ln for ln in proc.stderr.splitlines() if ln.strip().startswith("fix:"))
    cmd = re.search(r"resume where the targets stand: sluice (capture --config \S+ --once --from \S+);", fix)
    assert cmd, fix
    words = cmd.group(1).split()
    assert words[2] == str(d.cfg)
    return [words[0], *words[3:]]


def test_a_lost_store_resumes_where_the_targets_stand(tmp_path, mariadb, mariadb_target):
    d = make(tmp_path, mariadb, mariadb_target)
    d.source(f"INSERT INTO `{d.db}`.t VALUES (1, 'a'), (2, 'b')")
    d.ok("bootstrap", "--force")  # a full load; the snapshot's position is recorded in the target
    assert d.rows() == [(1, "a"), (2, "b")]
    assert d.target(f"SELECT grp, part FROM `{d.tdb}`._sluice_applied") == [("g1", -1)]

    shutil.rmtree(d.store)  # a cleanup script; a new disk; a store.path that points elsewhere
    d.source(f"INSERT INTO `{d.db}`.t VALUES (3, 'c')")  # written while there is no store
    proc = d.run("run")
    assert proc.returncode == exitcodes.CONFIG and "Traceback" not in proc.stdout + proc.stderr
    assert "error (capture): " in proc.stdout and "the batch store has no position" in proc.stdout
    refused = d.run("capture", "--once")
    line = one_message(refused, exitcodes.CONFIG, f"group g1's target mysql+pymysql://root@{mariadb_target['host']}",
                       f"holds changes of source {d.db} up to mysql-bin.", "would skip every change made since",
                       "fix: if the store moved, fix store.path", " --from now", "sluice bootstrap --config")
    assert str(d.store) in line
    d.ok(*_resume(d, refused))  # follow it
    d.source(f"INSERT INTO `{d.db}`.t VALUES (4, 'd')", f"UPDATE `{d.db}`.t SET b = 'A' WHERE id = 1")
    d.ok("run")
    assert d.rows() == d.source_rows() == [(1, "A"), (2, "b"), (3, "c"), (4, "d")]
    assert ("g1", 0) in d.target(f"SELECT grp, part FROM `{d.tdb}`._sluice_applied")  # the sync's partition

    refused = d.run("capture", "--once", "--from", "now")  # --from only starts a store without a position
    one_message(refused, exitcodes.CONFIG, "--from starts a store that has no position", "leave --from out")

    shutil.rmtree(d.store)  # lost again, after syncs: their rounds' records say where to resume
    d.source(f"DELETE FROM `{d.db}`.t WHERE id = 2", f"INSERT INTO `{d.db}`.t VALUES (5, 'e')")
    refused = d.run("capture", "--once")
    one_message(refused, exitcodes.CONFIG, "the batch store has no position", "--from mysql-bin.")
    d.ok(*_resume(d, refused))
    d.ok("run")
    assert d.rows() == d.source_rows() == [(1, "A"), (3, "c"), (4, "d"), (5, "e")]


def test_a_new_deployment_starts_at_now_and_from_now_is_the_operators_word(tmp_path, mariadb, mariadb_target):
    d = make(tmp_path, mariadb, mariadb_target)  # no target was ever applied to: capture started at "now"
    assert (d.store / "position.json").is_file()
    d.source(f"INSERT INTO `{d.db}`.t VALUES (1, 'a')")
    d.target(f"CREATE TABLE `{d.tdb}`._sluice_applied (source VARCHAR(190) NOT NULL, grp VARCHAR(190) NOT NULL, "
             "part INT NOT NULL, position VARCHAR(2000) NOT NULL, server VARCHAR(190) NOT NULL, store_id "
             "VARCHAR(190) NOT NULL, batch_id BIGINT NOT NULL, updated_at VARCHAR(190) NOT NULL, "
             "PRIMARY KEY (source, grp, part))",
             f"INSERT INTO `{d.tdb}`._sluice_applied VALUES ('{d.db}', 'g1', 0, "
             "'{\"logfile\": \"mysql-bin.000001\", \"logpos\": 4}', 'h:1', 'old', 1, '2026-01-01T00:00:00+00:00')")
    shutil.rmtree(d.store)
    refused = d.run("capture", "--once")
    one_message(refused, exitcodes.CONFIG, "up to mysql-bin.000001:4")
    proc = d.ok("capture", "--once", "--from", "now")  # the operator means it: the targets miss row 1
    assert "starts at the server's current position (--from now)" in proc.stderr
    assert d.ok("capture", "--once").returncode == 0  # resumes where the store stands now


def test_from_inside_a_transaction_or_off_an_event_is_refused_and_the_fix_works(tmp_path, mariadb, mariadb_target):
    """``--from`` inside a transaction would capture only its rest (a new user's probe: two of its
    three updates applied, exit 0), and an offset that is no event's start left a store that no
    suggested fix could start: both are refused before the start is recorded, the first naming the
    transaction's start, which works when followed."""
    d = make(tmp_path, mariadb, mariadb_target)
    d.source(f"INSERT INTO `{d.db}`.t VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    d.ok("run")
    d.source("FLUSH BINARY LOGS")  # a new file: the refusal finds the transaction's start within the events it reads
    logfile = d.source("SHOW MASTER STATUS")[0][0]
    d.source("BEGIN", f"UPDATE `{d.db}`.t SET b = 'x' WHERE id = 1", f"UPDATE `{d.db}`.t SET b = 'y' WHERE id = 2",
             f"UPDATE `{d.db}`.t SET b = 'z' WHERE id = 3", "COMMIT")
    events = [e for e in d.source(f"SHOW BINLOG EVENTS IN '{logfile}'") if e[2] == "Table_map" and d.db in e[5]]
    inside = events[-2][1]  # the second update's table map
    shutil.rmtree(d.store)

    refused = d.run("capture", "--once", "--from", f"{logfile}:{inside}")
    one_message(refused, exitcodes.CONFIG,
                       f"--from {logfile}:{inside} is inside a transaction (the event there is Table_map)",
                       "nothing was captured or recorded", "fix: start where a transaction starts: --from ")
    assert not (d.store / "position.json").exists()
    off = d.run("capture", "--once", "--from", f"{logfile}:{inside + 1}")
    one_message(off, exitcodes.CONFIG, "the source reads no event there", "nothing was captured or recorded")
    assert not (d.store / "position.json").exists()

    start = re.search(r"--from (\S+) \(the start of that transaction\)", refused.stderr).group(1)
    d.ok("capture", "--once", "--from", start)  # follow it
    d.ok("sync", "--group", "g1")
    assert d.rows() == d.source_rows() == [(1, "x"), (2, "y"), (3, "z")]
    # moving a cursor forward counts batches as applied that were not: said, with the way back
    d.source(f"UPDATE `{d.db}`.t SET b = 'w' WHERE id = 1")
    d.ok("capture", "--once")
    newest = max(int(p.stem) for p in (d.store / "batches").glob("*.jsonl"))
    ahead = d.ok("store", "set-cursor", "--group", "g1", "--to", str(newest))
    assert "now count as applied, but were not" in ahead.stderr and "(1 rows)" in ahead.stderr, ahead.stderr
    back = re.search(r"fix: to apply them after all: sluice (store set-cursor --config \S+ --group g1 --to \d+)",
                     ahead.stderr).group(1).split()
    d.ok(*[w for w in back if w not in ("--config", str(d.cfg))])
    d.ok("sync", "--group", "g1")
    assert d.rows() == d.source_rows() == [(1, "w"), (2, "y"), (3, "z")]


def test_a_second_deployment_sharing_the_store_cannot_narrow_its_filter(tmp_path, mariadb, mariadb_target):
    """Two configs with the same store.path and source.name share the stored position: one capturing
    with a filter that leaves out the other's table would move it past that table's changes (a new
    user's probe: the other deployment's update never arrived, exit 0 everywhere). Refused, naming the
    table and the filter the store recorded; `store set-filter` is the operator's word for a narrowing
    that is meant."""
    d = make(tmp_path, mariadb, mariadb_target)
    d.source(f"INSERT INTO `{d.db}`.t VALUES (1, 'a')")
    d.ok("run")
    other = d.config()
    other["source"]["filter"] = {"include": rf"{d.db}\.u"}
    other["store"]["path"] = str(tmp_path / "store")
    other["groups"] = [{**other["groups"][0], "groupId": "gb", "mappings": ["mappings/u.yml"]}]
    (tmp_path / "b" / "mappings").mkdir(parents=True)
    (tmp_path / "b" / "mappings" / "u.yml").write_text(yaml.safe_dump(t_mapping(d.db, "u", "u")))
    cfg_b = tmp_path / "b" / "sluice.yml"
    cfg_b.write_text(yaml.safe_dump(other, sort_keys=False))

    d.source(f"UPDATE `{d.db}`.t SET b = 'z' WHERE id = 1", f"INSERT INTO `{d.db}`.u VALUES (1, 'x')")
    refused = cli("capture", "--once", "--config", str(cfg_b))
    one_message(refused, exitcodes.CONFIG, f"source.filter: leaves out {d.db}.t, which this store's captures so far "
                f"took (filter include {d.db}\\..*, recorded by {d.cfg})", "nothing was captured",
                "give this one its own store.path", f"sluice store set-filter --config {cfg_b}")
    d.ok("run")  # the first deployment's update is still there to capture
    assert d.rows() == d.source_rows() == [(1, "z")]

    assert cli("store", "set-filter", "--config", str(cfg_b)).returncode == 0  # meant: recorded ...
    assert cli("capture", "--once", "--config", str(cfg_b)).returncode == 0  # ... and taken


def test_a_store_started_at_the_wrong_place_starts_again_before_any_ack(tmp_path, mariadb, mariadb_target):
    """A --from past a change the targets need: `sluice store restart --from` records the new start,
    checked as --from is (a transaction's start), and moves the group past the stored batches;
    followed, no row is lost. Once a group acked a batch, or a bootstrap loaded the targets, restart is
    refused, naming it and the reload."""
    d = make(tmp_path, mariadb, mariadb_target)
    right = d.source("SHOW MASTER STATUS")[0][:2]
    d.source(f"INSERT INTO `{d.db}`.t VALUES (1, 'a')")
    wrong = d.source("SHOW MASTER STATUS")[0][:2]
    d.source(f"INSERT INTO `{d.db}`.t VALUES (2, 'b')")
    shutil.rmtree(d.store)
    d.ok("capture", "--once", "--from", f"{wrong[0]}:{wrong[1]}")  # one transaction too late
    refused = d.run("capture", "--once", "--from", f"{right[0]}:{right[1]}")
    one_message(refused, exitcodes.CONFIG, "--from starts a store that has no position")

    bad = d.run("store", "restart", "--from", f"{right[0]}:{int(right[1]) + 1}")  # not an event's start
    one_message(bad, exitcodes.CONFIG, "the source reads no event there")
    proc = d.ok("store", "restart", "--from", f"{right[0]}:{right[1]}")
    assert "capture starts at " in proc.stdout and f'"logpos": {right[1]}' in proc.stdout
    assert "cursors past the stored batches: g1 0 -> 1" in proc.stdout
    d.ok("capture", "--once")
    again = d.ok("store", "restart", "--from", f"{right[0]}:{right[1]}")  # again, before any sync: still free
    assert "cursors past the stored batches: g1 1 -> 2" in again.stdout
    d.ok("capture", "--once")
    d.ok("run")
    assert d.rows() == d.source_rows() == [(1, "a"), (2, "b")]

    again = d.run("store", "restart", "--from", "now")
    one_message(again, exitcodes.CONFIG, "group(s) g1 (cursor ", "applied batches of this store",
                f"fix: to load the targets afresh from a new snapshot: sluice bootstrap --config {d.cfg} --force")
    d.source(f"INSERT INTO `{d.db}`.t VALUES (3, 'c')")
    d.ok("bootstrap", "--force")  # the fix, as the hint gives it: the targets hold the snapshot, cursor 0
    assert ("g1", -1) in d.target(f"SELECT grp, part FROM `{d.tdb}`._sluice_applied")  # the snapshot's record
    d.ok("run")
    assert d.rows() == d.source_rows() == [(1, "a"), (2, "b"), (3, "c")]
    # a start elsewhere now skips or repeats changes since the snapshot
    one_message(d.run("store", "restart", "--from", "now"), exitcodes.CONFIG,
                "group g1's target ", "holds changes of this store up to ", "sluice bootstrap --config")
    d.target(f"DELETE FROM `{d.tdb}`._sluice_applied")  # as targets that record nothing (ES, HBase)
    one_message(d.run("store", "restart", "--from", "now"), exitcodes.CONFIG,
                "sluice bootstrap loaded the targets at the store's start", "sluice bootstrap --config")
