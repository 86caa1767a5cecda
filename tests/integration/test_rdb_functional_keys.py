"""Unique keys on expressions are unique keys: the reflection of a MySQL target (functional key
parts, information_schema.STATISTICS.EXPRESSION) and of a PostgreSQL target (expression indexes)
lists them, so a table with one besides its primary key is applied as an ordered table (a value
moving between rows converges, tests/e2e/test_functional_keys.py)."""

from __future__ import annotations

import uuid

import pytest

from adapters.rdb.client import engine_for
from adapters.rdb.config import RdbTarget
from adapters.rdb.schema import reset_caches, table_info
from sluice_common.secrets import Secret
from tests.support import sysbench


@pytest.fixture
def mysql_table(mysql_target):
    db = f"fk_{uuid.uuid4().hex[:6]}"
    sysbench.create_database(mysql_target, db)
    with sysbench.connect(mysql_target, db) as c, c.cursor() as cur:
        cur.execute("CREATE TABLE f (id INT PRIMARY KEY, doc JSON, e VARCHAR(10), "
                    "UNIQUE KEY uj ((CAST(doc->>'$.code' AS CHAR(20)) COLLATE utf8mb4_bin)), "
                    "UNIQUE KEY um (id, (LOWER(e))))")
    yield RdbTarget.from_url(f"mysql+pymysql://{mysql_target['user']}@127.0.0.1:{mysql_target['port']}/{db}",
                             password=Secret(mysql_target["password"])), db
    sysbench.drop_database(mysql_target, db)


def test_mysql_functional_key_parts(mysql_table):
    target, db = mysql_table
    reset_caches()
    with engine_for(target).connect() as conn:
        info = table_info(conn, target, "mysql", db, "f")
    assert info.pk == ("id",)
    assert dict(zip(info.unique_names, info.unique, strict=True)) == {
        "PRIMARY": ("id",),
        "uj": ("((cast(json_unquote(json_extract(`doc`,_utf8mb4\\'$.code\\')) as char(20) charset utf8mb4) "
               "collate utf8mb4_bin))",),
        "um": ("id", "(lower(`e`))")}


def test_postgresql_expression_indexes(postgres):
    schema = f"fk_{uuid.uuid4().hex[:6]}"
    target = RdbTarget.from_url(f"postgresql+psycopg://{postgres['user']}@127.0.0.1:{postgres['port']}/"
                                f"{postgres['database']}", password=Secret(postgres["password"]))
    reset_caches()
    with engine_for(target).begin() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
        try:
            conn.exec_driver_sql(f'CREATE TABLE "{schema}".f (id INT PRIMARY KEY, doc JSONB, e TEXT)')
            conn.exec_driver_sql(f'CREATE UNIQUE INDEX uj ON "{schema}".f ((doc->>\'code\'))')
            conn.exec_driver_sql(f'CREATE UNIQUE INDEX um ON "{schema}".f (id, lower(e))')
            info = table_info(conn, target, "postgresql", schema, "f")
            assert dict(zip(info.unique_names, info.unique, strict=True)) == {
                "f_pkey": ("id",), "uj": ("((doc ->> 'code'::text))",), "um": ("id", "(lower(e))")}
        finally:
            conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
