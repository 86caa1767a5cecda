"""Fix lines that could not be followed, followed now, through the real CLI against the real
MariaDB source and target (issue 37): ``set onNewColumn: ignore`` named a key the loader refused,
and after a dropped mirror ``targetDb`` the fix ``CREATE DATABASE ...; mirrorDb then replays the
tables' DDL`` led to ``target table ... does not exist`` (the tables' DDL is history)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time

import pytest

from sluice_common import exitcodes
from tests.support.cli import one_message
from tests.support.operator import make, sql


def _fix(proc) -> str:
    line = next(ln for ln in proc.stderr.splitlines() if ln.strip().startswith("fix:"))
    return line.split("fix:", 1)[1].strip()


def test_a_new_source_column_names_a_key_the_mapping_takes(tmp_path, mariadb, mariadb_target):
    d = make(tmp_path, mariadb, mariadb_target)
    d.source(f"ALTER TABLE `{d.db}`.t ADD COLUMN c INT", f"INSERT INTO `{d.db}`.t VALUES (1, 'a', 7)")
    d.ok("capture", "--once")

    refused = d.run("sync", "--group", "g1")
    one_message(refused, exitcodes.FAILED, f"mappings/t.yml: source column c of {d.db}.t is not in target table t",
                "ALTER TABLE t ADD COLUMN c", "dbMapping.onNewColumn: ignore in mappings/t.yml")
    assert d.rows() == []
    assert "set dbMapping.onNewColumn: ignore" in _fix(refused)
    d.edit_mapping(onNewColumn="ignore")  # follow the fix
    d.ok("sync", "--group", "g1")
    assert d.rows() == [(1, "a")]


def test_a_dropped_mirror_database_is_brought_back_as_the_fix_says(tmp_path, mariadb, mariadb_target):
    d = make(tmp_path, mariadb, mariadb_target)
    d.add_mapping("t.yml", {"dbMapping": {"mirrorDb": True, "database": d.db, "targetDb": d.tdb}})
    raw = d.config()  # the target's URL names no database: the mapping's targetDb is where it writes
    props = raw["groups"][0]["outerAdapters"][0]["properties"]
    props["jdbc.url"] = props["jdbc.url"].rsplit("/", 1)[0] + "/"
    d.write_config(raw)
    d.source(f"INSERT INTO `{d.db}`.t VALUES (1, 'a'), (2, 'b')", f"INSERT INTO `{d.db}`.u VALUES (1, 'x')")
    d.ok("capture", "--once")
    d.target(f"DROP DATABASE `{d.tdb}`")  # a cleanup script, a new target server
    d.source(f"UPDATE `{d.db}`.t SET b = 'c' WHERE id = 2", f"INSERT INTO `{d.db}`.u VALUES (2, 'y')")
    d.ok("capture", "--once")

    refused = d.run("sync", "--group", "g1")
    one_message(refused, exitcodes.CONFIG, f"mappings/t.yml: dbMapping.targetDb: target database {d.tdb} does not "
                "exist on", f"fix: CREATE DATABASE `{d.tdb}` on", "mysqldump --no-data",
                f"sluice etl --config {d.cfg} --group g1 --mapping mappings/t.yml")
    fix = _fix(refused)  # follow it: the database, the tables' definitions, then the rows
    sql(mariadb_target, fix.split(" on ", 1)[0])
    dump = re.search(r"(mysqldump .*?) \(give each", fix).group(1)
    subprocess.run(dump, shell=True, check=True, env={**os.environ, "MYSQL_PWD": mariadb["password"]},  # noqa: S602
                   capture_output=True)
    etl = shlex.split(fix.split("then load their rows: ", 1)[1])
    d.ok(*[a for a in etl[1:] if a not in ("--config", str(d.cfg))])
    d.ok("sync", "--group", "g1")
    for t in ("t", "u"):
        assert d.rows(t) == d.source_rows(t)
    assert d.rows("t") == [(1, "a"), (2, "c")] and d.rows("u") == [(1, "x"), (2, "y")]


def _sync_after(d, *stmts: str):
    """Rows 1 and 2 applied; then ``stmts`` on the source, captured; the sync that meets them."""
    d.source(f"INSERT INTO `{d.db}`.t VALUES (1, 'a'), (2, 'b')")
    d.ok("run")
    d.source(*stmts)
    d.ok("capture", "--once")
    return d.run("sync", "--group", "g1")


def _follow_tables_fix(d, fix: str, password: str) -> None:
    """Run a missing-tables fix as given: the mysqldump pipe, then the repair it names."""
    dump = re.search(r"(mysqldump .*?) \(give each", fix).group(1)
    subprocess.run(dump, shell=True, check=True, env={**os.environ, "MYSQL_PWD": password},  # noqa: S602
                   capture_output=True)
    repair = shlex.split(re.search(r"load the rows: (sluice repair .*?); then sync again", fix).group(1))
    d.ok(*[a for a in repair[1:] if a not in ("--config", str(d.cfg))])


def test_a_mirror_into_a_database_made_by_hand_names_the_tables_it_lacks(tmp_path, mariadb, mariadb_target,
                                                                        monkeypatch):
    """A mirror pointed at a new target database holding some of the source's tables by hand (a new
    user's probe: the tables with changes failed one by one with "create it", and nothing named the
    others, whose rows were never there). A change of a missing table is refused naming that table,
    not the last row read; a repair of it says it cannot make a table; the pre-flight names every
    table the target lacks that was made before the newest stored event (by more than a margin: a
    minute, none here), not one a pending CREATE TABLE makes; each fix, followed, leaves every table
    equal to the source."""
    d = make(tmp_path, mariadb, mariadb_target, tables=("t", "u", "v"))
    time.sleep(1.1)  # the changes below come a second after the tables were made (CREATE_TIME has seconds)
    new = f"{d.tdb}n"
    d.add_mapping("t.yml", {"dbMapping": {"mirrorDb": True, "database": d.db, "targetDb": new}})
    d.target(f"CREATE DATABASE `{new}`", f"CREATE TABLE `{new}`.t (id INT PRIMARY KEY, b VARCHAR(40))")
    d.source(f"INSERT INTO `{d.db}`.t VALUES (1, 'a')", f"INSERT INTO `{d.db}`.u VALUES (1, 'x'), (2, 'y')",
             f"CREATE TABLE `{d.db}`.w (id INT PRIMARY KEY)", f"INSERT INTO `{d.db}`.w VALUES (5)")
    d.ok("capture", "--once")

    refused = d.run("sync", "--group", "g1")  # u is new on the source: a change of it is where it fails
    one_message(refused, exitcodes.FAILED, f"table {d.db}.u: target table {new}.u does not exist",
                f"mysqldump --no-data --skip-triggers --skip-add-drop-table -h {mariadb['host']}", f"{d.db} u | mysql",
                f"--table {d.db}.u; then sync again")
    unmade = d.run("repair", "--group", "g1", "--table", f"{d.db}.v")
    one_message(unmade, exitcodes.FAILED, f"target table {new}.v does not exist on", "cannot make one",
                f"--table {d.db}.v; then sync again")

    monkeypatch.setenv("SLUICE_TEST_MIRROR_MARGIN_SECONDS", "0")  # made before the newest stored event: asked
    refused = d.run("sync", "--group", "g1")
    one_message(refused, exitcodes.CONFIG, f"mappings/t.yml: dbMapping.targetDb: target database {new} on",
                f"lacks 2 tables of source database {d.db}: u, v", f"{d.db} u v | mysql",
                f"--table {d.db}.u --table {d.db}.v; then sync again")
    assert "w" not in refused.stderr.split("lacks", 1)[1].split(".", 1)[0]  # its CREATE TABLE is pending
    _follow_tables_fix(d, _fix(refused), mariadb["password"])
    d.source(f"INSERT INTO `{d.db}`.v VALUES (7, 'q')")
    d.ok("run")
    for t in ("t", "u", "v", "w"):
        assert sql(mariadb_target, f"SELECT * FROM `{new}`.`{t}` ORDER BY 1") == d.source_rows(t), t
    assert sql(mariadb_target, f"SELECT * FROM `{new}`.v") == [(7, "q")]


def test_a_target_column_dropped_by_hand_is_added_back_and_filled_as_the_fix_says(tmp_path, mariadb, mariadb_target):
    """The fix for a source column the target lacks, followed to the end: the column added back, the
    sync, and `sluice repair`, which fills it in the rows the target held before (a new user's probe:
    only the rows updated later got it back, exit 0, when the fix named the ALTER alone)."""
    d = make(tmp_path, mariadb, mariadb_target)
    d.source(f"ALTER TABLE `{d.db}`.t ADD COLUMN c INT")
    d.target(f"ALTER TABLE `{d.tdb}`.t ADD COLUMN c INT")
    d.source(f"INSERT INTO `{d.db}`.t VALUES (1, 'a', 7), (2, 'b', 8)")
    d.ok("run")
    d.target(f"ALTER TABLE `{d.tdb}`.t DROP COLUMN c")  # a cleanup by hand
    d.source(f"UPDATE `{d.db}`.t SET b = 'z' WHERE id = 2")
    d.ok("capture", "--once")

    refused = d.run("sync", "--group", "g1")
    one_message(refused, exitcodes.FAILED, f"source column c of {d.db}.t is not in target table t",
                "ALTER TABLE t ADD COLUMN c", "sync again, then fill it in the rows the target held before "
                "(`sluice repair`")
    d.target(f"ALTER TABLE `{d.tdb}`.t ADD COLUMN c INT")  # follow it: the column, the sync, the repair
    d.ok("sync", "--group", "g1")
    assert d.rows() == [(1, "a", None), (2, "z", 8)]
    d.ok("repair", "--group", "g1")
    assert d.rows() == d.source_rows() == [(1, "a", 7), (2, "z", 8)]


def test_a_renamed_source_table_is_followed_as_the_fix_says(tmp_path, mariadb, mariadb_target):
    """A table mapping whose source table was renamed: refused naming it, and the fix (the mapping
    pointed at the new name, then `sluice repair`) leaves the target equal, the change made under the
    old name included (a new user's probe: no fix was given, and replaying the old name failed)."""
    d = make(tmp_path, mariadb, mariadb_target)
    refused = _sync_after(d, f"UPDATE `{d.db}`.t SET b = 'z' WHERE id = 1", f"RENAME TABLE `{d.db}`.t TO `{d.db}`.t2",
                          f"INSERT INTO `{d.db}`.t2 VALUES (3, 'c')")
    one_message(refused, exitcodes.CONFIG, f"source table {d.db}.t does not exist on",
                "if it was renamed, set dbMapping.table to its new name")
    d.edit_mapping(table="t2")  # follow it: the new name, the sync, the repair it names
    d.ok("sync", "--group", "g1")
    repair = shlex.split(re.search(r"`sluice (repair [^`]+)`", _fix(refused)).group(1))
    d.ok(*[a for a in repair if a not in ("--config", str(d.cfg))])
    assert d.rows() == d.source_rows("t2") == [(1, "z"), (2, "b"), (3, "c")]


def test_a_source_column_renamed_under_targetcolumns_is_followed_as_the_fix_says(tmp_path, mariadb, mariadb_target):
    """A column a mapping's targetColumns names, renamed at the source with a change pending: refused
    with the line to write (a new user's probe: no fix was given); followed, the sync names the repair
    for the change made under the old name, and after it the target equals the source."""
    d = make(tmp_path, mariadb, mariadb_target)
    d.edit_mapping(mapAll=None, targetColumns={"id": "id", "b": "b"})
    refused = _sync_after(d, f"UPDATE `{d.db}`.t SET b = 'z' WHERE id = 1",
                          f"ALTER TABLE `{d.db}`.t RENAME COLUMN b TO b2",
                          f"UPDATE `{d.db}`.t SET b2 = 'y' WHERE id = 2")
    one_message(refused, exitcodes.CONFIG, "column 'b' is not in the source table t (columns: id, b2)",
                "set `b: <its new name>` under dbMapping.targetColumns")
    d.edit_mapping(targetColumns={"id": "id", "b": "b2"})  # follow it
    synced = d.ok("sync", "--group", "g1")
    assert "were applied without it" in synced.stdout
    repair = shlex.split(re.search(r"rewrite them: sluice (repair .*)$", synced.stdout, re.M).group(1))
    d.ok(*[a for a in repair if a not in ("--config", str(d.cfg))])
    assert d.rows() == d.source_rows() == [(1, "z"), (2, "y")]


def test_a_keyless_mirror_table_is_loaded_whole_by_a_forced_bootstrap(tmp_path, mariadb, mariadb_target):
    """The fix named for a key-less table a mirror's target lacks or holds wrong, ``sluice bootstrap
    --force``, failed ("a full load (UPSERT) ... needs a primary key", a new user's probe): a mirror's
    key-less table is emptied and loaded whole (duplicate rows kept), and changes apply after it."""
    d = make(tmp_path, mariadb, mariadb_target)
    d.add_mapping("t.yml", {"dbMapping": {"mirrorDb": True, "database": d.db, "targetDb": d.tdb}})
    d.source(f"CREATE TABLE `{d.db}`.k (a INT, b VARCHAR(10))",
             f"INSERT INTO `{d.db}`.k VALUES (1, 'x'), (1, 'x'), (2, NULL)", f"INSERT INTO `{d.db}`.t VALUES (1, 'a')")
    d.target(f"CREATE TABLE `{d.tdb}`.u (id INT PRIMARY KEY, b VARCHAR(40))",
             f"CREATE TABLE `{d.tdb}`.k (a INT, b VARCHAR(10))", f"INSERT INTO `{d.tdb}`.k VALUES (9, 'stale')")
    d.ok("bootstrap", "--force")
    for t in ("t", "k"):
        assert sorted(d.rows(t), key=repr) == sorted(d.source_rows(t), key=repr), t
    d.source(f"INSERT INTO `{d.db}`.k VALUES (3, 'z')", f"DELETE FROM `{d.db}`.k WHERE a = 2")
    d.ok("run")
    assert sorted(d.rows("k"), key=repr) == sorted(d.source_rows("k"), key=repr) == [(1, "x"), (1, "x"), (3, "z")]


def test_a_keyless_load_while_the_source_wrote_fails_and_two_into_one_table_are_refused(tmp_path, mariadb):
    """A key-less table loaded whole is exact only if the source wrote nothing after the snapshot
    (the stream replays from it: an INSERT the load already copied would come twice); and two mirrors
    emptying one target table would delete each other's rows (a review of the change)."""
    from types import SimpleNamespace as NS

    from pipeline.capture.server_check import current_position
    from pipeline.config import load_config
    from pipeline.etl import keyless
    from pipeline.source.connect import connect
    from sluice_common.errors import ConfigError

    d = make(tmp_path, mariadb, mariadb)
    cfg = load_config(str(d.cfg))
    conn = connect(cfg.source)
    try:
        since = current_position(conn, "mariadb")
    finally:
        conn.close()
    load = NS(replace=True, meta=NS(label=f"{d.db}.k", table="k"), midx=0, mapping_file="mappings/a.yml")
    keyless.check_quiet(cfg, since, [load])  # nothing written since: exact
    d.source(f"INSERT INTO `{d.db}`.t VALUES (1, 'a')")
    with pytest.raises(keyless.NotQuiet, match=f"{d.db}.k has no primary key and was loaded whole, but the "
                       "source wrote while it was read") as e:
        keyless.check_quiet(cfg, since, [load])
    assert e.value.hint == "run `sluice bootstrap --force` again while nothing writes to the source"
    spec = NS(target_schema="mirror", database="a")
    plan = NS(group_id="g1", mapping_target={0: 0, 1: 0}, mappings={0: NS(spec=spec), 1: NS(spec=spec)})
    other = NS(replace=True, meta=NS(label="b.k", table="k"), midx=1, mapping_file="mappings/b.yml")
    with pytest.raises(ConfigError, match=f"b.k and {d.db}.k .mappings/a.yml. have no primary key and both mirror "
                       "into mirror.k"):
        keyless.check_targets([load, other], [plan], [NS(load=0, group=0), NS(load=1, group=0)])


def test_a_failed_bootstrap_names_itself_and_capture_does_not_start_past_it(tmp_path, mariadb, mariadb_target):
    """A bootstrap that failed (a target refused a row) said "run the load again"; followed with
    ``sluice etl``, capture then started at the source's current position and every change since the
    load's snapshot was lost (a new user's probe). The fix names the bootstrap, and capture of the
    store refuses to start at "now" until one succeeded."""
    import shutil

    d = make(tmp_path, mariadb, mariadb_target)
    shutil.rmtree(d.root / "store")  # a new store: no position yet
    d.source(f"INSERT INTO `{d.db}`.t VALUES (1, 'a'), (2, 'trailing ')")
    d.target(f"ALTER TABLE `{d.tdb}`.t MODIFY b CHAR(40)")  # would strip the trailing space: refused
    failed = d.run("bootstrap")
    assert failed.returncode == exitcodes.FAILED, failed.stdout + failed.stderr
    assert f"fix: fix the cause and run it again: sluice bootstrap --config {d.cfg}" in failed.stdout + failed.stderr
    refused = d.run("capture", "--once")
    one_message(refused, exitcodes.CONFIG, "the batch store has no position, and a sluice bootstrap of it from",
                "did not finish", f"run it again: sluice bootstrap --config {d.cfg}")
    d.target(f"ALTER TABLE `{d.tdb}`.t MODIFY b VARCHAR(40)")
    d.ok("bootstrap")
    d.source(f"UPDATE `{d.db}`.t SET b = 'changed' WHERE id = 1")
    d.ok("run")
    assert d.rows("t") == d.source_rows("t") == [(1, "changed"), (2, "trailing ")]
