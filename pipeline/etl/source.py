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
from pipeline.etl.values import RAW_CONV, SourceColumn, session_sql
from pipeline.source.connect import TRANSIENT_CODES, is_transient  # noqa: F401 - part of this module's face
from pipeline.source.connect import connect as source_connect
from pipeline.source.mysqltypes import quote_ident as qi  # noqa: F401 - the etl modules' name


def connect(src: SourceConfig, *, stream: bool = False) -> pymysql.connections.Connection:
    """A reading connection: raw text results, UTC session, autocommit (each page its own read)."""
    return source_connect(src, session=session_sql(), transient=True, conv=RAW_CONV,
                          cursorclass=pymysql.cursors.SSCursor if stream else pymysql.cursors.Cursor)


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
