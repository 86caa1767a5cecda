"""The SQL of a chunked table compare, the same on the source and on an RDB target.

``sluice verify`` (adapters/rdb/verify.py) and ``sluice repair`` (pipeline/repair/) walk a table
by its key in chunks and compare each chunk on both sides: both sides run these statements over a
plain DB-API connection (pymysql on the source; pymysql, psycopg or sqlite3 on a target), so they
are written once here, below both.

* :class:`Side`: one end, its identifier quoting and placeholder by dialect name;
* :func:`range_clause`: ``lo < key <= hi`` as expanded comparisons;
* :func:`boundaries`: the upper bounds of successive chunks in key order;
* :func:`checksum_sql`: ``COUNT(*)`` and the ``BIT_XOR`` of 64 bits of each row's SHA-256
  (pt-table-checksum's expression with ``SHA2``: MySQL 9.7 has ``MD5`` only in a component a server
  may not load), which a MySQL/MariaDB target computes as the source does;
* :func:`select_list`: the select list (a MySQL/MariaDB side reads FLOAT as ``DOUBLE``).
"""

from __future__ import annotations

from typing import Any

from sluice_common.mysqltypes import quote_ident
from sluice_common.normalize import normalize_row


class Side:
    """One end of the comparison: a DBAPI connection, its quoting and placeholder."""

    def __init__(self, conn: Any, dialect: str):
        self.conn, self.dialect = conn, dialect
        self.ph = "?" if dialect == "sqlite" else "%s"

    def q(self, name: str) -> str:
        if self.dialect in ("mysql", "mariadb"):
            return quote_ident(name)
        return '"' + name.replace('"', '""') + '"'

    def table(self, schema: str | None, name: str) -> str:
        return f"{self.q(schema)}.{self.q(name)}" if schema else self.q(name)

    def rows(self, sql: str, params: list) -> list[tuple]:
        cur = self.conn.cursor()
        try:
            cur.execute(sql, params) if params else cur.execute(sql)
            return list(cur.fetchall())
        finally:
            cur.close()


def range_clause(side: Side, cols: list[str], lo: tuple | None, hi: tuple | None) -> tuple[str, list]:
    """``lo < key <= hi`` as expanded comparisons (row constructors are not indexed everywhere)."""
    parts, params = [], []
    qc = [side.q(c) for c in cols]
    for bound, op_last, inclusive in ((lo, ">", False), (hi, "<", True)):
        if bound is None:
            continue
        ors = []
        for i in range(len(cols)):
            eqs = [f"{qc[j]} = {side.ph}" for j in range(i)]
            ors.append("(" + " AND ".join([*eqs, f"{qc[i]} {op_last} {side.ph}"]) + ")")
            params.extend([*bound[:i], bound[i]])
        if inclusive:
            ors.append("(" + " AND ".join(f"{c} = {side.ph}" for c in qc) + ")")
            params.extend(bound)
        parts.append("(" + " OR ".join(ors) + ")")
    return (" AND ".join(parts) or "1=1"), params


def boundaries(src: Side, table: str, keys: list[str], chunk: int) -> list[tuple]:
    """Upper bounds of successive chunks of ``chunk`` rows in key order (on the source)."""
    kc = ", ".join(src.q(k) for k in keys)
    out: list[tuple] = []
    last: tuple | None = None
    while True:
        where, params = range_clause(src, keys, last, None)
        rows = src.rows(f"SELECT {kc} FROM {table} WHERE {where} ORDER BY {kc} LIMIT 1 OFFSET {chunk - 1}", params)
        if not rows:
            return out
        last = tuple(rows[0])
        out.append(last)


def checksum_sql(side: Side, table: str, cols: list[str], where: str) -> str:
    qc = [side.q(c) for c in cols]
    nulls = "CONCAT(" + ", ".join(f"ISNULL({c})" for c in qc) + ")"
    row = f"CONCAT_WS('#', {', '.join(qc)}, {nulls})"
    bits = f"CAST(CONV(SUBSTRING(SHA2({row}, 256), 1, 16), 16, 10) AS UNSIGNED)"
    return f"SELECT COUNT(*), COALESCE(BIT_XOR({bits}), 0) FROM {table} WHERE {where}"


def select_list(side: Side, cols: list[str], floats: list[bool] | None = None) -> str:
    """The select list; a MySQL/MariaDB side reads FLOAT columns as ``CAST(col AS DOUBLE)``: their
    text has 6 significant digits, which is not the stored float32 that capture and the full load
    copy (docs/capture.md, "Value encoding")."""
    mysql = side.dialect in ("mysql", "mariadb")
    return ", ".join(f"CAST({side.q(c)} AS DOUBLE)" if mysql and floats and floats[i] else side.q(c)
                     for i, c in enumerate(cols))


def keyed(rows: list, funcs: list, nkey: int) -> tuple[dict[tuple, tuple], dict[tuple, tuple]]:
    """``(normalized key -> normalized row, normalized key -> the key as read)`` of ``rows``
    (:func:`sluice_common.normalize.normalize_row` with ``funcs``; the key is the first ``nkey``)."""
    out, raw = {}, {}
    for r in rows:
        n = normalize_row(tuple(r), funcs)
        out[n[:nkey]], raw[n[:nkey]] = n, tuple(r[:nkey])
    return out, raw


def point_row(side: Side, table: str, keys: list[str], select: str, funcs: list, key: tuple) -> tuple | None:
    """The normalized row of ``table`` whose key is ``key`` (as the other side read it: a key another
    collation sorted into another chunk), or None."""
    if any(v is None for v in key):
        return None
    where = " AND ".join(f"{side.q(k)} = {side.ph}" for k in keys)
    rows = side.rows(f"SELECT {select} FROM {table} WHERE {where}", list(key))
    return normalize_row(tuple(rows[0]), funcs) if len(rows) == 1 else None
