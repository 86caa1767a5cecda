"""An UPDATE leaves the target with the source's values for every column its row image carries,
whatever ``ON UPDATE`` clauses the target table has, and a target table with triggers is refused
by name (a replica applying row events fires none; the source's trigger effects are rows of the
binlog already) -- issue 35, case 1.

The source keeps its stamps (``SET note = 'x', upd = upd``), stamps new ones, and writes its own,
on a keyed table, an ordered table (a unique key: key changes are one UPDATE) and a table without
a key. Groups: MariaDB mirrors with 1 and 4 Spark partitions (the 4-partition target has a table
made by hand with a trigger, refused until it is dropped) and a PostgreSQL mirror whose tables stamp ``upd`` with a
trigger, as PostgreSQL schemas emulate ``ON UPDATE`` (refused until it is disabled).
"""

from __future__ import annotations

import json
import uuid

import psycopg
import pytest

from adapters.rdb.values import suggest_type
from tests.support import sysbench
from tests.support.compare import diff_databases, pg_diff
from tests.support.deploy import rdb_adapter, sluice, write_deployment

STAMPS = ("upd DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6), "
          "ts TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6)")
DDL = [
    f"CREATE TABLE t (id INT PRIMARY KEY, note VARCHAR(20), n INT, {STAMPS})",
    f"CREATE TABLE u (id INT PRIMARY KEY, email VARCHAR(40) UNIQUE, note VARCHAR(20), {STAMPS})",
    f"CREATE TABLE nk (a INT, note VARCHAR(20), {STAMPS})",
]
OLD = "'2020-01-02 03:04:05.000006'"
WORKLOAD = [
    *[f"INSERT INTO t (id, note, n, upd, ts) VALUES ({i}, 'n{i}', {i}, {OLD}, {OLD})" for i in range(1, 36)],
    *[f"INSERT INTO u (id, email, note, upd, ts) VALUES ({i}, 'e{i}@x', 'n{i}', {OLD}, {OLD})" for i in range(1, 11)],
    *[f"INSERT INTO nk (a, note, upd, ts) VALUES ({i % 4}, 'n{i}', {OLD}, {OLD})" for i in range(1, 9)],
    "UPDATE t SET note = 'kept', upd = upd, ts = ts WHERE id % 3 = 0",        # the stamps stay
    "UPDATE t SET n = n + 100 WHERE id % 3 = 1",                              # the source stamps
    "UPDATE t SET note = 'own', upd = '2021-05-05 05:05:05.5', ts = ts WHERE id % 5 = 0",
    "UPDATE u SET note = 'kept', upd = upd, ts = ts WHERE id < 4",
    "UPDATE u SET id = id + 100, upd = upd, ts = ts WHERE id IN (4, 5)",     # key changes, stamps kept
    "UPDATE u SET email = CONCAT('m', email), upd = upd, ts = ts WHERE id > 7",
    "UPDATE nk SET note = 'kept', upd = upd, ts = ts WHERE a = 1",
    "UPDATE nk SET note = 'own', upd = '2022-02-02 02:02:02.2', ts = ts WHERE a = 2",
]
#: group -> (target kind, Spark partitions)
GROUPS = {"m1": ("maria", 1), "m4": ("maria", 4), "p4": ("pg", 4)}


def _pg(postgres):
    return psycopg.connect(host=postgres["host"], port=postgres["port"], user=postgres["user"],
                           password=postgres["password"], dbname=postgres["database"], autocommit=True)


def _exec(info, *stmts, db=None):
    with sysbench.connect(info, db) as c, c.cursor() as cur:
        for s in stmts:
            cur.execute(s)


@pytest.fixture(scope="module")
def stamped(tmp_path_factory, mariadb, mariadb_target, postgres):
    tmp = tmp_path_factory.mktemp("stamps")
    db = f"upd_{uuid.uuid4().hex[:6]}"
    groups, mappings = [], {}
    for g, (kind, _) in GROUPS.items():
        tdb = f"{db}_{g}"
        if kind == "maria":
            sysbench.create_database(mariadb_target, tdb)
            adapter = rdb_adapter(mariadb_target, g, tdb)
            if g == "m4":  # a table made by hand with a trigger (the replayed CREATE finds it exists)
                _exec(mariadb_target, DDL[0], "CREATE TRIGGER bump BEFORE UPDATE ON t FOR EACH ROW "
                      "SET NEW.n = NEW.n + 1000", db=tdb)
        else:
            adapter = rdb_adapter(postgres, g, postgres["database"], dialect="postgresql")
        mappings[f"{g}.yml"] = {"groupId": g, "outerAdapterKey": g,
                                "dbMapping": {"mirrorDb": True, "database": db, "targetDb": tdb}}
        groups.append({"groupId": g, "outerAdapters": [adapter], "mappings": [f"mappings/{g}.yml"]})
    cfg = write_deployment(tmp, mariadb, name=db, include=rf"{db}\..*", groups=groups, mappings=mappings)
    sluice("capture", "--config", str(cfg), "--once")
    _exec(mariadb, f"CREATE DATABASE `{db}`")
    _exec(mariadb, *DDL, db=db)
    _pg_tables(mariadb, db, postgres, f"{db}_p4")
    _exec(mariadb, "SET time_zone = '+00:00'", *WORKLOAD, db=db)
    sluice("capture", "--config", str(cfg), "--once")
    yield {"cfg": cfg, "db": db}
    sysbench.drop_database(mariadb, db)
    for g, (kind, _) in GROUPS.items():
        if kind == "maria":
            sysbench.drop_database(mariadb_target, f"{db}_{g}")
    with _pg(postgres) as c:
        c.execute(f'DROP SCHEMA IF EXISTS "{db}_p4" CASCADE')


def _pg_tables(mariadb, db, postgres, schema) -> None:
    """The source's tables in PostgreSQL (docs/rdb.md's types), ``upd`` stamped by a trigger."""
    with sysbench.connect(mariadb, db) as c, c.cursor() as cur, _pg(postgres) as pg:
        pg.execute(f'CREATE SCHEMA "{schema}"')
        pg.execute(f'CREATE FUNCTION "{schema}".stamp() RETURNS trigger LANGUAGE plpgsql AS '
                   "$$ BEGIN NEW.upd := clock_timestamp(); RETURN NEW; END $$")
        for table in ("t", "u", "nk"):
            cur.execute("SELECT COLUMN_NAME, COLUMN_TYPE, COLUMN_KEY FROM information_schema.COLUMNS WHERE "
                        f"TABLE_SCHEMA = '{db}' AND TABLE_NAME = '{table}' ORDER BY ORDINAL_POSITION")
            cols = cur.fetchall()
            keys = [f"PRIMARY KEY ({c})" for c, _, k in cols if k == "PRI"]
            keys += [f"UNIQUE ({c})" for c, _, k in cols if k == "UNI"]
            ddl = ", ".join([*(f'"{c}" {suggest_type("postgresql", t)}' for c, t, _ in cols), *keys])
            pg.execute(f'CREATE TABLE "{schema}"."{table}" ({ddl})')
            pg.execute(f'CREATE TRIGGER stamp_{table} BEFORE UPDATE ON "{schema}"."{table}" '
                       f'FOR EACH ROW EXECUTE FUNCTION "{schema}".stamp()')


def _sync(cfg, group: str, check: bool = True):
    return sluice("sync", "--config", str(cfg), "--group", group, "--partitions", str(GROUPS[group][1]),
                  "--json", check=check)


def _cursor(cfg, group: str) -> int:
    st = json.loads(sluice("store", "status", "--config", str(cfg), "--json").stdout)
    return st["groups"].get(group, {}).get("cursor", 0)


def _diff(d, group, mariadb, mariadb_target, postgres) -> dict:
    if GROUPS[group][0] == "maria":
        return diff_databases(mariadb, d["db"], mariadb_target, f"{d['db']}_{group}")
    return pg_diff(mariadb, d["db"], postgres, f"{d['db']}_{group}")


def _assert_equal(d, group, mariadb, mariadb_target, postgres) -> None:
    diff = _diff(d, group, mariadb, mariadb_target, postgres)
    assert set(diff) == {"t", "u", "nk"} and all(v == 0 for v in diff.values()), diff


def test_updates_keep_the_source_stamps(stamped, mariadb, mariadb_target, postgres):
    """The MariaDB mirror's own ON UPDATE clauses stamp nothing (one Spark partition)."""
    _sync(stamped["cfg"], "m1")
    _assert_equal(stamped, "m1", mariadb, mariadb_target, postgres)


@pytest.mark.parametrize("group", ["m4", "p4"])
def test_a_target_trigger_is_refused_by_name_until_removed(stamped, group, mariadb, mariadb_target, postgres):
    d = stamped
    tdb = f"{d['db']}_{group}"
    proc = _sync(d["cfg"], group, check=False)
    assert proc.returncode == 2, proc.stderr
    table, trigger = ("t", "bump") if group == "m4" else ("nk", "stamp_nk")
    assert f"{tdb}.{table}" in proc.stderr and trigger in proc.stderr and "Traceback" not in proc.stderr
    assert _cursor(d["cfg"], group) == 0
    if group == "m4":
        _exec(mariadb_target, "DROP TRIGGER bump", db=tdb)
    else:
        with _pg(postgres) as c:
            for t in ("t", "u", "nk"):
                c.execute(f'ALTER TABLE "{tdb}"."{t}" DISABLE TRIGGER stamp_{t}')
    _sync(d["cfg"], group)
    _assert_equal(d, group, mariadb, mariadb_target, postgres)
