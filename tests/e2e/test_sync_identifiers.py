"""Hostile identifiers and values through capture -> Spark job -> MariaDB (mirrorDb, DDL
replayed) and PostgreSQL (mapAll): backticks, quotes, spaces, reserved words and non-ASCII in
database, table and column names arrive as they are, and neither a name nor a value can run
SQL of its own: the canary tables that the injected ``DROP TABLE`` names survive, and the
injected text arrives verbatim as data (values are bound parameters, names are quoted)."""

from __future__ import annotations

import re
import uuid

import psycopg
import pytest
from psycopg import sql

from tests.support import sysbench
from tests.support.deploy import rdb_adapter, sluice, write_deployment


def q(name: str) -> str:
    """A MySQL identifier, quoted."""
    return "`" + name.replace("`", "``") + "`"


def _pg(postgres):
    return psycopg.connect(host=postgres["host"], port=postgres["port"], user=postgres["user"],
                           password=postgres["password"], dbname=postgres["database"], autocommit=True)


@pytest.fixture()
def names(mariadb, mariadb_target, postgres):
    h = uuid.uuid4().hex[:6]
    canary = f"x_{h}"
    n = {"h": h, "canary": canary,
         "db": f"s{h} 'q\"`b` 表",                               # source database
         "tdb": f"m{h} 'q\"`b` café",                            # MariaDB mirror target database
         "schema": f"pg{h}_café",                                # PostgreSQL schema
         "order": "order",                                       # reserved word
         "evil": f"t; DROP TABLE {canary}; --",                  # a table name that tries to inject
         "pg_evil": f"t;DROP/**/TABLE/**/{canary};--",           # the same, for a mapped target table
         "cols": ["select", "from", "it's \"x\"", "we`ird", "café", "表 列"]}
    with sysbench.connect(mariadb_target) as c, c.cursor() as cur:
        cur.execute(f"CREATE DATABASE {q(n['tdb'])} DEFAULT CHARSET utf8mb4")
        cur.execute(f"CREATE TABLE {q(n['tdb'])}.{q(canary)} (id INT)")
    with _pg(postgres) as c:
        c.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(n["schema"])))
        for schema in (n["schema"], "public"):
            c.execute(sql.SQL("CREATE TABLE {}.{} (id INT)").format(sql.Identifier(schema), sql.Identifier(canary)))
    yield n
    for info, db in ((mariadb, n["db"]), (mariadb_target, n["tdb"])):
        with sysbench.connect(info) as c, c.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {q(db)}")
    with _pg(postgres) as c:
        c.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(n["schema"])))
        c.execute(sql.SQL("DROP TABLE IF EXISTS public.{}").format(sql.Identifier(canary)))


def _values(canary: str) -> list[str]:
    return [f"'); DROP TABLE {canary}; --", f"\\'; DROP TABLE {canary}; -- \\", "\" OR \"1\"=\"1", "café ☕ 表",
            f"`; DROP TABLE {canary}; #", "%s %(x)s {0} ?", "$1 $$ $q$", "line\nbreak\ttab", "NULL", "'"]


def _source_rows(mariadb, n) -> tuple[list, list]:
    with sysbench.connect(mariadb, n["db"]) as c, c.cursor() as cur:
        cur.execute(f"SELECT * FROM {q('order')} ORDER BY {q('select')}")
        order = [tuple(r) for r in cur.fetchall()]
        cur.execute(f"SELECT * FROM {q(n['evil'])} ORDER BY id")
        return order, [tuple(r) for r in cur.fetchall()]


def test_hostile_identifiers_and_values_replicate_and_inject_nothing(tmp_path, mariadb, mariadb_target, postgres,
                                                                     names):
    n = names
    cols = n["cols"]
    mirror = {"dataSourceKey": "defaultDS", "groupId": "g1", "outerAdapterKey": "maria",
              "dbMapping": {"mirrorDb": True, "database": n["db"], "targetDb": n["tdb"]}}
    to_pg = [{"groupId": "g2", "outerAdapterKey": "pg",
              "dbMapping": {"database": n["db"], "table": src, "targetTable": f"{n['schema']}.{dst}",
                            "targetPk": {pk: pk}, "mapAll": True}}
             for src, dst, pk in (("order", "order", "select"), (n["evil"], n["pg_evil"], "id"))]
    cfg = write_deployment(
        tmp_path, mariadb, name=f"ids_{n['h']}", include=re.escape(n["db"]) + r"\..*", partitions=2,
        groups=[{"groupId": "g1", "outerAdapters": [rdb_adapter(mariadb_target, "maria", n["tdb"])],
                 "mappings": ["mappings/mirror.yml"]},
                {"groupId": "g2", "outerAdapters": [rdb_adapter(postgres, "pg", postgres["database"],
                                                                dialect="postgresql")],
                 "mappings": ["mappings/pg_*.yml"]}],
        mappings={"mirror.yml": mirror, "pg_order.yml": to_pg[0], "pg_evil.yml": to_pg[1]})
    sluice("capture", "--config", str(cfg), "--once")
    with _pg(postgres) as c:                 # mapAll into PostgreSQL: the target tables exist beforehand
        text_cols = sql.SQL(", ").join(sql.SQL("{} TEXT").format(sql.Identifier(col)) for col in cols[1:])
        c.execute(sql.SQL("CREATE TABLE {}.{} ({} INT PRIMARY KEY, {})").format(
            sql.Identifier(n["schema"]), sql.Identifier("order"), sql.Identifier("select"), text_cols))
        c.execute(sql.SQL("CREATE TABLE {}.{} (id INT PRIMARY KEY, v TEXT)").format(
            sql.Identifier(n["schema"]), sql.Identifier(n["pg_evil"])))
    col_defs = ", ".join(f"{q(c)} VARCHAR(200)" for c in cols[1:])
    vals = _values(n["canary"])
    with sysbench.connect(mariadb) as c, c.cursor() as cur:
        cur.execute(f"CREATE DATABASE {q(n['db'])} DEFAULT CHARSET utf8mb4")
        cur.execute(f"USE {q(n['db'])}")
        cur.execute(f"CREATE TABLE {q('order')} ({q('select')} INT PRIMARY KEY, {col_defs}) DEFAULT CHARSET utf8mb4")
        cur.execute(f"CREATE TABLE {q(n['evil'])} (id INT PRIMARY KEY, v VARCHAR(200)) DEFAULT CHARSET utf8mb4")
        insert = (f"INSERT INTO {q('order')} ({', '.join(q(c) for c in cols)}) "
                  f"VALUES (%s{', %s' * (len(cols) - 1)})")
        for i in range(len(vals)):
            cur.execute(insert, (i + 1, *[vals[(i + k) % len(vals)] for k in range(len(cols) - 1)]))
            cur.execute(f"INSERT INTO {q(n['evil'])} VALUES (%s, %s)", (i + 1, vals[i]))
        cur.execute(f"UPDATE {q('order')} SET {q('from')} = %s, {q('表 列')} = NULL WHERE {q('select')} = 1",
                    (vals[1],))
        cur.execute(f"UPDATE {q('order')} SET {q('select')} = 100 WHERE {q('select')} = 2")   # PK change
        cur.execute(f"DELETE FROM {q('order')} WHERE {q('we`ird')} = %s", (vals[4],))
        cur.execute(f"DELETE FROM {q(n['evil'])} WHERE v = %s", (vals[0],))
        c.commit()
    sluice("capture", "--config", str(cfg), "--once")
    sluice("sync", "--config", str(cfg), "--group", "g1")
    sluice("sync", "--config", str(cfg), "--group", "g2")

    order, evil = _source_rows(mariadb, n)
    assert len(order) == len(vals) - 1 and len(evil) == len(vals) - 1
    with sysbench.connect(mariadb_target, n["tdb"]) as c, c.cursor() as cur:   # MariaDB: DDL replayed too
        cur.execute("SHOW TABLES")  # the mirrored tables, the canary, Sluice's DDL ledger and position: nothing else
        assert sorted(r[0] for r in cur.fetchall()) == sorted(["order", n["evil"], n["canary"],
                                                               "_sluice_ddl_applied", "_sluice_applied"])
        cur.execute(f"SELECT * FROM {q('order')} ORDER BY {q('select')}")
        assert [tuple(r) for r in cur.fetchall()] == order
        cur.execute(f"SHOW COLUMNS FROM {q('order')}")
        assert [r[0] for r in cur.fetchall()] == cols
        cur.execute(f"SELECT * FROM {q(n['evil'])} ORDER BY id")
        assert [tuple(r) for r in cur.fetchall()] == evil
    with _pg(postgres) as c:                                                   # PostgreSQL
        got = c.execute(sql.SQL("SELECT * FROM {}.{} ORDER BY {}").format(
            sql.Identifier(n["schema"]), sql.Identifier("order"), sql.Identifier("select"))).fetchall()
        assert [tuple(r) for r in got] == order
        got = c.execute(sql.SQL("SELECT * FROM {}.{} ORDER BY id").format(
            sql.Identifier(n["schema"]), sql.Identifier(n["pg_evil"]))).fetchall()
        assert [tuple(r) for r in got] == evil
        canaries = c.execute("SELECT table_schema FROM information_schema.tables WHERE table_name = %s "
                             "ORDER BY 1", (n["canary"],)).fetchall()
        assert [r[0] for r in canaries] == sorted([n["schema"], "public"])   # the canaries survived
    assert order[0][1] == vals[1] and any(vals[0] in r for r in order)   # injection text is data, verbatim
