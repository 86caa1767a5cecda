"""DDL that names a database the mirror does not cover -- issue 35, case 10 -- and DDL whose
TIMESTAMP literals mean an instant in the source's time zone.

``CREATE TABLE t LIKE other.s`` (``other`` not mirrored) was replayed verbatim and failed on every
run with 1146. Now the mirror replays its effect -- the table as the source created it -- when the
source's definition of ``other.s`` provably is the one copied (not created, altered or renamed
since the second before the statement), with 4 Spark partitions. ``SLUICE_E2E_FULL=1`` adds 1
partition and the refusal through the whole pipeline: a template altered after the statement
stops the sync naming the statement, its position and the table, nothing acked, until the table
exists on the target (the refusal's fix; tests/integration/test_rdb_like_replay.py proves the refusal and
its fix on every run, without Spark). A TIMESTAMP default and the value an ``ADD COLUMN`` gives
existing rows are the source's instants (the statement is replayed in the source's time zone, not
Sluice's UTC).

The long form (``SLUICE_E2E_FULL=1``, or ``SLUICE_DEBEZIUM_SCRIPTS=ci|22|all``; not collected
otherwise: about a minute of Spark segments): Debezium's DDL test scripts (one database each) arrive
byte-equal, schema and rows, through one mirror group.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import uuid

import pytest

from tests.support import sysbench
from tests.support.compare import diff_databases
from tests.support.ddlscripts import client, debezium_scripts
from tests.support.deploy import rdb_adapter, sluice, write_deployment
from tests.support.matrix import FULL

GROUPS = {"m1": 1, "m4": 4} if FULL else {"m4": 4}


def _exec(info, *stmts, db=None) -> list:
    with sysbench.connect(info, db) as c, c.cursor() as cur:
        for s in stmts:
            cur.execute(s)
        return list(cur.fetchall())


def _next_second() -> None:
    """Wait into the next wall-clock second (statements after it run in a later second)."""
    time.sleep(1.05 - time.time() % 1)


def _definitions(info, db) -> dict[str, str]:
    """Every table's SHOW CREATE TABLE (its AUTO_INCREMENT counter left out), by name."""
    names = [r[0] for r in _exec(info, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = "
                                       f"'{db}' AND TABLE_NAME NOT LIKE '\\_sluice\\_%' ORDER BY 1")]
    out = {}
    for n in names:
        text = _exec(info, f"SHOW CREATE TABLE `{db}`.`{n.replace('`', '``')}`")[0][1]
        out[n] = re.sub(r" AUTO_INCREMENT=\d+", "", text)
    return out


def _cursor(cfg, group) -> int:
    st = json.loads(sluice("store", "status", "--config", str(cfg), "--json").stdout)
    return st["groups"].get(group, {}).get("cursor", 0)


@pytest.fixture(scope="module")
def liked(tmp_path_factory, mariadb, mariadb_target):
    tmp = tmp_path_factory.mktemp("like")
    tag = uuid.uuid4().hex[:6]
    db, other = f"lk_{tag}", f"tmpl_{tag}"
    groups, mappings = [], {}
    for g in GROUPS:
        sysbench.create_database(mariadb_target, f"{db}_{g}")
        mappings[f"{g}.yml"] = {"groupId": g, "outerAdapterKey": g,
                                "dbMapping": {"mirrorDb": True, "database": db, "targetDb": f"{db}_{g}"}}
        groups.append({"groupId": g, "outerAdapters": [rdb_adapter(mariadb_target, g, f"{db}_{g}")],
                       "mappings": [f"mappings/{g}.yml"]})
    cfg = write_deployment(tmp, mariadb, name=db, include=rf"{db}\..*", groups=groups, mappings=mappings)
    sluice("capture", "--config", str(cfg), "--once")
    _exec(mariadb, f"CREATE DATABASE `{db}`", f"CREATE DATABASE `{other}`")
    _exec(mariadb, "CREATE TABLE p (id INT PRIMARY KEY)",
          "CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(20) NOT NULL DEFAULT 'n', "
          "email VARCHAR(40) UNIQUE, pid INT, made DATETIME DEFAULT CURRENT_TIMESTAMP, CHECK (name <> ''), "
          "FOREIGN KEY (pid) REFERENCES p (id)) AUTO_INCREMENT = 1001 COMMENT 'template'",
          "CREATE TABLE u (id INT PRIMARY KEY, v INT)", db=other)
    _next_second()
    _exec(mariadb, f"CREATE TABLE a LIKE `{other}`.t",
          "INSERT INTO a (name, email, made) VALUES ('x', 'x@a', '2024-01-01'), ('y', 'y@a', '2024-01-02')",
          f"CREATE TABLE b (LIKE `{other}`.u)", "INSERT INTO b VALUES (1, 10), (2, 20)", db=db)
    if FULL:  # b's template changed (in a later second) after b copied it: the refusal and its fix
        _next_second()
        _exec(mariadb, "ALTER TABLE u ADD COLUMN w INT", db=other)
    _exec(mariadb, "INSERT INTO b VALUES (3, 30)", "UPDATE a SET name = 'z' WHERE email = 'y@a'",
          # TIMESTAMP literals in DDL are instants in the statement's time zone (the source's, not UTC):
          # the default, and the value ADD COLUMN gives the rows there (no row event carries it)
          "CREATE TABLE c (id INT PRIMARY KEY, t TIMESTAMP NOT NULL DEFAULT '2001-02-03 04:05:06')",
          "INSERT INTO c (id) VALUES (1), (2)",
          "ALTER TABLE c ADD COLUMN u TIMESTAMP NOT NULL DEFAULT '2002-03-04 05:06:07'", db=db)
    sluice("capture", "--config", str(cfg), "--once")
    yield {"cfg": cfg, "db": db}
    for d in (db, other):
        sysbench.drop_database(mariadb, d)
    for g in GROUPS:
        sysbench.drop_database(mariadb_target, f"{db}_{g}")


@pytest.mark.parametrize("group", list(GROUPS))
def test_create_like_of_an_unmirrored_table(liked, group, mariadb, mariadb_target):
    d, tdb = liked, f"{liked['db']}_{group}"
    args = ("sync", "--config", str(d["cfg"]), "--group", group, "--partitions", str(GROUPS[group]))
    if FULL:
        proc = sluice(*args, check=False)
        assert proc.returncode == 1, proc.stderr
        err = proc.stderr
        assert f"CREATE TABLE b (LIKE `tmpl_{d['db'][3:]}`.u)" in err and "batch " in err and " seq " in err, err
        assert f"fix: create {tdb}.b on the target" in err and "Traceback" not in err
        assert _cursor(d["cfg"], group) == 0
        # a's template was unchanged: its effect was replayed (LIKE's own rules: no foreign key, no counter)
        assert _definitions(mariadb_target, tdb)["a"] == _definitions(mariadb, d["db"])["a"]
        # the fix the message names: the table as the source created it (unchanged since), then sync again
        _exec(mariadb_target, _exec(mariadb, f"SHOW CREATE TABLE `{d['db']}`.b")[0][1], db=tdb)
    sluice(*args)
    assert _cursor(d["cfg"], group) > 0
    assert _definitions(mariadb_target, tdb) == _definitions(mariadb, d["db"])
    assert diff_databases(mariadb, d["db"], mariadb_target, tdb) == {"a": 0, "b": 0, "c": 0}


#: Debezium's DDL scripts (``ddl/*.sql`` of debezium-connector-binlog's test jar) this suite mirrors.
#: A mirror applies the DML between two DDL statements as one Spark job, so a script costs about
#: a second per such segment: ``ci`` (the default under SLUICE_E2E_FULL) runs a spread of types,
#: keys, charsets and DDL in 18 segments;
#: ``SLUICE_DEBEZIUM_SCRIPTS=22`` the 22 of issue 35 (57 segments, regression_test's CREATE TABLE
#: ... LIKE among them), ``=all`` every script (statements a script has that MariaDB refuses are
#: not in the binlog: the mirror must equal what the source ran).
DEBEZIUM_CI = ("binary_column_test", "binlog_ddl_parser", "boolean_test", "connector_test", "datetime_key_test",
               "db_default_charset_noutf", "decimal_column_test", "enum_column_test", "geometry_test_5", "json_test",
               "multitable_dbz_871", "special_characters_test", "table_column_comment_test",
               "timestamp_column_test", "year_test")
DEBEZIUM_22 = (*DEBEZIUM_CI, "default_value", "default_value_all_zero_time", "float_test",
               "nationalized_character_test", "numeric_column_test", "regression_test", "unsigned_integer_test")


#: which scripts the long form runs ("": it is not collected)
DEBEZIUM = os.environ.get("SLUICE_DEBEZIUM_SCRIPTS", "ci" if FULL else "").lower()


def _debezium_selection() -> list:
    scripts = debezium_scripts("*.sql")
    which = DEBEZIUM
    if which == "all":
        return scripts
    names = DEBEZIUM_22 if which == "22" else DEBEZIUM_CI
    chosen = [p for p in scripts if p.stem in names]
    assert len(chosen) == len(names), sorted(set(names) - {p.stem for p in chosen})
    return chosen


def _run_forced(info, path, database) -> None:
    """As the command-line client runs it, past the statements this server refuses (MySQL-only
    syntax, a function body the client splits at its ``$$``): what the server ran is in the binlog."""
    subprocess.run([*client(info, database), "--force"], input=path.read_text(), text=True, capture_output=True,
                   env=dict(os.environ, MYSQL_PWD=info["password"]), timeout=600, check=False)


def _debezium_ddl_scripts_arrive_byte_equal(tmp_path, mariadb, mariadb_target):
    scripts = _debezium_selection()
    tag = uuid.uuid4().hex[:4]
    dbs = {p: f"dbz{tag}_{re.sub(r'[^a-z0-9]', '_', p.stem.lower())}"[:60] for p in scripts}
    mappings = {f"{db}.yml": {"groupId": "g1", "outerAdapterKey": "t",
                              "dbMapping": {"mirrorDb": True, "database": db, "targetDb": f"{db}_m"}}
                for db in dbs.values()}
    for db in dbs.values():
        sysbench.create_database(mariadb_target, f"{db}_m")
    cfg = write_deployment(tmp_path, mariadb, name=f"dbz{tag}", include=rf"dbz{tag}_.*\..*",
                           groups=[{"groupId": "g1", "outerAdapters": [rdb_adapter(mariadb_target, "t", None)],
                                    "mappings": ["mappings/*.yml"]}], mappings=mappings, partitions=4)
    sluice("capture", "--config", str(cfg), "--once")
    try:
        for path, db in dbs.items():
            _exec(mariadb, f"DROP DATABASE IF EXISTS `{db}`", f"CREATE DATABASE `{db}`")
            _run_forced(mariadb, path, db)
        sluice("capture", "--config", str(cfg), "--once")
        proc = sluice("sync", "--config", str(cfg), "--group", "g1", check=False)
        if proc.returncode != 0:  # regression_test's LIKE ran in the second its template was made: refused
            assert "dbz_104_customers" in proc.stderr and "fix: create" in proc.stderr, proc.stderr
            src = dbs[next(p for p in scripts if p.stem == "regression_test")]
            _exec(mariadb_target, _exec(mariadb, f"SHOW CREATE TABLE `{src}`.dbz_104_customers")[0][1], db=f"{src}_m")
            sluice("sync", "--config", str(cfg), "--group", "g1")
        for db in dbs.values():
            diff = diff_databases(mariadb, db, mariadb_target, f"{db}_m")
            assert all(v == 0 for v in diff.values()), (db, diff)
            assert _definitions(mariadb_target, f"{db}_m") == _definitions(mariadb, db), db
    finally:
        for db in dbs.values():
            sysbench.drop_database(mariadb, db)
            sysbench.drop_database(mariadb_target, f"{db}_m")
        for other in ("connector_test", "emptydb"):
            sysbench.drop_database(mariadb, other)


if DEBEZIUM:  # the long form (module docstring): collected only when asked for, never a skip
    test_debezium_ddl_scripts_arrive_byte_equal = _debezium_ddl_scripts_arrive_byte_equal
