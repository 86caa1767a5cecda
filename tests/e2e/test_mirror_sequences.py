"""MariaDB sequences through the whole pipeline -- issue 35, case 8.

``CREATE/ALTER/DROP SEQUENCE`` (capture stores them as ``QUERY`` statements) are replayed on the
MariaDB mirrors, a table whose DEFAULT takes ``NEXTVAL`` of a sequence is created after it, and
every sequence state the binlog logs as a row INSERT (cache refills, ``SETVAL``, a cycling
sequence's ``cycle_count``) leaves the mirror's sequence row equal to the source's, with 1 and
4 Spark partitions. A PostgreSQL mirror (tables and sequences created by hand: PostgreSQL never
replays MySQL DDL) gets each sequence's next value (``setval``).
"""

from __future__ import annotations

import uuid

import psycopg
import pytest

from tests.support import sysbench
from tests.support.compare import diff_databases, pg_diff, table_rows
from tests.support.deploy import rdb_adapter, sluice, write_deployment
from tests.support.matrix import FULL

WORKLOAD = [
    "CREATE SEQUENCE s1 START WITH 100 INCREMENT BY 5 CACHE 3",
    "CREATE TABLE o (id BIGINT NOT NULL DEFAULT NEXTVAL(s1) PRIMARY KEY, v INT)",
    *[f"INSERT INTO o (v) VALUES ({i})" for i in range(1, 11)],
    "SELECT SETVAL(s1, 1000)",
    "INSERT INTO o (v) VALUES (11), (12)",
    "ALTER SEQUENCE s1 RESTART WITH 7",
    "SELECT NEXTVAL(s1)",
    "ALTER SEQUENCE s1 INCREMENT BY 2",
    "INSERT INTO o (v) VALUES (13)",
    "CREATE SEQUENCE s2 CACHE 2",
    "SELECT NEXTVAL(s2)", "SELECT NEXTVAL(s2)", "SELECT NEXTVAL(s2)",
    "DROP SEQUENCE s2",
    "CREATE SEQUENCE s3 START WITH 1 MAXVALUE 3 CYCLE CACHE 1",
    *["SELECT NEXTVAL(s3)"] * 7,
]
#: group -> (target kind, Spark partitions); the MariaDB mirror with 1 partition too with SLUICE_E2E_FULL=1
GROUPS = {**({"m1": ("maria", 1)} if FULL else {}), "m4": ("maria", 4), "p1": ("pg", 1)}
SEQUENCES = ("s1", "s3")


def _pg(postgres):
    return psycopg.connect(host=postgres["host"], port=postgres["port"], user=postgres["user"],
                           password=postgres["password"], dbname=postgres["database"], autocommit=True)


def _exec(info, *stmts, db=None):
    with sysbench.connect(info, db) as c, c.cursor() as cur:
        for s in stmts:
            cur.execute(s)


@pytest.fixture(scope="module")
def sequenced(tmp_path_factory, mariadb, mariadb_target, postgres):
    tmp = tmp_path_factory.mktemp("seq")
    db = f"seq_{uuid.uuid4().hex[:6]}"
    groups, mappings = [], {}
    for g, (kind, _) in GROUPS.items():
        tdb = f"{db}_{g}"
        if kind == "maria":
            sysbench.create_database(mariadb_target, tdb)
            adapter = rdb_adapter(mariadb_target, g, tdb)
        else:
            with _pg(postgres) as c:
                c.execute(f'CREATE SCHEMA "{tdb}"')
                for s in ("s1", "s2", "s3"):
                    c.execute(f'CREATE SEQUENCE "{tdb}".{s}')
                c.execute(f'CREATE TABLE "{tdb}".o (id bigint PRIMARY KEY DEFAULT nextval(\'"{tdb}".s1\'), v integer)')
            adapter = rdb_adapter(postgres, g, postgres["database"], dialect="postgresql")
        mappings[f"{g}.yml"] = {"groupId": g, "outerAdapterKey": g,
                                "dbMapping": {"mirrorDb": True, "database": db, "targetDb": tdb}}
        groups.append({"groupId": g, "outerAdapters": [adapter], "mappings": [f"mappings/{g}.yml"]})
    cfg = write_deployment(tmp, mariadb, name=db, include=rf"{db}\..*", groups=groups, mappings=mappings)
    sluice("capture", "--config", str(cfg), "--once")
    _exec(mariadb, f"CREATE DATABASE `{db}`")
    _exec(mariadb, *WORKLOAD, db=db)
    sluice("capture", "--config", str(cfg), "--once")
    yield {"cfg": cfg, "db": db}
    sysbench.drop_database(mariadb, db)
    for g, (kind, _) in GROUPS.items():
        if kind == "maria":
            sysbench.drop_database(mariadb_target, f"{db}_{g}")
        else:
            with _pg(postgres) as c:
                c.execute(f'DROP SCHEMA "{db}_{g}" CASCADE')


def _sync(d, group: str) -> None:
    sluice("sync", "--config", str(d["cfg"]), "--group", group, "--partitions", str(GROUPS[group][1]))


@pytest.mark.parametrize("group", [g for g in GROUPS if g.startswith("m")])
def test_sequences_reach_a_mariadb_mirror(sequenced, group, mariadb, mariadb_target):
    d = sequenced
    _sync(d, group)
    tdb = f"{d['db']}_{group}"
    diff = diff_databases(mariadb, d["db"], mariadb_target, tdb)
    assert diff == {"o": 0, "s1": 0, "s3": 0}, diff
    assert table_rows(mariadb_target, tdb, "s3")[0][-1] == 2  # cycle_count: the sequence wrapped twice
    with sysbench.connect(mariadb_target, tdb) as c, c.cursor() as cur:  # the mirror's objects are sequences
        cur.execute(f"SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = '{tdb}' AND "
                    "TABLE_TYPE = 'SEQUENCE' ORDER BY 1")
        assert [r[0] for r in cur.fetchall()] == list(SEQUENCES)
        cur.execute("INSERT INTO o (v) VALUES (99)")  # the DEFAULT takes the mirrored sequence's next value
        cur.execute("SELECT id FROM o WHERE v = 99")
        assert cur.fetchone()[0] == table_rows(mariadb, d["db"], "s1")[0][0]


def test_sequence_values_reach_postgresql(sequenced, mariadb, postgres):
    d = sequenced
    _sync(d, "p1")
    schema = f"{d['db']}_p1"
    assert pg_diff(mariadb, d["db"], postgres, schema, skip=SEQUENCES) == {"o": 0}
    with _pg(postgres) as c:
        for s in SEQUENCES:
            got = c.execute(f'SELECT last_value, is_called FROM "{schema}".{s}').fetchone()
            assert got == (table_rows(mariadb, d["db"], s)[0][0], False), s
