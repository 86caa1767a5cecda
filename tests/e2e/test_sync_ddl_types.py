"""Through the whole pipeline (binlog -> capture -> Spark job -> target):

* mirror DB: DDL of every kind interleaved with DML converges, schema and data, also for a
  table without a primary key, for DDL whose effect depends on its session's time zone and clock
  (the server's zone changed mid-stream, DST changes), and a full replay (cursor 0) after DROP
  COLUMN converges too;
* the every-type table arrives equal in MariaDB and by the documented mapping in PostgreSQL, from
  MariaDB and from Oracle MySQL (then also equal in a MySQL mirror);
* a column added in the source that the (non-mirror, mapAll) target lacks stops the run
  with a clear message instead of being dropped silently, and nothing is acked.
"""

from __future__ import annotations

import json
import uuid

import psycopg
import pytest

from adapters.rdb.values import suggest_type
from tests.integration.test_capture_types import DDL as TYPES_DDL
from tests.integration.test_capture_types import ROWS as TYPES_ROWS
from tests.support import matrix, sysbench
from tests.support.compare import diff_databases
from tests.support.deploy import rdb_adapter, sluice, write_deployment


def _exec(info, *stmts, db=None):
    with sysbench.connect(info, db) as c, c.cursor() as cur:
        for s in stmts:
            cur.execute(s)
        return cur.fetchall()


def _schema(info, db):
    cols = _exec(info, "SELECT TABLE_NAME, COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLUMN_KEY, COLUMN_DEFAULT "
                       f"FROM information_schema.COLUMNS WHERE TABLE_SCHEMA='{db}' AND TABLE_NAME NOT LIKE "
                       "'\\_sluice\\_%' ORDER BY 1, ORDINAL_POSITION")
    idx = _exec(info, "SELECT TABLE_NAME, INDEX_NAME, COLUMN_NAME, NON_UNIQUE FROM information_schema.STATISTICS "
                      f"WHERE TABLE_SCHEMA='{db}' AND TABLE_NAME NOT LIKE '\\_sluice\\_%' ORDER BY 1, 2, SEQ_IN_INDEX")
    return cols, idx


def _status_cursor(cfg, group):
    st = json.loads(sluice("store", "status", "--config", str(cfg), "--json").stdout)
    return st["groups"].get(group, {}).get("cursor", 0)


def _time_zones(mariadb: dict, db: str) -> None:
    """DDL whose effect depends on its session's time zone and clock, in sessions of other zones than
    the server's (America/New_York), one of them after the server's own zone changed mid-stream (put
    back before the sync, which must not use it): TIMESTAMP literal defaults, ``ADD COLUMN ... DEFAULT
    CURRENT_TIMESTAMP(6)`` filling rows (the source's start time, not the replay's), and values at the
    server's DST changes (2026-03-08 02:30 does not exist there, 2026-11-01 01:30 happens twice)."""
    _exec(mariadb, "SET SESSION time_zone = 'Asia/Kolkata'",
          "CREATE TABLE tz (id INT PRIMARY KEY, a TIMESTAMP NOT NULL DEFAULT '2026-03-08 02:30:00', d DATETIME(3))",
          "INSERT INTO tz (id, d) VALUES (1, '2026-11-01 01:30:00.250')",
          "SET SESSION time_zone = 'America/New_York'",
          "INSERT INTO tz VALUES (2, '2026-11-01 01:30:00', '2026-03-08 02:30:00'), (3, '2026-03-08 03:30:00', NULL)",
          "INSERT INTO tz VALUES (4, FROM_UNIXTIME(1793511000), NULL), (5, FROM_UNIXTIME(1793514600), NULL)",
          "ALTER TABLE tz ADD COLUMN b TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)", db=db)
    zone = _exec(mariadb, "SELECT @@GLOBAL.time_zone")[0][0]
    _exec(mariadb, "SET GLOBAL time_zone = '+03:00'")
    try:  # a new session: the server's new zone
        _exec(mariadb, "ALTER TABLE tz ADD COLUMN c TIMESTAMP NOT NULL DEFAULT '2026-07-01 12:00:00'",
              "INSERT INTO tz (id, d) VALUES (6, NOW(6))", db=db)
    finally:
        _exec(mariadb, f"SET GLOBAL time_zone = '{zone}'")


def test_mirror_ddl_of_every_kind_converges(tmp_path, mariadb, mariadb_target):
    db = f"ddl_{uuid.uuid4().hex[:6]}"
    tdb = f"{db}_m"
    sysbench.create_database(mariadb_target, tdb)
    mapping = {"dataSourceKey": "defaultDS", "groupId": "g1", "outerAdapterKey": "t",
               "dbMapping": {"mirrorDb": True, "database": db, "targetDb": tdb}}
    cfg = write_deployment(tmp_path, mariadb, name=db, include=rf"{db}\..*",
                           groups=[{"groupId": "g1", "outerAdapters": [rdb_adapter(mariadb_target, "t", tdb)],
                                    "mappings": ["mappings/*.yml"]}], mappings={"m.yml": mapping}, partitions=3)
    sluice("capture", "--config", str(cfg), "--once")
    _exec(mariadb, f"CREATE DATABASE `{db}`")
    _exec(mariadb,
          "CREATE TABLE a (id INT PRIMARY KEY, v VARCHAR(20), gone INT)",
          "INSERT INTO a VALUES (1,'one',1),(2,'two',2),(3,'three',3)",
          "ALTER TABLE a ADD COLUMN w INT NOT NULL DEFAULT 7 AFTER v",
          "UPDATE a SET w = id * 10 WHERE id < 3",
          "INSERT INTO a (id, v, gone) VALUES (4, 'four', 4)",
          "CREATE INDEX ix_v ON a (v)",
          "ALTER TABLE a MODIFY v VARCHAR(60) NOT NULL",
          "INSERT INTO a VALUES (5, REPEAT('x', 59), 50, 5)",
          "ALTER TABLE a DROP COLUMN gone",
          "UPDATE a SET v = CONCAT(v, '!') WHERE id IN (1, 5)",
          "CREATE TABLE b (k VARCHAR(10) PRIMARY KEY, n INT) DEFAULT CHARSET=utf8mb4",
          "INSERT INTO b VALUES ('x', 1), ('y', 2)",
          "RENAME TABLE b TO b2",
          "INSERT INTO b2 VALUES ('z', 3)",
          "UPDATE b2 SET k = 'w' WHERE k = 'x'",
          "CREATE TABLE nopk (kind VARCHAR(10), n INT)",
          "INSERT INTO nopk VALUES ('dup', 1), ('dup', 1), ('solo', 2)",
          "DELETE FROM nopk WHERE kind = 'dup' LIMIT 1",
          "UPDATE nopk SET n = 3 WHERE kind = 'solo'",
          "CREATE TABLE t_trunc (id INT PRIMARY KEY)",
          "INSERT INTO t_trunc VALUES (1), (2)",
          "TRUNCATE TABLE t_trunc",
          "INSERT INTO t_trunc VALUES (9)",
          "CREATE TABLE t_drop (id INT PRIMARY KEY)",
          "INSERT INTO t_drop VALUES (1)",
          "DROP TABLE t_drop",
          "DROP INDEX ix_v ON a",
          "ALTER TABLE a ADD UNIQUE INDEX ux_id_w (id, w)",
          "DELETE FROM a WHERE id = 2",
          "CREATE TABLE g (id INT PRIMARY KEY, a INT, b INT, v INT AS (a + b) VIRTUAL, s INT AS (a * b) STORED)",
          "INSERT INTO g (id, a, b) VALUES (1, 2, 3), (2, 4, 5)",
          "UPDATE g SET a = a + 10 WHERE id = 1",
          "ALTER TABLE g ADD COLUMN w INT AS (a - b) VIRTUAL",
          "INSERT INTO g (id, a, b) VALUES (3, 7, 1)",
          "ALTER TABLE g DROP COLUMN v, ADD COLUMN v INT",  # generated -> written
          "INSERT INTO g (id, a, b, v) VALUES (4, 1, 1, 99)",
          "UPDATE g SET v = 5, b = 0 WHERE id = 2",
          "ALTER TABLE g DROP COLUMN s, ADD COLUMN s INT AS (a * 2) STORED",  # back to generated
          "UPDATE g SET a = 20 WHERE id = 3",
          db=db)
    _time_zones(mariadb, db)
    sluice("capture", "--config", str(cfg), "--once")
    sluice("sync", "--config", str(cfg), "--group", "g1")
    assert _schema(mariadb, db) == _schema(mariadb_target, tdb)
    diff = diff_databases(mariadb, db, mariadb_target, tdb)
    assert set(diff) == {"a", "b2", "g", "nopk", "t_trunc", "tz"} and all(v == 0 for v in diff.values()), diff
    # replay everything from the first batch: history older than the DDL already replayed
    sluice("store", "set-cursor", "--config", str(cfg), "--group", "g1", "--to", "0")
    sluice("sync", "--config", str(cfg), "--group", "g1")
    assert _schema(mariadb, db) == _schema(mariadb_target, tdb)
    diff = diff_databases(mariadb, db, mariadb_target, tdb)
    assert all(v == 0 for v in diff.values()), diff  # PK-less rows too: their replay skips what was applied
    sysbench.drop_database(mariadb, db)
    sysbench.drop_database(mariadb_target, tdb)


#: Sluice's own processes (capture, the Spark driver and executors) in a zone with DST that is
#: neither UTC nor the servers' (America/New_York): no value may depend on the local zone
SLUICE_TZ = {"TZ": "Europe/Berlin"}
#: per source, the mirror targets besides PostgreSQL's mapAll table
TYPE_MIRRORS = {"mariadb": ("maria",), "mysql": ("maria", "mysql")}


@pytest.mark.parametrize("source", list(TYPE_MIRRORS))
def test_every_type_reaches_mariadb_and_postgresql(tmp_path, source, request, postgres):
    """Every type from each source: equal in each MySQL-family mirror (MariaDB's and, from Oracle
    MySQL, MySQL's), and by the documented mapping in PostgreSQL."""
    servers = matrix.Servers.of(request, source, TYPE_MIRRORS[source])
    src = servers.source
    db = f"typ_{uuid.uuid4().hex[:6]}"
    pg_schema = db
    with psycopg.connect(host=postgres["host"], port=postgres["port"], user=postgres["user"],
                         password=postgres["password"], dbname=postgres["database"], autocommit=True) as c:
        c.execute(f'CREATE SCHEMA "{pg_schema}"')
    groups, mappings = [], {}
    for kind in TYPE_MIRRORS[source]:
        adapter = servers.create(kind, f"{db}_{kind}", kind)
        mappings[f"{kind}.yml"] = {"groupId": kind, "outerAdapterKey": kind,
                                   "dbMapping": {"mirrorDb": True, "database": db, "targetDb": f"{db}_{kind}"}}
        groups.append({"groupId": kind, "outerAdapters": [adapter], "mappings": [f"mappings/{kind}.yml"]})
    mappings["pg.yml"] = {"groupId": "pg", "outerAdapterKey": "pg",
                          "dbMapping": {"database": db, "table": "types", "targetTable": f"{pg_schema}.types",
                                        "targetPk": {"id": "id"}, "mapAll": True}}
    groups.append({"groupId": "pg", "outerAdapters": [rdb_adapter(postgres, "pg", postgres["database"],
                                                                  dialect="postgresql")],
                   "mappings": ["mappings/pg.yml"]})
    cfg = write_deployment(tmp_path, src, name=db, include=rf"{db}\..*", groups=groups, mappings=mappings)
    sluice("capture", "--config", str(cfg), "--once", env=SLUICE_TZ)
    _exec(src, f"CREATE DATABASE `{db}`")
    _exec(src, "SET sql_mode = 'NO_ENGINE_SUBSTITUTION'", "SET time_zone = 'America/New_York'",
          TYPES_DDL.format(db=db),
          *[f"INSERT INTO {db}.types VALUES {r}" for r in TYPES_ROWS],
          f"UPDATE {db}.types SET bu = 1, vb = x'FF00', ts6 = '2030-06-01 12:00:00.5' WHERE id = 2",
          f"DELETE FROM {db}.types WHERE id = 3")
    cols = _exec(src, "SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS WHERE "
                      f"TABLE_SCHEMA='{db}' AND TABLE_NAME='types' ORDER BY ORDINAL_POSITION")
    ddl = ", ".join(f'"{c}" {suggest_type("postgresql", t)}' for c, t in cols)
    with psycopg.connect(host=postgres["host"], port=postgres["port"], user=postgres["user"],
                         password=postgres["password"], dbname=postgres["database"], autocommit=True) as c:
        c.execute(f'CREATE TABLE "{pg_schema}".types ({ddl}, PRIMARY KEY (id))')
    sluice("run", "--config", str(cfg), env=SLUICE_TZ)  # capture, then every group in one Spark session
    for kind in TYPE_MIRRORS[source]:
        diff = servers.diff(kind, db, f"{db}_{kind}")
        assert diff == {"types": 0}, (kind, diff)
    # PostgreSQL: every column by the documented mapping (docs/rdb.md, "Values")
    types = dict(cols)
    want = _source_canonical(src, db, types)
    with psycopg.connect(host=postgres["host"], port=postgres["port"], user=postgres["user"],
                         password=postgres["password"], dbname=postgres["database"], autocommit=True) as c:
        got = _pg_canonical(c, pg_schema, types)
        assert sorted(got) == sorted(want) == ["1", "2"]
        for key, row in want.items():
            for col, mtype in types.items():
                expected, have = _pg_expected(mtype, row[col]), got[key][col]
                if mtype == "json" and expected is not None:
                    expected, have = json.loads(expected), json.loads(have)
                assert expected == have, (key, col, mtype, row[col], have)
        c.execute(f'DROP SCHEMA "{pg_schema}" CASCADE')
    for kind in TYPE_MIRRORS[source]:
        servers.drop(kind, f"{db}_{kind}")
    sysbench.drop_database(src, db)


def test_new_source_column_stops_a_mapall_mapping_and_acks_nothing(tmp_path, mariadb, mariadb_target):
    db = f"newc_{uuid.uuid4().hex[:6]}"
    tdb = f"{db}_t"
    sysbench.create_database(mariadb_target, tdb)
    _exec(mariadb_target, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", db=tdb)
    _exec(mariadb, f"CREATE DATABASE `{db}`")
    _exec(mariadb, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", db=db)
    mapping = {"groupId": "g1", "dbMapping": {"database": db, "table": "t", "targetTable": f"{tdb}.t",
                                              "targetPk": {"id": "id"}, "mapAll": True}}
    cfg = write_deployment(tmp_path, mariadb, name=db, include=rf"{db}\..*",
                           groups=[{"groupId": "g1", "outerAdapters": [rdb_adapter(mariadb_target, "t", tdb)],
                                    "mappings": ["mappings/*.yml"]}], mappings={"m.yml": mapping})
    sluice("capture", "--config", str(cfg), "--once")
    _exec(mariadb, "INSERT INTO t VALUES (1, 1)", "ALTER TABLE t ADD COLUMN extra VARCHAR(10)",
          "INSERT INTO t VALUES (2, 2, 'new')", db=db)
    sluice("capture", "--config", str(cfg), "--once")
    proc = sluice("sync", "--config", str(cfg), "--group", "g1", check=False)
    assert proc.returncode != 0
    assert "extra" in proc.stderr and "not in target table" in proc.stderr and "Traceback" not in proc.stderr
    assert _status_cursor(cfg, "g1") == 0
    _exec(mariadb_target, "ALTER TABLE t ADD COLUMN extra VARCHAR(10)", db=tdb)   # the operator's fix
    sluice("sync", "--config", str(cfg), "--group", "g1")
    assert diff_databases(mariadb, db, mariadb_target, tdb) == {"t": 0}
    sysbench.drop_database(mariadb, db)
    sysbench.drop_database(mariadb_target, tdb)


def _source_canonical(info, db, types: dict[str, str]) -> dict[str, dict]:
    """The source rows as canonical text: UTC for TIMESTAMP, hex for binary, numbers for BIT,
    the widened double of a FLOAT."""
    def expr(col, mtype):
        base = mtype.split("(")[0].split()[0]
        if base in ("binary", "varbinary", "blob", "tinyblob", "mediumblob", "longblob", "geometry"):
            return f"HEX(`{col}`)"
        if base == "bit":
            return f"`{col}` + 0"
        if base == "float":
            return f"CAST(`{col}` AS DOUBLE)"
        return f"CAST(`{col}` AS CHAR)"
    names = list(types)
    rows = _exec(info, "SET time_zone = '+00:00'",
                 f"SELECT {', '.join(expr(c, types[c]) for c in names)} FROM types", db=db)
    return {str(r[0]): dict(zip(names, r, strict=True)) for r in rows}


def _pg_canonical(c, schema: str, types: dict[str, str]) -> dict[str, dict]:
    def expr(col, mtype):
        base = mtype.split("(")[0].split()[0]
        q = f'"{col}"'
        if base in ("datetime", "timestamp"):
            return f"CASE WHEN isfinite({q}) THEN to_char({q}, 'YYYY-MM-DD HH24:MI:SS.US') ELSE {q}::text END"
        if base == "time":
            return f"(extract(epoch from {q}) * 1000000)::bigint::text"
        if base in ("binary", "varbinary", "blob", "tinyblob", "mediumblob", "longblob", "geometry"):
            return f"upper(encode({q}, 'hex'))"
        if base == "float":  # real widened to double exactly, as the source's FLOAT is
            return f"{q}::float8::text"
        return f"{q}::text"
    c.execute("SET TimeZone = 'UTC'")
    names = list(types)
    rows = c.execute(f"SELECT {', '.join(expr(n, types[n]) for n in names)} FROM \"{schema}\".types").fetchall()
    return {str(r[0]): dict(zip(names, r, strict=True)) for r in rows}


def _micros(text: str) -> str:
    sign = -1 if text.startswith("-") else 1
    h, m, s = text.lstrip("-").split(":")
    sec, _, frac = s.partition(".")
    return str(sign * ((int(h) * 3600 + int(m) * 60 + int(sec)) * 1_000_000 + int((frac + "000000")[:6])))


def _pg_expected(mtype: str, v):
    """What docs/rdb.md says PostgreSQL holds for a source value (rendered as _pg_canonical does)."""
    if v is None:
        return None
    base = mtype.split("(")[0].split()[0]
    arg = mtype.split("(")[1].split(")")[0] if "(" in mtype else ""
    if base in ("tinyint", "smallint", "mediumint", "int", "bigint", "year"):
        return str(int(v))
    if base == "bit":
        return bin(int(v))[2:].zfill(int(arg or 1))
    if base in ("float", "double"):  # real: the same float32 (widened to a double on both sides)
        return repr(float(v))
    if base == "date":
        return "-infinity" if "-00" in v or v.startswith("0000") else v
    if base in ("datetime", "timestamp"):
        if v.startswith("0000-00-00"):
            return "-infinity"
        day, _, t = v.partition(" ")
        hms, _, frac = t.partition(".")
        return f"{day} {hms}.{(frac + '000000')[:6]}"
    if base == "time":
        return _micros(v)
    return v
