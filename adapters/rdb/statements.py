"""SQL text for the writer's few statement shapes, per dialect, cached by shape.

Identifiers are quoted by SQLAlchemy's identifier preparer for the engine's dialect
(``quote_identifier`` always quotes, doubling embedded quote characters); values are always
bound parameters. The multi-row statements are assembled here rather than compiled by
SQLAlchemy per call: compiling a 1000-row ``insert().values([...])`` costs more than
executing it (see docs/rdb.md, performance).
"""

from __future__ import annotations

from functools import lru_cache

from sqlalchemy import types as sa
from sqlalchemy.dialects import mysql as my
from sqlalchemy.dialects import postgresql as pg
from sqlalchemy.engine import Dialect as SaDialect

from adapters.rdb.dialects import Dialect, relaxed_prefix
from adapters.rdb.schema import ColumnInfo, TableInfo


class Sql:
    """Statement builder for one engine (dialect + SQLAlchemy dialect)."""

    def __init__(self, dialect: Dialect, sa_dialect: SaDialect):
        self.d = dialect
        self.family = dialect.family
        self.ph = dialect.placeholder
        self._prep = sa_dialect.identifier_preparer
        self.is_mariadb = bool(getattr(sa_dialect, "is_mariadb", False))
        self.q = lru_cache(maxsize=4096)(self._quote)

    def _quote(self, name: str) -> str:
        # SQLAlchemy's preparer also doubles '%' for format/pyformat drivers, which always
        # interpolate (exec_driver_sql passes parameters even when there are none)
        return self._prep.quote_identifier(name)

    def table(self, info: TableInfo) -> str:
        name = self.q(info.name)
        return f"{self.q(info.schema)}.{name}" if info.schema else name

    def value(self, col: ColumnInfo) -> str:
        """A placeholder typed like ``col`` where comparison/VALUES typing needs it."""
        if self.family == "postgresql" and col.cast:
            return f"CAST({self.ph} AS {col.cast})"
        if self.family == "mysql" and isinstance(col.type, my.FLOAT):
            return f"CAST({self.ph} AS FLOAT)"
        if self.family == "mysql" and isinstance(col.type, my.JSON) and not self.is_mariadb:
            return f"CAST({self.ph} AS JSON)"
        return self.ph

    def _eq(self, info: TableInfo, cols: tuple[str, ...], alias: str = "") -> str:
        return " AND ".join(f"{alias}{self.q(c)} = {self.value(info.columns[c])}" for c in cols)

    # -- INSERT --------------------------------------------------------------------------------
    def insert(self, info: TableInfo, cols: tuple[str, ...], nrows: int, skip_on: tuple[str, ...] = ()) -> str:
        row = "(" + ", ".join([self.ph] * len(cols)) + ")"
        sql = (f"INSERT INTO {self.table(info)} ({', '.join(self.q(c) for c in cols)}) VALUES "
               + ", ".join([row] * nrows))
        if skip_on:
            sql += f" ON CONFLICT ({', '.join(self.q(c) for c in skip_on)}) DO NOTHING"
        return sql

    def upsert(self, info: TableInfo, cols: tuple[str, ...], nrows: int, key: tuple[str, ...]) -> str:
        """PostgreSQL/SQLite: insert, or overwrite every non-key column of the row with the same
        primary key (``ON CONFLICT (pk) DO UPDATE``; a conflict on another unique key still fails)."""
        sets = [c for c in cols if c not in key]
        sql = self.insert(info, cols, nrows)
        target = ", ".join(self.q(c) for c in key)
        if not sets:
            return sql + f" ON CONFLICT ({target}) DO NOTHING"
        assign = ", ".join(f"{self.q(c)} = EXCLUDED.{self.q(c)}" for c in sets)
        return sql + f" ON CONFLICT ({target}) DO UPDATE SET {assign}"

    def exists_probe(self, info: TableInfo, key: tuple[str, ...], nrows: int) -> str:
        """Which of ``nrows`` keys exist: returns the row positions (MySQL duplicate path)."""
        where = self._eq(info, key)
        return " UNION ALL ".join(f"SELECT {i} FROM {self.table(info)} WHERE {where}" for i in range(nrows))

    # -- UPDATE --------------------------------------------------------------------------------
    def update_row(self, info: TableInfo, key: tuple[str, ...], sets: tuple[str, ...]) -> str:
        assign = ", ".join(f"{self.q(c)} = {self.ph}" for c in sets)
        return f"UPDATE {self.table(info)} SET {assign} WHERE {self._eq(info, key)}"

    def update_set(self, info: TableInfo, key: tuple[str, ...], sets: tuple[str, ...], nrows: int) -> str:
        """One statement updating ``nrows`` rows (distinct keys): params are key + set values per row."""
        names = [f"k{i}" for i in range(len(key))] + [f"c{i}" for i in range(len(sets))]
        cols = [info.columns[c] for c in key + sets]
        if self.family == "mysql":
            first = "SELECT " + ", ".join(f"{self.ph} AS {n}" for n in names)
            if self.is_mariadb:  # a table value constructor parses faster than UNION ALL SELECTs
                row = "(" + ", ".join([self.ph] * len(names)) + ")"
                derived = first + " UNION ALL VALUES " + ", ".join([row] * (nrows - 1))
            else:
                derived = first + (" UNION ALL SELECT " + ", ".join([self.ph] * len(names))) * (nrows - 1)
            on = " AND ".join(f"t.{self.q(c)} = {self._mysql_key(info.columns[c], f'v.k{i}')}"
                              for i, c in enumerate(key))
            assign = ", ".join(f"t.{self.q(c)} = v.c{i}" for i, c in enumerate(sets))
            return f"UPDATE {self.table(info)} AS t JOIN ({derived}) AS v ON {on} SET {assign}"
        row = "(" + ", ".join(self.value(c) for c in cols) + ")"
        values = ", ".join([row] * nrows)
        on = " AND ".join(f"t.{self.q(c)} = v.k{i}" for i, c in enumerate(key))
        assign = ", ".join(f"{self.q(c)} = v.c{i}" for i, c in enumerate(sets))
        return f"UPDATE {self.table(info)} AS t SET {assign} FROM (VALUES {values}) AS v({', '.join(names)}) WHERE {on}"

    def _mysql_key(self, col: ColumnInfo, ref: str) -> str:
        if col.collation and col.charset:  # compare with the column's own collation, like a literal would
            return f"CONVERT({ref} USING {col.charset}) COLLATE {col.collation}"
        if isinstance(col.type, my.FLOAT):
            return f"CAST({ref} AS FLOAT)"
        return ref

    # -- DELETE --------------------------------------------------------------------------------
    def delete_in(self, info: TableInfo, key: tuple[str, ...], nrows: int) -> str:
        one = ", ".join(self.value(info.columns[c]) for c in key)
        if len(key) == 1:
            lhs, item = self.q(key[0]), one
        else:
            lhs, item = "(" + ", ".join(self.q(c) for c in key) + ")", f"({one})"
        return f"DELETE FROM {self.table(info)} WHERE {lhs} IN ({', '.join([item] * nrows)})"

    # -- tables without a key: match one row on every comparable column ------------------------
    def comparable(self, info: TableInfo, cols: tuple[str, ...]) -> tuple[str, ...]:
        """Columns usable in a NULL-safe equality (PostgreSQL json has no '=')."""
        return tuple(c for c in cols if not (self.family == "postgresql" and isinstance(info.columns[c].type, pg.JSON)
                                             and not isinstance(info.columns[c].type, pg.JSONB)))

    def _match(self, info: TableInfo, cols: tuple[str, ...]) -> str:
        return " AND ".join(self.d.null_safe_eq.format(a=self.q(c), b=self.value(info.columns[c])) for c in cols)

    def pkless_update(self, info: TableInfo, sets: tuple[str, ...], match: tuple[str, ...]) -> str:
        assign = ", ".join(f"{self.q(c)} = {self.ph}" for c in sets)
        return self._one_row(info, f"UPDATE {self.table(info)} SET {assign}", match)

    def pkless_delete(self, info: TableInfo, match: tuple[str, ...]) -> str:
        return self._one_row(info, f"DELETE FROM {self.table(info)}", match)

    def _one_row(self, info: TableInfo, head: str, match: tuple[str, ...]) -> str:
        where = self._match(info, match)
        if self.family == "mysql":
            return f"{head} WHERE {where} LIMIT 1"
        rid = "ctid" if self.family == "postgresql" else "rowid"
        return f"{head} WHERE {rid} = (SELECT {rid} FROM {self.table(info)} WHERE {where} LIMIT 1)"

    # -- misc ----------------------------------------------------------------------------------
    def truncate(self, info: TableInfo) -> str:
        if self.family == "sqlite":
            return f"DELETE FROM {self.table(info)}"
        return f"TRUNCATE TABLE {self.table(info)}"

    def relaxed(self, sql: str) -> str:
        """The statement, run with a non-strict sql_mode (MySQL ENUM '' rows only)."""
        prefix, hint = relaxed_prefix(self.is_mariadb)
        if prefix:
            return prefix + sql
        verb, rest = sql.split(" ", 1)
        return f"{verb}{hint} {rest}"


def is_lob(col: ColumnInfo) -> bool:
    """Whether a value of this MySQL column may be large (decides per-row size estimates)."""
    return col.octets is not None and col.octets > 1024 or isinstance(col.type, sa.NullType)
