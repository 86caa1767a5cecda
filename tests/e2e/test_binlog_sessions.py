"""What a production server's sessions write into the binlog, mirrored exactly or refused by name.

One MariaDB source database mirrored (``mirrorDb``) into a target database with 4 partitions (the
long form, ``SLUICE_E2E_FULL=1``, adds a second group with 1 partition); a second source database no
mapping covers. Per case:
sessions that override ``binlog_row_image`` (MINIMAL, NOBLOB) and ``binlog_format`` (STATEMENT),
savepoints undone in a transaction that also wrote an Aria table, XA transactions decided after
other writes, compressed events (``log_bin_compress``). Every case ends compared byte for byte
(tests/support/compare.py), or, where the binlog does not describe a change exactly, with the
group stopped at it: exit 1, the message naming the position, the table and the problem, and
nothing acked from that batch on; after ``sluice repair`` has made the table good in every group (it
records a waiver) the groups go past it and converge.
"""

from __future__ import annotations

import json
import re
import uuid

import pytest

from pipeline.config import load_config
from pipeline.store import open_store
from tests.support import sysbench
from tests.support.compare import diff_databases
from tests.support.deploy import mirror_groups, sluice, write_deployment
from tests.support.matrix import FULL

#: mirror groups and their partitions (the default run: one group of 4; the long form adds 1 partition)
GROUPS = {"g1": 1, "g4": 4} if FULL else {"g4": 4}


@pytest.fixture(scope="module")
def mirror(tmp_path_factory, mariadb, mariadb_target):
    tmp = tmp_path_factory.mktemp("sessions")
    db = f"ses_{uuid.uuid4().hex[:6]}"
    other = f"{db}_other"
    groups, mappings = mirror_groups(mariadb_target, db, GROUPS)
    cfg = write_deployment(tmp, mariadb, name=db, include=rf"{db}.*\..*", groups=groups, mappings=mappings)
    sluice("capture", "--config", str(cfg), "--once")
    sysbench.create_database(mariadb, db)
    sysbench.create_database(mariadb, other)
    _sql(mariadb, db, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(40), n INT DEFAULT 7, "
         "upd TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3), doc MEDIUMTEXT)",
         "CREATE TABLE k (a VARCHAR(10) PRIMARY KEY, b INT)",
         "INSERT INTO t (id, v, doc) VALUES " + ",".join(f"({i}, 'v{i}', REPEAT('d{i}', 50))" for i in range(1, 41)),
         "INSERT INTO k VALUES ('a', 1), ('b', 2)")
    _sql(mariadb, other, "CREATE TABLE o (id INT PRIMARY KEY, v INT)", "INSERT INTO o VALUES (1, 1)")
    yield {"cfg": str(cfg), "db": db, "other": other, "tmp": tmp}
    for g in GROUPS:
        sysbench.drop_database(mariadb_target, f"{db}_{g}")
    sysbench.drop_database(mariadb, db)
    sysbench.drop_database(mariadb, other)


def _sql(info: dict, database: str, *statements: str) -> None:
    with sysbench.connect(info, database) as conn, conn.cursor() as cur:
        for s in statements:
            cur.execute(s)


def _sync(m: dict, group: str, check: bool = True):
    sluice("capture", "--config", m["cfg"], "--once")
    return sluice("sync", "--config", m["cfg"], "--group", group, "--partitions", str(GROUPS[group]), "--json",
                  check=check)


def _converged(m: dict, mariadb, mariadb_target) -> None:
    for g in GROUPS:
        _sync(m, g)
        diff = diff_databases(mariadb, m["db"], mariadb_target, f"{m['db']}_{g}")
        assert diff and all(v == 0 for v in diff.values()), (g, diff)


def _cursor(m: dict, group: str) -> int:
    st = json.loads(sluice("store", "status", "--config", m["cfg"], "--json").stdout)
    return st["groups"].get(group, {}).get("cursor", 0)


def test_minimal_and_noblob_updates_apply_exactly_what_they_carry(mirror, mariadb, mariadb_target):
    """MINIMAL: the before image is the key, the after image the changed columns; NOBLOB: every
    column but unchanged BLOB/TEXT ones. The target must keep the columns the images lack (and
    not stamp its own ON UPDATE time), exactly as the source has them."""
    _converged(mirror, mariadb, mariadb_target)
    _sql(mariadb, mirror["db"], "SET SESSION binlog_row_image = 'MINIMAL'",
         "UPDATE t SET v = CONCAT(v, '-min'), upd = upd WHERE id % 3 = 0",
         "DELETE FROM t WHERE id = 40",
         "SET SESSION binlog_row_image = 'NOBLOB'",
         "UPDATE t SET n = n + 1, upd = upd WHERE id % 4 = 0",
         "UPDATE t SET doc = CONCAT(doc, 'x') WHERE id = 5",
         "DELETE FROM t WHERE id = 39")
    _converged(mirror, mariadb, mariadb_target)


def _refused(m: dict, group: str, before: int) -> str:
    out = _sync(m, group, check=False)
    assert out.returncode == 1, out.stdout + out.stderr
    assert _cursor(m, group) == before
    return out.stderr


def _repair(m: dict, table: str) -> None:
    """``sluice repair`` of the table in every group that maps it (each group's message names them all):
    the last one records the waiver that lets the groups go past the refused change."""
    for g in GROUPS:
        sluice("repair", "--config", m["cfg"], "--group", g, "--table", f"{m['db']}.{table}")
    assert (open_store(load_config(m["cfg"])).root / "waivers.json").exists()


@pytest.mark.parametrize("case", ["statement", *(["minimal-insert", "minimal-key-change"] if FULL else [])])
def test_what_the_binlog_does_not_describe_stops_the_group_by_name(mirror, mariadb, mariadb_target, case):
    m = mirror
    _converged(m, mariadb, mariadb_target)
    before = {g: _cursor(m, g) for g in GROUPS}
    base = {"statement": 100, "minimal-insert": 200, "minimal-key-change": 300}[case]
    _sql(mariadb, m["db"], f"INSERT INTO t (id, v) VALUES ({base}, 'before the refused change')")
    _sql(mariadb, m["other"], "SET SESSION binlog_format = 'STATEMENT'", "UPDATE o SET v = v + 1",
         "SET SESSION binlog_row_image = 'MINIMAL'", "SET SESSION binlog_format = 'ROW'",
         f"INSERT INTO o (id) VALUES ({base})")  # a database no mapping covers: never stops anything
    if case == "statement":
        _sql(mariadb, m["db"], "SET SESSION binlog_format = 'STATEMENT'", "UPDATE t SET n = n + 7 WHERE id < 20")
        table, named = "t", ["statement-format write", "UPDATE t SET n = n + 7", "binlog_format=STATEMENT"]
    elif case == "minimal-insert":
        _sql(mariadb, m["db"], "SET SESSION binlog_row_image = 'MINIMAL'",
             f"INSERT INTO t (id, v) VALUES ({base + 1}, 'x')")  # MariaDB logs id, v and the stamped upd
        table, named = "t", ["an INSERT whose row image lacks columns (n, doc)", "binlog_row_image=MINIMAL"]
    else:
        _sql(mariadb, m["db"], "SET SESSION binlog_row_image = 'MINIMAL'", "UPDATE k SET a = 'c' WHERE a = 'a'")
        table, named = "k", ["changes the key (a)", "binlog_row_image=MINIMAL"]
    _sql(mariadb, m["db"], f"INSERT INTO t (id, v) VALUES ({base + 2}, 'after the refused change')")
    for g in GROUPS:
        err = _refused(m, g, before[g])
        assert re.search(r"mysql-bin\.\d+:\d+: group " + g + " stops at", err), err
        assert f"{m['db']}.{table}" in err or f"of {m['db']}" in err, err
        for text in named:
            assert text in err, (text, err)
        assert f"sluice repair --config {m['cfg']} --group {g} --table {m['db']}.{table}" in err, err
        assert "Traceback" not in err
    _repair(m, table)
    _converged(m, mariadb, mariadb_target)


def test_xa_savepoints_and_compressed_events_converge(mirror, mariadb, mariadb_target):
    """XA transactions decided after other writes (and after a sync between PREPARE and COMMIT),
    savepoints rolled back in a transaction that also wrote an Aria table, and log_bin_compress
    events: the mirrors equal the source."""
    m, x = mirror, mirror["db"][-6:]
    _converged(m, mariadb, mariadb_target)
    _sql(mariadb, m["db"], "CREATE TABLE a (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=Aria")
    _sql(mariadb, m["db"], f"XA START '{x}p'", "INSERT INTO t (id, v) VALUES (500, 'xa')",
         "UPDATE t SET n = 99 WHERE id = 1", f"XA END '{x}p'", f"XA PREPARE '{x}p'")
    _sql(mariadb, m["db"], f"XA START '{x}r'", "INSERT INTO t (id, v) VALUES (501, 'rolled back')",
         f"XA END '{x}r'", f"XA PREPARE '{x}r'")
    _sql(mariadb, m["db"], "UPDATE t SET n = 5 WHERE id = 2")  # committed between PREPARE and COMMIT
    _converged(m, mariadb, mariadb_target)  # the prepared rows are not visible at the source yet
    _sql(mariadb, m["db"], f"XA COMMIT '{x}p'")
    _sql(mariadb, m["db"], f"XA ROLLBACK '{x}r'")
    _sql(mariadb, m["db"], "BEGIN", "INSERT INTO t (id, v) VALUES (510, 'kept')", "SAVEPOINT s1",
         "INSERT INTO t (id, v) VALUES (511, 'undone')", "UPDATE t SET v = 'undone' WHERE id = 510",
         "INSERT INTO a VALUES (1, 'aria')", "ROLLBACK TO SAVEPOINT s1", "INSERT INTO t (id, v) VALUES (512, 'kept')",
         "COMMIT")
    with sysbench.log_bin_compress(mariadb):
        _sql(mariadb, m["db"], "UPDATE t SET doc = CONCAT(doc, REPEAT('z', 300)) WHERE id < 30",
             "INSERT INTO t (id, v, doc) VALUES " + ",".join(f"({600 + i}, 'c{i}', REPEAT('q', 500))"
                                                             for i in range(40)),
             "DELETE FROM t WHERE id BETWEEN 610 AND 620", "ALTER TABLE k ADD COLUMN c VARCHAR(300) DEFAULT 'x'")
    _converged(m, mariadb, mariadb_target)


if not FULL:  # long form (SLUICE_E2E_FULL=1): in the default run the MySQL e2e (test_binlog_sessions_mysql.py)
    # and tests/integration/test_capture_transactions.py cover these events
    del test_xa_savepoints_and_compressed_events_converge
