"""MySQL/MariaDB INSERT and UPDATE rows rendered as SQL literals, column by column (the hot path).

Through bound parameters pymysql renders every value on its own: a type dispatch, an escape
call and a ``%`` substitution per value, after the plan converted the Dml string to a Python
value; for a chunk of single-row INSERTs that is about half of the executor's time. Here
the plan's column rules are applied to whole columns of a chunk: an integer column is
``int()``-checked and written with ``%d``, a text column goes through pymysql's own
``escape_string`` into quotes, and every other column (binary, FLOAT, NULLs) through the
connection's ``escape`` of the converted value, exactly as a bound parameter would be. The
statement runs through SQLAlchemy like any other (its transaction, its error translation) with
an empty parameter tuple, so the caller doubles ``%`` for the driver's interpolation.

Anything unusual (a server in NO_BACKSLASH_ESCAPES mode, a driver other than pymysql, a value
the converters refuse) returns ``None`` and the caller uses the parameter path.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any

from adapters.base import Change
from adapters.rdb.plan import Plan
from adapters.rdb.values import is_int_converter

try:  # the MySQL driver (adapters/rdb/config.py DRIVERS)
    import pymysql
    from pymysql.constants.SERVER_STATUS import SERVER_STATUS_NO_BACKSLASH_ESCAPES
    from pymysql.converters import escape_string
except ImportError:  # pragma: no cover - a dependency of the package
    pymysql = None


def driver_connection(conn: Any) -> Any | None:
    """The pymysql connection under a SQLAlchemy connection, if it can take rendered SQL."""
    raw = getattr(conn.connection, "dbapi_connection", None)
    if pymysql is None or not isinstance(raw, pymysql.connections.Connection):
        return None
    if raw.server_status & SERVER_STATUS_NO_BACKSLASH_ESCAPES:
        return None
    return raw


def _column(values: list, conv, raw: Any) -> tuple[str, list]:
    """The row-format piece and the substituted values of one column."""
    if None in values:
        escape = raw.escape
        if conv is None:
            return "%s", [escape(v) for v in values]
        return "%s", [escape(conv(v)) for v in values]
    if conv is None:
        return "'%s'", list(map(escape_string, values))
    if is_int_converter(conv):
        return "%d", list(map(int, values))
    escape = raw.escape
    return "%s", [escape(conv(v)) for v in values]


def _columns(plan: Plan, changes: list[Change], positions, raw: Any) -> list[tuple[str, list]] | None:
    """``(piece, values)`` of the columns at ``positions`` (in ``plan.src``), or None if a value
    does not convert or render (e.g. int('x'), or pymysql refusing a float inf): the parameter
    path then raises the same error through SQLAlchemy, where it is classified per row."""
    datas = [c.data for c in changes]
    try:
        return [_column(list(map(itemgetter(plan.src[i]), datas)), plan.convs[i], raw) for i in positions]
    except Exception:  # noqa: BLE001 - see above
        return None


def insert_values(plan: Plan, changes: list[Change], raw: Any) -> str | None:
    """``(..), (..)`` of the changes' rows in ``plan.src`` order, or None if a value does not
    convert or render (the parameter path then names the row and column)."""
    cols = _columns(plan, changes, range(len(plan.src)), raw)
    if cols is None:
        return None
    fmt = "(" + ",".join(piece for piece, _ in cols) + ")"
    return ",".join([fmt % r for r in zip(*(v for _, v in cols), strict=True)])


def literal_columns(plan: Plan, changes: list[Change], positions: tuple[int, ...], raw: Any) -> list[list[str]] | None:
    """The SQL literal of every value of the columns at ``positions``, one list per column,
    rendered as :func:`insert_values` renders them; None as there."""
    cols = _columns(plan, changes, positions, raw)
    if cols is None:
        return None
    return [v if piece == "%s" else list(map(piece.__mod__, v)) for piece, v in cols]
