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
from pipeline.source import catalog
from pipeline.source.connect import TRANSIENT_CODES, is_transient  # noqa: F401 - part of this module's face
from pipeline.source.connect import connect as source_connect
from sluice_common.mysqltypes import quote_ident as qi  # noqa: F401 - the etl modules' name


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


def table_meta(conn, database: str, table: str) -> TableMeta | None:
    """Columns, primary key (in key order) and the row estimate of a table; None if missing."""
    with conn.cursor(pymysql.cursors.Cursor) as cur:
        cols = tuple(SourceColumn(c.name, c.data_type.lower(), c.column_type.lower())
                     for c in catalog.columns(cur, database, table))
        if not cols:
            return None
        pk = tuple(catalog.primary_key(cur, database, table))
        est = catalog.row_estimate(cur, database, table)
    return TableMeta(database, table, cols, pk, est)
