"""What the source's catalog says about databases and tables, for every part that asks: the ETL
plan, the job's pre-flight and refusals, repair. One query each; ``tables``/``schema_exists`` on a
cursor the caller holds, ``tables_of``/``database_exists`` on a connection (text or raw-bytes
results alike)."""

from __future__ import annotations

import pymysql


def _s(v) -> str:
    return v.decode() if isinstance(v, bytes | bytearray) else str(v)


def tables(cur, database: str) -> list[str]:
    """The base tables of a database, by name."""
    cur.execute("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA=%s "
                "AND TABLE_TYPE='BASE TABLE' ORDER BY TABLE_NAME", (database,))
    return [_s(r[0]) for r in cur.fetchall()]


def schema_exists(cur, database: str) -> bool:
    """Whether the source has the database (an empty one too)."""
    cur.execute("SELECT 1 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME=%s", (database,))
    return cur.fetchone() is not None


def tables_of(conn, database: str) -> list[str]:
    """:func:`tables` on a connection."""
    with conn.cursor(pymysql.cursors.Cursor) as cur:
        return tables(cur, database)


def database_exists(conn, database: str) -> bool:
    """:func:`schema_exists` on a connection."""
    with conn.cursor(pymysql.cursors.Cursor) as cur:
        return schema_exists(cur, database)
