"""Compare a source table with its replica row by row (every column, every row)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pymysql


def _rows(conn, sql: str) -> list[tuple]:
    with conn.cursor() as cur:
        cur.execute(sql)
        return list(cur.fetchall())


def table_rows(info: dict[str, Any], database: str, table: str, order_by: str = "1") -> list[tuple]:
    """All rows of a MariaDB table, ordered."""
    conn = pymysql.connect(host=info["host"], port=int(info["port"]), user=info["user"],
                           password=info["password"], charset="utf8mb4")
    try:
        return _rows(conn, f"SELECT * FROM {_q(database)}.{_q(table)} ORDER BY {order_by}")
    finally:
        conn.close()


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def tables_of(info: dict[str, Any], database: str) -> list[str]:
    conn = pymysql.connect(host=info["host"], port=int(info["port"]), user=info["user"],
                           password=info["password"], charset="utf8mb4")
    try:
        return [r[0] for r in _rows(conn, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE "
                                          f"TABLE_SCHEMA='{database}' ORDER BY 1")]
    finally:
        conn.close()


def diff_databases(src: dict[str, Any], sdb: str, dst: dict[str, Any], ddb: str) -> dict[str, int]:
    """{table: number of differing rows} for every table of the source database (0 = equal)."""
    out = {}
    for t in tables_of(src, sdb):
        a, b = Counter(table_rows(src, sdb, t)), Counter(table_rows(dst, ddb, t) if t in tables_of(dst, ddb) else [])
        out[t] = sum(((a - b) + (b - a)).values())  # rows as multisets: tables without a key repeat rows
    return out


_TIMES = ("datetime", "timestamp")


def _text_rows_mariadb(info: dict[str, Any], database: str, table: str
                       ) -> tuple[list[tuple[str, str]], list[tuple]]:
    """``[(column, data type)]`` and every row as text (DATETIME/TIMESTAMP with microseconds, in UTC)."""
    conn = pymysql.connect(host=info["host"], port=int(info["port"]), user=info["user"],
                           password=info["password"], charset="utf8mb4")
    try:
        cols = [(r[0], r[1]) for r in _rows(conn, "SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS "
                                                  f"WHERE TABLE_SCHEMA='{database}' AND TABLE_NAME='{table}' "
                                                  "ORDER BY ORDINAL_POSITION")]
        text = ", ".join(f"DATE_FORMAT({_q(c)}, '%Y-%m-%d %H:%i:%s.%f')" if t in _TIMES else f"CAST({_q(c)} AS CHAR)"
                         for c, t in cols)
        _rows(conn, "SET time_zone = '+00:00'")
        return cols, _rows(conn, f"SELECT {text} FROM {_q(database)}.{_q(table)}")
    finally:
        conn.close()


def pg_diff(src: dict[str, Any], sdb: str, pg: dict[str, Any], schema: str, skip: tuple[str, ...] = ()
            ) -> dict[str, int]:
    """{table: differing rows} between a MariaDB database and a PostgreSQL schema holding the same
    tables and columns, comparing every value as text (exact strings: case, accents, spaces;
    DATETIME/TIMESTAMP to the microsecond, in UTC); ``skip``: source tables left out."""
    import psycopg

    out = {}
    with psycopg.connect(host=pg["host"], port=pg["port"], user=pg["user"], password=pg["password"],
                         dbname=pg["database"], autocommit=True) as c:
        c.execute("SET TimeZone = 'UTC'")
        for t in tables_of(src, sdb):
            if t in skip:
                continue
            cols, a = _text_rows_mariadb(src, sdb, t)
            text = ", ".join(f"""to_char("{col}", 'YYYY-MM-DD HH24:MI:SS.US')""" if typ in _TIMES else f'"{col}"::text'
                             for col, typ in cols)
            b = [tuple(r) for r in c.execute(f'SELECT {text} FROM "{schema}"."{t}"').fetchall()]
            ca, cb = Counter(map(tuple, a)), Counter(b)
            out[t] = sum(((ca - cb) + (cb - ca)).values())
    return out
