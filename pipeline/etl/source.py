"""Source connections and table metadata for a full load.

The load reads from the deployment's ``source`` (the server whose binlog is captured), so
the load and the stream see the same data. Connections return raw text (no pymysql result
converters, see :mod:`pipeline.etl.values`) and run with ``time_zone='+00:00'``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pymysql
import pymysql.cursors

from pipeline.config import SourceConfig
from pipeline.errors import SourceError, TransientError
from pipeline.etl.values import RAW_CONV, SourceColumn, session_sql

#: pymysql/MySQL client errors that mean "the connection broke": worth a retry
TRANSIENT_CODES = frozenset({1205, 1213, 1040, 1053, 1317, 1927, 4031, 2002, 2003, 2006, 2013, 2055, 0})


def connect(src: SourceConfig, *, stream: bool = False) -> pymysql.connections.Connection:
    """A reading connection: raw text results, UTC session, autocommit (each page its own read)."""
    try:
        conn = pymysql.connect(host=src.host, port=src.port, user=src.user, password=src.password.reveal(),
                               connect_timeout=src.connectTimeout, autocommit=True, charset="utf8mb4",
                               ssl=src.ssl or None, conv=RAW_CONV,
                               cursorclass=pymysql.cursors.SSCursor if stream else pymysql.cursors.Cursor)
    except pymysql.MySQLError as e:
        code = e.args[0] if e.args and isinstance(e.args[0], int) else None
        cls = TransientError if code in TRANSIENT_CODES else SourceError
        raise cls(f"cannot connect to the source {src.user}@{src.host}:{src.port}: {e.args[-1]}",
                  hint="check source.host/port/user/password in the config and that the server is running") \
            from None
    with conn.cursor(pymysql.cursors.Cursor) as cur:
        for s in session_sql():
            cur.execute(s)
    return conn


def is_transient(e: BaseException) -> bool:
    if isinstance(e, pymysql.err.InterfaceError):
        return True
    code = e.args[0] if getattr(e, "args", None) and isinstance(e.args[0], int) else None
    return isinstance(e, pymysql.MySQLError) and code in TRANSIENT_CODES


def qi(name: str) -> str:
    """A quoted MySQL identifier."""
    return "`" + name.replace("`", "``") + "`"


@dataclass(frozen=True)
class TableMeta:
    """One source table: its columns (in order), primary key and estimated row count."""

    database: str
    table: str
    columns: tuple[SourceColumn, ...]
    pk: tuple[str, ...]
    est_rows: int = 0

    @property
    def qualified(self) -> str:
        return f"{qi(self.database)}.{qi(self.table)}"

    @property
    def label(self) -> str:
        return f"{self.database}.{self.table}"

    def column(self, name: str) -> SourceColumn:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)

    def mysql_types(self) -> dict[str, str]:
        return {c.name: c.mysql_type() for c in self.columns}


def tables_of(conn, database: str) -> list[str]:
    """The base tables of a database, by name."""
    with conn.cursor(pymysql.cursors.Cursor) as cur:
        cur.execute("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA=%s "
                    "AND TABLE_TYPE='BASE TABLE' ORDER BY TABLE_NAME", (database,))
        return [_s(r[0]) for r in cur.fetchall()]


def _s(v) -> str:
    return v.decode() if isinstance(v, bytes | bytearray) else str(v)


def table_meta(conn, database: str, table: str) -> TableMeta | None:
    """Columns, primary key (in key order) and the row estimate of a table; None if missing."""
    with conn.cursor(pymysql.cursors.Cursor) as cur:
        cur.execute("SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE FROM information_schema.COLUMNS "
                    "WHERE TABLE_SCHEMA=%s AND TABLE_NAME=%s ORDER BY ORDINAL_POSITION", (database, table))
        cols = tuple(SourceColumn(_s(n), _s(d).lower(), _s(t).lower()) for n, d, t in cur.fetchall())
        if not cols:
            return None
        cur.execute("SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA=%s "
                    "AND TABLE_NAME=%s AND INDEX_NAME='PRIMARY' ORDER BY SEQ_IN_INDEX", (database, table))
        pk = tuple(_s(r[0]) for r in cur.fetchall())
        cur.execute("SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA=%s AND TABLE_NAME=%s",
                    (database, table))
        row = cur.fetchone()
        est = int(row[0] or 0) if row else 0
    return TableMeta(database, table, cols, pk, est)
