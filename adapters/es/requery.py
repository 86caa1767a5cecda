"""Re-running the mapping SQL on the source database, batched, and evaluating computed ids.

* :func:`requery` runs ``<mapping SQL> WHERE (alias.col, ...) IN ((...), ...)`` in batches
  and streams the rows (``fetchmany``), each as ``(values, type codes)``.
* :func:`evaluate` computes fields such as ``concat('oid_', t.id)`` for row images that no
  longer exist in the source (a DELETE): ``SELECT <expr> FROM (SELECT CAST(%s AS <type>) AS
  id ... UNION ALL ...) AS t``, with each column cast to its own MySQL type, so the value
  equals what the mapping SQL gave while the row existed.

Connections are pooled per executor process and per :class:`SourceDb`, in autocommit mode
(every query sees the latest committed state, never an old snapshot), ``time_zone='+00:00'``
(TIMESTAMP values in UTC, like the capture's), utf8mb4 and the source's TLS settings
(:mod:`pipeline.source.connect`).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pymysql

from adapters.es.config import SourceDb
from adapters.es.failures import source_error
from sluice_common.mysqlconn import UTC_SESSION, params
from sluice_common.mysqltypes import BINARY_TYPES, DECIMAL_TYPES, FLOAT_TYPES, INTEGER_TYPES, parse_type
from sluice_common.mysqltypes import quote_ident as q

IN_BATCH = 500
FETCH = 1000
_pool: dict[SourceDb, list[pymysql.connections.Connection]] = {}
_lock = threading.Lock()


def _connect(src: SourceDb) -> pymysql.connections.Connection:
    try:
        return pymysql.connect(**params(src.host, src.port, src.user, src.password, src.connect_timeout,
                                        dict(src.ssl)),
                               database=src.database, charset="utf8mb4", autocommit=True, binary_prefix=True,
                               init_command=UTC_SESSION)
    except pymysql.MySQLError as e:
        raise source_error(e, f"connecting to the source {src.label} to re-query") from None


@contextmanager
def connection(src: SourceDb) -> Iterator[pymysql.connections.Connection]:
    """A pooled connection to ``src`` (returned to the pool unless it failed)."""
    with _lock:
        idle = _pool.setdefault(src, [])
        conn = idle.pop() if idle else None
    if conn is None:
        conn = _connect(src)
    ok = False
    try:
        yield conn
        ok = True
    finally:
        if ok:
            with _lock:
                _pool.setdefault(src, []).append(conn)
        else:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - it is already broken
                pass


def close_all() -> None:
    """Close every pooled source connection of this process."""
    with _lock:
        conns = [c for cs in _pool.values() for c in cs]
        _pool.clear()
    for c in conns:
        try:
            c.close()
        except Exception:  # noqa: BLE001
            pass


def strip_sql(sql: str) -> str:
    """The SQL without a trailing ``;`` or blanks."""
    return re.sub(r"[;\s]+$", "", sql)


def base_sql(sql: str) -> str:
    """The mapping SQL without a trailing ``;``, ready for ``\\nWHERE ...`` (``%`` escaped for
    pymysql's parameter substitution)."""
    return strip_sql(sql).replace("%", "%%")


def in_clause(columns: Sequence[tuple[str, str]], n: int) -> str:
    """``(a.x, b.y) IN ((%s,%s),...)`` for ``n`` tuples (``a.x IN (%s,...)`` for one column);
    ``columns`` are (alias, column) pairs."""
    cols = [f"{q(alias)}.{q(c)}" for alias, c in columns]
    if len(cols) == 1:
        return f"{cols[0]} IN ({','.join(['%s'] * n)})"
    one = "(" + ",".join(["%s"] * len(cols)) + ")"
    return f"({','.join(cols)}) IN ({','.join([one] * n)})"


def requery(src: SourceDb, database: str | None, sql: str, columns: Sequence[tuple[str, str]],
            keys: Sequence[tuple] | None, what: str) -> Iterator[tuple[list[str], list[int], tuple]]:
    """Rows of ``sql`` whose ``(alias, column)`` values equal one of ``keys`` (None: every
    row), as (names, type codes, values)."""
    if keys is not None:
        keys = list(dict.fromkeys(keys))
        if not keys:
            return
    base = base_sql(sql)
    with connection(src) as conn:
        try:
            if database and not src.database:
                conn.select_db(database)
            parts = [None] if keys is None else [keys[i:i + IN_BATCH] for i in range(0, len(keys), IN_BATCH)]
            for part in parts:
                stmt = base if part is None else f"{base}\nWHERE {in_clause(columns, len(part))}"
                params = () if part is None else [v for k in part for v in k]
                with conn.cursor(pymysql.cursors.SSCursor) as cur:
                    cur.execute(stmt, params)
                    names = [d[0] for d in cur.description]
                    codes = [d[1] for d in cur.description]
                    while True:
                        rows = cur.fetchmany(FETCH)
                        if not rows:
                            break
                        for row in rows:
                            yield names, codes, row
        except pymysql.MySQLError as e:
            raise source_error(e, what) from None


def cast_type(mysql_type: str | None) -> str | None:
    """The CAST target that gives a bound string the column's type (None: keep a string)."""
    t = parse_type(mysql_type)
    base, args = t.base, t.args
    if base in INTEGER_TYPES or base in ("bit", "year", "bool", "boolean"):
        return "UNSIGNED" if (t.unsigned or base == "bit") else "SIGNED"
    if base in DECIMAL_TYPES:
        return f"DECIMAL({args})" if args else "DECIMAL"
    if base in FLOAT_TYPES:
        return "DOUBLE"
    if base == "date":
        return "DATE"
    if base in ("datetime", "timestamp"):
        return f"DATETIME({args})" if args.isdigit() else "DATETIME"
    if base == "time":
        return f"TIME({args})" if args.isdigit() else "TIME"
    if base in BINARY_TYPES:
        return "BINARY"
    return None


def evaluate(src: SourceDb, alias: str, exprs: Sequence[str], images: Sequence[dict[str, Any]],
             types: dict[str, str], columns: Sequence[str], what: str) -> list[tuple[list[int], tuple]]:
    """Evaluate ``exprs`` (SQL over ``alias.columns``) for each row image, in order.

    ``images`` hold Dml strings by casefolded column name; ``types`` the columns' mysqlType.
    Returns, per image, (result type codes, values).
    """
    if not images:
        return []
    out: list[tuple[list[int], tuple]] = []
    select = ", ".join(f"{e.replace('%', '%%')} AS {q(f'__f{i}')}" for i, e in enumerate(exprs))
    with connection(src) as conn:
        try:
            for start in range(0, len(images), IN_BATCH):
                part = images[start:start + IN_BATCH]
                rows_sql, params = [], []
                for n, img in enumerate(part):
                    cols = [f"{n} AS {q('__sluice_n')}"]
                    for c in columns:
                        t = cast_type(types.get(c.casefold()))
                        v = img.get(c.casefold())
                        if t == "BINARY" and isinstance(v, str):
                            v = v.encode("latin-1")
                        cols.append(f"CAST(%s AS {t}) AS {q(c)}" if t else f"%s AS {q(c)}")
                        params.append(v)
                    rows_sql.append("SELECT " + ", ".join(cols))
                stmt = (f"SELECT {q('__sluice_n')}, {select} FROM ("
                        + " UNION ALL ".join(rows_sql) + f") AS {q(alias)} ORDER BY 1")
                with conn.cursor() as cur:
                    cur.execute(stmt, params)
                    codes = [d[1] for d in cur.description][1:]
                    out.extend((codes, tuple(r[1:])) for r in cur.fetchall())
        except pymysql.MySQLError as e:
            raise source_error(e, what) from None
    return out
