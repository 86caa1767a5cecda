"""System-versioned tables (``WITH SYSTEM VERSIONING``) through the whole pipeline -- issue 35,
case 9. Every run failed with ``source column row_start ... is not in target table`` and a hint
naming a key the mapping loader rejects.

A MariaDB mirror (replaying ``WITH SYSTEM VERSIONING``, 4 Spark partitions) ends with
the source's current rows and its whole history, period columns to the microsecond: inserts,
updates (a key change among them), versioned deletes, ``DELETE HISTORY``, an ``ALTER`` under
``system_versioning_alter_history = KEEP``, implicit and named (INVISIBLE) period columns. A
PostgreSQL mirror whose tables have the period columns as ordinary ones (key: the primary key and
the period's end, as capture keys them) holds every row, current and history. CI runs the MariaDB
mirror with 4 partitions; ``SLUICE_E2E_FULL=1`` adds 1 partition and the PostgreSQL mirrors
(tests/support/matrix.py).
"""

from __future__ import annotations

import uuid
from collections import Counter

import psycopg
import pytest

from tests.support import matrix, sysbench
from tests.support.compare import diff_databases
from tests.support.deploy import rdb_adapter, sluice, write_deployment

#: table -> (columns of the full image, in order; period start, end)
TABLES = {"v": (("id", "x", "t", "w", "row_start", "row_end"), ("row_start", "row_end")),
          "e": (("id", "x", "s", "en"), ("s", "en"))}
PG_DDL = ["CREATE TABLE {s}.v (id integer NOT NULL, x integer, t timestamptz(6), w integer, "
          "row_start timestamptz(6) NOT NULL, row_end timestamptz(6) NOT NULL, PRIMARY KEY (id, row_end))",
          "CREATE TABLE {s}.e (id integer NOT NULL, x integer, s timestamptz(6) NOT NULL, en timestamptz(6) NOT NULL, "
          "PRIMARY KEY (id, en))"]
GROUPS = matrix.groups({"maria4": ("maria", 4)}, kinds=("maria", "pg"))
KINDS = {kind for kind, _ in GROUPS.values()}


def _pg(postgres):
    return psycopg.connect(host=postgres["host"], port=postgres["port"], user=postgres["user"],
                           password=postgres["password"], dbname=postgres["database"], autocommit=True)


def _exec(info, *stmts, db=None) -> list:
    with sysbench.connect(info, db) as c, c.cursor() as cur:
        for s in stmts:
            cur.execute(s)
        return list(cur.fetchall())


def _workload(mariadb, db) -> None:
    _exec(mariadb,
          "CREATE TABLE v (id INT PRIMARY KEY, x INT, t TIMESTAMP(6) NULL) WITH SYSTEM VERSIONING",
          "CREATE TABLE e (id INT PRIMARY KEY, x INT, s TIMESTAMP(6) GENERATED ALWAYS AS ROW START INVISIBLE, "
          "en TIMESTAMP(6) GENERATED ALWAYS AS ROW END INVISIBLE, PERIOD FOR SYSTEM_TIME (s, en)) "
          "WITH SYSTEM VERSIONING",
          "INSERT INTO v (id, x, t) VALUES (1, 1, '2020-01-01 00:00:00.5'), (2, 2, NULL), (3, 3, NOW(6)), (4, 4, NULL)",
          "INSERT INTO e (id, x) VALUES (1, 1), (2, 2)",
          "UPDATE v SET x = x + 10 WHERE id <= 2",
          "UPDATE v SET id = 40 WHERE id = 4",
          "DELETE FROM v WHERE id = 3",
          "UPDATE e SET x = 20 WHERE id = 2",
          db=db)
    cut = _exec(mariadb, "SELECT NOW(6)")[0][0]
    _exec(mariadb,
          "UPDATE v SET x = 99 WHERE id = 1",
          "DELETE FROM e WHERE id = 1",
          f"DELETE HISTORY FROM v BEFORE SYSTEM_TIME '{cut}'",
          "SET SESSION system_versioning_alter_history = KEEP",
          "ALTER TABLE v ADD COLUMN w INT",
          "UPDATE v SET w = 5 WHERE id = 2",
          "START TRANSACTION", "INSERT INTO v (id, x) VALUES (5, 5)", "UPDATE v SET x = 6 WHERE id = 5", "COMMIT",
          db=db)


@pytest.fixture(scope="module")
def versioned(request, tmp_path_factory, mariadb, mariadb_target):
    postgres = request.getfixturevalue("postgres") if "pg" in KINDS else None
    tmp = tmp_path_factory.mktemp("ver")
    db = f"ver_{uuid.uuid4().hex[:6]}"
    groups, mappings = [], {}
    for g, (kind, _) in GROUPS.items():
        tdb = f"{db}_{g}"
        if kind == "maria":
            sysbench.create_database(mariadb_target, tdb)
            adapter = rdb_adapter(mariadb_target, g, tdb)
        else:
            with _pg(postgres) as c:
                c.execute(f'CREATE SCHEMA "{tdb}"')
                for stmt in PG_DDL:
                    c.execute(stmt.format(s=f'"{tdb}"'))
            adapter = rdb_adapter(postgres, g, postgres["database"], dialect="postgresql")
        mappings[f"{g}.yml"] = {"groupId": g, "outerAdapterKey": g,
                                "dbMapping": {"mirrorDb": True, "database": db, "targetDb": tdb}}
        groups.append({"groupId": g, "outerAdapters": [adapter], "mappings": [f"mappings/{g}.yml"]})
    cfg = write_deployment(tmp, mariadb, name=db, include=rf"{db}\..*", groups=groups, mappings=mappings)
    sluice("capture", "--config", str(cfg), "--once")
    _exec(mariadb, f"CREATE DATABASE `{db}`")
    _workload(mariadb, db)
    sluice("capture", "--config", str(cfg), "--once")
    yield {"cfg": cfg, "db": db, "postgres": postgres}
    sysbench.drop_database(mariadb, db)
    for g, (kind, _) in GROUPS.items():
        if kind == "maria":
            sysbench.drop_database(mariadb_target, f"{db}_{g}")
        else:
            with _pg(postgres) as c:
                c.execute(f'DROP SCHEMA "{db}_{g}" CASCADE')


def _history(info, db, table) -> Counter:
    """Every row, current and history, as text (period columns to the microsecond, UTC)."""
    cols, _ = TABLES[table]
    text = ", ".join(f"CAST(`{c}` AS CHAR)" for c in cols)
    return Counter(tuple(r) for r in _exec(info, "SET time_zone = '+00:00'",
                                           f"SELECT {text} FROM `{db}`.`{table}` FOR SYSTEM_TIME ALL"))


def _pg_rows(postgres, schema, table) -> Counter:
    cols, _ = TABLES[table]
    text = ", ".join(f"""to_char("{c}", 'YYYY-MM-DD HH24:MI:SS.US')""" if c in ("t", "s", "en", "row_start", "row_end")
                     else f'"{c}"::text' for c in cols)
    with _pg(postgres) as c:
        c.execute("SET TimeZone = 'UTC'")
        return Counter(tuple(r) for r in c.execute(f'SELECT {text} FROM "{schema}"."{table}"').fetchall())


@pytest.mark.parametrize("group", list(GROUPS))
def test_versioned_tables_keep_current_rows_and_history(versioned, group, mariadb, mariadb_target):
    d, postgres = versioned, versioned["postgres"]
    sluice("sync", "--config", str(d["cfg"]), "--group", group, "--partitions", str(GROUPS[group][1]))
    tdb = f"{d['db']}_{group}"
    for table in TABLES:
        src = _history(mariadb, d["db"], table)
        assert len(src) >= 3
        if GROUPS[group][0] == "maria":
            assert _history(mariadb_target, tdb, table) == src, table
        else:
            assert _pg_rows(postgres, tdb, table) == src, table
    if GROUPS[group][0] == "maria":
        assert diff_databases(mariadb, d["db"], mariadb_target, tdb) == {"e": 0, "v": 0}
