"""Mappings that would lose or garble rows quietly, through the real CLI against the real MariaDB
source and target (issue 37). Refused by name before anything runs: a mapped table the source
filter leaves out, a file carrying another group's ``groupId``, an unknown ``dataSourceKey``, two
mappings of one source table into one target table, two groups writing one target table (one
message naming the file(s), exit 2, nothing applied). Said in the summary and in status: a mapping
removed while its changes are pending (rows skipped, table by table), a column added to a mapping
(the backfill command), a mapping pointed at another table (the rewrite command), a group added to
a running deployment (the load). Each fix is followed and loses no row."""

from __future__ import annotations

import re
import shlex

from sluice_common import exitcodes
from tests.support.cli import one_message
from tests.support.operator import make, t_mapping

SPARK = ("log4j", "SparkContext")


def _no_spark(proc) -> None:
    assert not any(w in proc.stderr for w in SPARK), proc.stderr[-3000:]


def test_a_mapped_table_the_source_filter_leaves_out(tmp_path, mariadb, mariadb_target):
    """A filter that leaves out a mapped table (here narrowed after capture started) is refused by
    capture before it reads anything -- else it would store none of the table's changes and move the
    position past them for good (a new user found `capture` doing that, exit 0) -- and by the sync;
    with the fix followed every row written meanwhile arrives, and the load the hint names (for a
    table the filter never captured) is safe to run."""
    d = make(tmp_path, mariadb, mariadb_target)
    raw = d.config()
    raw["source"]["filter"] = {"include": rf"{d.db}\.u"}  # a filter written for another table
    d.write_config(raw)
    d.source(f"INSERT INTO `{d.db}`.t VALUES (1, 'a'), (2, 'b')", f"INSERT INTO `{d.db}`.u VALUES (1, 'x')")
    before = d.run("store", "status").stdout

    refused = d.run("capture", "--once")
    one_message(refused, exitcodes.CONFIG, f"mappings/t.yml: dbMapping.table: source table {d.db}.t is not captured: "
                f"source.filter in {d.cfg} leaves it out (include {d.db}\\.u)",
                f"fix: add {d.db}\\.t to source.filter.include in {d.cfg}",
                f"sluice etl --config {d.cfg} --group g1 --mapping mappings/t.yml")
    proc = d.run("run")
    assert proc.returncode == exitcodes.CONFIG, proc.stdout + proc.stderr
    assert f"error (config g1): mappings/t.yml: dbMapping.table: source table {d.db}.t is not captured" in proc.stdout
    assert d.run("store", "status").stdout == before  # nothing captured: the position where it was
    refused = d.run("sync", "--group", "g1")
    one_message(refused, exitcodes.CONFIG, f"mappings/t.yml: dbMapping.table: source table {d.db}.t is not captured")
    _no_spark(refused)

    raw["source"]["filter"]["include"] = [rf"{d.db}\.u", rf"{d.db}\.t"]  # follow the fix: the filter ...
    d.write_config(raw)
    d.source(f"INSERT INTO `{d.db}`.t VALUES (3, 'c')")
    d.ok("run")
    assert d.rows() == d.source_rows() == [(1, "a"), (2, "b"), (3, "c")]  # nothing written meanwhile lost
    etl = re.search(r"`(sluice etl [^`]+)`", refused.stderr).group(1).split()[1:]  # ... and the load it names
    d.ok(*[a for a in etl if a not in ("--config", str(d.cfg))])
    assert d.rows() == d.source_rows() == [(1, "a"), (2, "b"), (3, "c")]


def test_another_groups_id_and_an_unknown_data_source(tmp_path, mariadb, mariadb_target):
    d = make(tmp_path, mariadb, mariadb_target)
    d.add_mapping("t.yml", {**t_mapping(d.db), "groupId": "orders", "dataSourceKey": "shopDS"})
    d.source(f"INSERT INTO `{d.db}`.t VALUES (1, 'a')")
    d.ok("capture", "--once")

    refused = d.run("sync", "--group", "g1")
    one_message(refused, exitcodes.CONFIG, f"sluice: error: mappings/t.yml: groupId: is 'orders', but {d.cfg} lists "
                "this file under group 'g1'", "fix: remove groupId from mappings/t.yml, or list the file under group "
                "'orders'")
    _no_spark(refused)
    d.add_mapping("t.yml", {**t_mapping(d.db), "dataSourceKey": "shopDS"})  # follow the fix
    refused = d.run("sync", "--group", "g1")
    one_message(refused, exitcodes.CONFIG, f"sluice: error: mappings/t.yml: dataSourceKey: data source 'shopDS' is not "
                f"in srcDataSources of {d.cfg} (known: none)", "or remove dataSourceKey")
    d.add_mapping("t.yml", {k: v for k, v in t_mapping(d.db).items() if k != "dataSourceKey"})  # follow it
    d.ok("sync", "--group", "g1")
    assert d.rows() == [(1, "a")]


def test_one_target_table_written_twice(tmp_path, mariadb, mariadb_target):
    d = make(tmp_path, mariadb, mariadb_target)
    d.add_mapping("t2.yml", t_mapping(d.db, targetColumns={"b": "b"}, mapAll=False))
    d.source(f"INSERT INTO `{d.db}`.t VALUES (1, 'a')")
    d.ok("capture", "--once")

    refused = d.run("sync", "--group", "g1")
    one_message(refused, exitcodes.CONFIG, f"sluice: error: mappings/t2.yml: maps source table {d.db}.t into target "
                f"table {d.tdb}.t on {mariadb_target['host']}:{mariadb_target['port']}, as mappings/t.yml of the same "
                "group does", "fix: keep one mapping per source and target table")
    _no_spark(refused)
    d.mapping("t2.yml").unlink()  # follow the fix

    raw = d.config()  # a second group writing the same table
    raw["groups"].append({**raw["groups"][0], "groupId": "g2"})
    d.write_config(raw)
    proc = d.run("run")
    assert proc.returncode == exitcodes.CONFIG and "Traceback" not in proc.stdout + proc.stderr
    assert "which group 'g2' writes too (mappings/t.yml)" in proc.stdout
    assert "which group 'g1' writes too (mappings/t.yml)" in proc.stdout
    refused = d.run("sync", "--group", "g2")
    one_message(refused, exitcodes.CONFIG, f"mappings/t.yml: writes target table {d.tdb}.t on", "which group 'g1' "
                "writes too", "fix: let one group write it: remove the mapping from group 'g2' or from group 'g1'")
    assert d.rows() == []
    del raw["groups"][1]  # follow the fix
    d.write_config(raw)
    d.ok("run")
    assert d.rows() == d.source_rows() == [(1, "a")]


def _fix_command(text: str, marker: str) -> list[str]:
    """The sluice arguments of the command after ``marker`` in a note (without sluice and --config)."""
    words = shlex.split(text.split(marker, 1)[1].splitlines()[0])
    out, skip = [], False
    for w in words[1:]:
        if skip:
            skip = False
            continue
        if w == "--config":
            skip = True
            continue
        out.append(w)
    return out


def test_a_mapping_removed_while_its_batches_are_pending_is_said(tmp_path, mariadb, mariadb_target):
    d = make(tmp_path, mariadb, mariadb_target)
    d.target(f"CREATE TABLE `{d.tdb}`.u (id INT PRIMARY KEY, b VARCHAR(40))")
    d.add_mapping("u.yml", t_mapping(d.db, "u", "u"))
    d.source(f"INSERT INTO `{d.db}`.t VALUES (1, 'a')", f"INSERT INTO `{d.db}`.u VALUES (1, 'x')")
    d.ok("run")  # the group's mappings are recorded with the sync
    d.source(f"INSERT INTO `{d.db}`.t VALUES (2, 'b')", f"INSERT INTO `{d.db}`.u VALUES (2, 'y'), (3, 'z')")
    d.mapping("u.yml").unlink()  # removed while its changes are pending

    proc = d.ok("run")
    note = f"skipped 2 rows of {d.db}.u: no mapping of group g1 covers it any more (mappings/u.yml read it at the " \
           "last sync)"
    assert note in proc.stdout, proc.stdout
    assert "restore mappings/u.yml and replay: sluice store set-cursor" in proc.stdout
    status = d.ok("status").stdout
    assert note in status
    assert d.rows("u") == [(1, "x")]

    d.add_mapping("u.yml", t_mapping(d.db, "u", "u"))  # follow the note: restore the file and replay
    d.ok(*_fix_command(proc.stdout, "replay: "))
    d.ok("run")
    assert d.rows("u") == d.source_rows("u") and d.rows() == d.source_rows()


def test_a_column_added_to_a_mapping_names_the_backfill(tmp_path, mariadb, mariadb_target):
    d = make(tmp_path, mariadb, mariadb_target)
    d.source(f"ALTER TABLE `{d.db}`.t ADD COLUMN c INT")
    d.target(f"ALTER TABLE `{d.tdb}`.t ADD COLUMN c INT")
    d.edit_mapping(excludeColumns=["c"])
    d.source(f"INSERT INTO `{d.db}`.t VALUES (1, 'a', 10), (2, 'b', 20)")
    d.ok("run")
    assert d.rows() == [(1, "a", None), (2, "b", None)]

    d.edit_mapping(excludeColumns=None)  # c is mapped from now on
    d.source(f"INSERT INTO `{d.db}`.t VALUES (3, 'c', 30)")
    proc = d.ok("run")
    assert "note: mappings/t.yml now writes c: rows applied before this sync lack it; backfill them: sluice " \
           in proc.stdout, proc.stdout
    assert d.rows() == [(1, "a", None), (2, "b", None), (3, "c", 30)]  # verify shows the rows before as changed
    assert "note      mappings/t.yml now writes c" in d.ok("status").stdout

    d.ok(*_fix_command(proc.stdout, "backfill them: "))  # follow it
    assert d.rows() == d.source_rows() == [(1, "a", 10), (2, "b", 20), (3, "c", 30)]
    assert "all equal (exit 0)" in d.ok("verify").stdout


def test_a_mapping_pointed_at_another_table_names_the_rewrite(tmp_path, mariadb, mariadb_target):
    """targetTable changed between syncs: rows applied before stay in the old table; the note says
    so (summary and status) and its command fills the new one."""
    d = make(tmp_path, mariadb, mariadb_target)
    d.source(f"INSERT INTO `{d.db}`.t VALUES (1, 'a'), (2, 'b')")
    d.ok("run")
    d.target(f"CREATE TABLE `{d.tdb}`.t2 (id INT PRIMARY KEY, b VARCHAR(40))")
    d.edit_mapping(targetTable="t2")
    d.source(f"INSERT INTO `{d.db}`.t VALUES (3, 'c')")
    proc = d.ok("run")
    moved = f"mappings/t.yml now writes with table {d.tdb}.t2 (was {d.tdb}.t)"  # the URL's database named
    note = (f"note: {moved}: rows applied before this sync are where and as "
            "the old mapping wrote them; rewrite them: sluice repair ")
    assert note in proc.stdout, proc.stdout
    assert d.rows("t2") == [(3, "c")] and d.rows() == [(1, "a"), (2, "b")]
    assert moved in d.ok("status").stdout

    d.ok(*_fix_command(proc.stdout, "rewrite them: "))  # follow it
    assert d.rows("t2") == d.source_rows() == [(1, "a"), (2, "b"), (3, "c")]
    assert "mappings/t.yml now writes" not in d.ok("run").stdout  # said once


def test_a_group_added_to_a_running_deployment_names_the_load(tmp_path, mariadb, mariadb_target):
    """A second group added after the first synced gets only the changes the store holds: its first
    sync says so and names the load; followed, its target equals the source."""
    import yaml

    from tests.support.deploy import rdb_adapter

    d = make(tmp_path, mariadb, mariadb_target)
    # a row from before the store's start (as a bootstrap loaded it into g1's target): not in the binlog
    d.source("SET SESSION sql_log_bin = 0", f"INSERT INTO `{d.db}`.t VALUES (0, 'z')")
    d.target(f"INSERT INTO `{d.tdb}`.t VALUES (0, 'z')")
    d.source(f"INSERT INTO `{d.db}`.t VALUES (1, 'a'), (2, 'b')")
    assert "is new to this store" not in d.ok("run").stdout  # a group the store started with
    d.target(f"CREATE DATABASE `{d.db}_t2`", f"CREATE TABLE `{d.db}_t2`.t (id INT PRIMARY KEY, b VARCHAR(40))")
    (tmp_path / "mappings2").mkdir()
    (tmp_path / "mappings2" / "t.yml").write_text(yaml.safe_dump({**t_mapping(d.db), "outerAdapterKey": "t2"}))
    raw = d.config()
    raw["groups"].append({"groupId": "g2", "outerAdapters": [rdb_adapter(mariadb_target, "t2", f"{d.db}_t2")],
                          "mappings": ["mappings2/*.yml"]})
    d.write_config(raw)
    d.source(f"UPDATE `{d.db}`.t SET b = 'B' WHERE id = 2", f"INSERT INTO `{d.db}`.t VALUES (3, 'c')")
    proc = d.ok("run")
    note = ("note: group g2 is new to this store (it started with group g1): it applies the changes the store "
            "holds, from its first batch")
    assert note in proc.stdout, proc.stdout
    assert d.target(f"SELECT * FROM `{d.db}_t2`.t ORDER BY 1") == [(1, "a"), (2, "B"), (3, "c")]  # no row 0
    d.ok(*_fix_command(proc.stdout, "load them: "))  # follow it
    assert d.target(f"SELECT * FROM `{d.db}_t2`.t ORDER BY 1") == d.source_rows() == [(0, "z"), (1, "a"), (2, "B"),
                                                                        (3, "c")]
    assert "is new to this store" not in d.ok("run").stdout  # said once


def test_a_column_renamed_with_changes_pending_names_the_rewrite(tmp_path, mariadb, mariadb_target):
    """A source column renamed while changes are pending, and the mapping edited to the new name (as
    the pre-flight's refusal of the old one asks): the older changes carry the old name, so the sync
    applies them without the column -- said with the rewrite command (a new user found row 9 with
    NULL and an UPDATE gone, the run `ok` and the note blaming earlier syncs), which followed makes
    every row equal."""
    d = make(tmp_path, mariadb, mariadb_target)
    d.source(f"INSERT INTO `{d.db}`.t VALUES (1, 'a')")
    d.ok("run")
    d.source(f"INSERT INTO `{d.db}`.t VALUES (2, 'x')", f"UPDATE `{d.db}`.t SET b = 'A' WHERE id = 1",
             f"ALTER TABLE `{d.db}`.t RENAME COLUMN b TO c", f"INSERT INTO `{d.db}`.t VALUES (3, 'y')")
    d.edit_mapping(mapAll=None, targetColumns={"b": "c"})
    proc = d.ok("run")
    note = (f"note: mappings/t.yml: changes of {d.db}.t written before the source table had column c (which "
            "mappings/t.yml maps to b) were applied without it")
    assert note in proc.stdout, proc.stdout
    assert d.rows() != d.source_rows()
    d.ok(*_fix_command(proc.stdout, "rewrite them: "))  # follow it
    assert d.rows() == d.source_rows() == [(1, "A"), (2, "x"), (3, "y")]


def test_a_target_column_that_would_round_the_source_values_is_refused(tmp_path, mariadb, mariadb_target):
    """A hand-made target column with fewer fractional digits (DATETIME for the source's DATETIME(3), DECIMAL(8,2) for
    DECIMAL(8,4), INT for DECIMAL(6,2)), or of another kind (DATE for DATETIME, CHAR for VARCHAR, an indexed
    CHAR for TEXT: its fix is a VARCHAR, a TEXT key is refused), changed values quietly -- MariaDB does it in
    strict mode, and `sluice repair` "repaired" into the same loss (new users' probes). Values the column holds
    unchanged still go through; any other stops the sync by name, nothing acked, with the ALTER TABLE that
    widens the column; followed, every value arrives exactly."""
    d = make(tmp_path, mariadb, mariadb_target)
    d.source(f"CREATE TABLE `{d.db}`.w (id INT PRIMARY KEY, d DATETIME(3) NOT NULL, m DECIMAL(8,4), "
             "q DECIMAL(6,2), day DATETIME, c VARCHAR(10), t TEXT)")
    d.target(f"CREATE TABLE `{d.tdb}`.w (id INT PRIMARY KEY, d DATETIME NOT NULL, m DECIMAL(8,4), q INT, "
             "day DATE, c CHAR(10), t CHAR(10), UNIQUE KEY (t))")
    d.add_mapping("w.yml", t_mapping(d.db, table="w", target="w"))
    d.source(f"INSERT INTO `{d.db}`.w VALUES (1, '2026-11-29 10:00:00', 1.2345, 3, '2026-11-29', 'ab', 'a')")  # all fit
    d.ok("run")
    assert [r[:4] + r[5:] for r in d.rows("w")] == [r[:4] + r[5:] for r in d.source_rows("w")]  # a date
    d.source(f"INSERT INTO `{d.db}`.w VALUES (2, '2026-11-29 10:00:00.999', 1.5, 2.5, '2026-11-29 10:30:00', "
             "'x ', 'b ')")
    proc = d.run("run")
    assert proc.returncode == exitcodes.FAILED, proc.stdout
    assert f"value 2026-11-29 10:00:00.999 of source column d of {d.db}.w (datetime(3)) has more fractional " \
           f"digits than target column d of {d.tdb}.w keeps (DATETIME, 0 fractional digits): it would be rounded" \
           in proc.stdout, proc.stdout
    assert len(d.rows("w")) == 1  # nothing of it applied
    alter = proc.stdout.split("widen it: ", 1)[1].split(" (restate")[0]
    assert alter == f"ALTER TABLE `{d.tdb}`.`w` MODIFY `d` DATETIME(3) NOT NULL"
    d.target(alter)
    proc = d.run("run")  # the next column: a decimal into an integer column
    assert f"value 2.50 of source column q of {d.db}.w (decimal(6,2)) has more fractional digits than target " \
           f"column q of {d.tdb}.w keeps (INTEGER, 0 fractional digits)" in proc.stdout, proc.stdout
    alter = proc.stdout.split("widen it: ", 1)[1].split(" (restate")[0]
    assert alter == f"ALTER TABLE `{d.tdb}`.`w` MODIFY `q` DECIMAL(12,2) NULL"
    d.target(alter)
    for column, what, fix in (("day", "its time of day would be dropped", "datetime"),
                              ("c", "a fixed-width column pads and strips trailing spaces", "varchar(10)"),
                              ("t", "a fixed-width column pads and strips trailing spaces", "varchar(10)")):
        proc = d.run("run")  # columns of another kind
        assert f"of source column {column} of {d.db}.w" in proc.stdout and what in proc.stdout, proc.stdout
        alter = proc.stdout.split("give it the source's kind: ", 1)[1].split(" (restate")[0]
        assert alter == f"ALTER TABLE `{d.tdb}`.`w` MODIFY `{column}` {fix} NULL"
        d.target(alter)
    d.ok("run")
    assert d.rows("w") == d.source_rows("w") and d.rows("w")[1][1].microsecond == 999000


def test_repair_of_a_ci_key_under_a_bin_target_key_finds_nothing_to_do(tmp_path, mariadb, mariadb_target):
    """A ``_ci`` text key into a ``utf8mb4_bin`` target key (finer: accepted): the target sorts
    ``B`` before ``a``, so the source's chunk bounds cut its rows otherwise. Equal tables are equal
    to ``sluice verify`` and to ``sluice repair --dry-run`` (a new user's probe, on PostgreSQL:
    the dry run reported rows as missing and extra, and a repair rewrote them every time), and a
    repair writes nothing."""
    d = make(tmp_path, mariadb, mariadb_target)
    keys = [f"{c}{i:03d}" for i, c in enumerate("aBcDe_-zZy" * 20)]
    d.source(f"CREATE TABLE `{d.db}`.k (k VARCHAR(20) COLLATE utf8mb4_general_ci PRIMARY KEY, v INT)",
             f"INSERT INTO `{d.db}`.k VALUES " + ", ".join(f"('{k}', {i})" for i, k in enumerate(keys)))
    d.target(f"CREATE TABLE `{d.tdb}`.k (k VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PRIMARY KEY, "
             "v INT)", f"INSERT INTO `{d.tdb}`.k VALUES " + ", ".join(f"('{k}', {i})" for i, k in enumerate(keys)))
    d.add_mapping("k.yml", t_mapping(d.db, table="k", target="k", targetPk={"k": "k"}))
    assert d.run("verify", "--mapping", "mappings/k.yml", "--chunk-size", "10").returncode == 0
    dry = d.run("repair", "--group", "g1", "--table", f"{d.db}.k", "--dry-run", "--chunk-size", "10")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    done = d.ok("repair", "--group", "g1", "--table", f"{d.db}.k", "--chunk-size", "10", "--json")
    assert '"upserted": 0' in done.stdout and '"deleted": 0' in done.stdout, done.stdout
    assert sorted(d.rows("k")) == sorted(d.source_rows("k"))
