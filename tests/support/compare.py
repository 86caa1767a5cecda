"""Compare a source table with its replica row by row (every column, every row)."""

from __future__ import annotations

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
        return _rows(conn, f"SELECT * FROM `{database}`.`{table}` ORDER BY {order_by}")
    finally:
        conn.close()


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
        a, b = table_rows(src, sdb, t), table_rows(dst, ddb, t) if t in tables_of(dst, ddb) else []
        sa, sb = set(a), set(b)
        out[t] = len(sa ^ sb) + abs(len(a) - len(sa)) + abs(len(b) - len(sb))
    return out
