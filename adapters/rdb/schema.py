"""Target table reflection, cached per (target, schema, table) in this process.

PostgreSQL and SQLite use SQLAlchemy's inspector. MySQL/MariaDB read information_schema
directly: SQLAlchemy's MySQL reflection parses SHOW CREATE TABLE and mangles names that
contain backticks, and information_schema also gives each column's charset/collation.
The cache is dropped by :func:`reset_caches` (the job's DDL epoch: each sync starts afresh); a
replayed DDL forgets only the table it changed (:func:`forget`), so that a run of DDLs on many
tables does not reflect every mirrored table again after each one.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import inspect
from sqlalchemy import types as sa
from sqlalchemy.dialects import mysql as my
from sqlalchemy.engine import Connection
from sqlalchemy.exc import NoSuchTableError

_ENUM_MEMBER = re.compile(r"'((?:[^']|'')*)'")
_GENERATED = re.compile(r"\b(VIRTUAL|STORED|PERSISTENT)\b", re.I)


@dataclass
class ColumnInfo:
    name: str
    type: sa.TypeEngine
    nullable: bool = True
    charset: str | None = None  # MySQL only
    collation: str | None = None  # MySQL only
    cast: str = ""  # PostgreSQL: the type for CAST(%s AS ...)
    octets: int | None = None  # MySQL: CHARACTER_OCTET_LENGTH of string/binary columns
    generated: bool = False  # computed by the target (VIRTUAL/STORED/GENERATED ALWAYS AS): never written
    deterministic: bool = True  # PostgreSQL: False for a nondeterministic (e.g. case-insensitive ICU) collation


@dataclass(frozen=True)
class ForeignKey:
    """One foreign key of a target table (the referencing side)."""

    name: str
    columns: tuple[str, ...]
    ref_schema: str | None
    ref_table: str
    ref_columns: tuple[str, ...]
    on_delete: str = "NO ACTION"  # CASCADE | SET NULL | SET DEFAULT | RESTRICT | NO ACTION
    on_update: str = "NO ACTION"


@dataclass
class TableInfo:
    schema: str | None
    name: str
    columns: dict[str, ColumnInfo]
    pk: tuple[str, ...]
    unique: tuple[tuple[str, ...], ...]  # PK and unique constraints/indexes ("(expr)": a functional key part)
    plans: dict[Any, Any] = field(default_factory=dict)  # writer plans derived from this shape
    fks: tuple[ForeignKey, ...] = ()  # foreign keys of this table (it is the child)
    unique_names: tuple[str, ...] = ()  # the name of each entry of ``unique`` (messages)
    #: MariaDB system-versioned table: its period columns (start, end) (adapters/rdb/versioned.py)
    period: tuple[str, str] | None = None
    period_problem: str = ""  # why its changes cannot be applied exactly (transaction-precise periods)

    def find(self, name: str, case_insensitive: bool) -> str | None:
        """The target column named ``name`` (exact first, then case-insensitively if asked)."""
        if name in self.columns:
            return name
        if case_insensitive:
            folded = name.casefold()
            return next((c for c in self.columns if c.casefold() == folded), None)
        return None

    @property
    def label(self) -> str:
        return f"{self.schema}.{self.name}" if self.schema else self.name


_cache: dict[tuple, TableInfo | None] = {}
_lock = threading.Lock()


def reset_caches() -> None:
    """Forget every reflected table (a new sync: DDL by anyone since)."""
    with _lock:
        _cache.clear()


def forget(tables: set[str] | None) -> None:
    """Forget the reflected tables named ``tables`` (in any schema, any case: a DDL replayed on
    them changed them); None: every table."""
    if tables is None:
        reset_caches()
        return
    folded = {t.casefold() for t in tables}
    with _lock:
        for key in [k for k in _cache if str(k[2]).casefold() in folded]:
            del _cache[key]


def table_info(conn: Connection, target_key: Any, family: str, schema: str | None, table: str) -> TableInfo | None:
    """The reflected target table, or None when it does not exist."""
    key = (target_key, schema, table)
    with _lock:
        if key in _cache and _cache[key] is not None:
            return _cache[key]
    info = _reflect_mysql(conn, schema, table, target_key) if family == "mysql" else \
        _reflect(conn, family, schema, table)
    with _lock:
        _cache[key] = info
    return info


def _reflect(conn: Connection, family: str, schema: str | None, table: str) -> TableInfo | None:
    insp = inspect(conn)
    try:
        cols = insp.get_columns(table, schema=schema)
    except NoSuchTableError:
        return None
    if not cols:
        return None
    dialect = conn.dialect
    columns = {}
    for c in cols:
        ctype = c["type"]
        cast = ""
        if family == "postgresql":
            plain = ctype.copy()
            if getattr(plain, "collation", None):
                plain.collation = None
            try:
                cast = plain.compile(dialect=dialect)
            except Exception:  # noqa: BLE001 - a type SQLAlchemy cannot render: no cast
                cast = ""
        columns[c["name"]] = ColumnInfo(c["name"], ctype, bool(c.get("nullable", True)), cast=cast,
                                        collation=getattr(ctype, "collation", None),
                                        generated=bool(c.get("computed")))
    pkc = insp.get_pk_constraint(table, schema=schema)
    pk = tuple(pkc.get("constrained_columns") or ())
    unique, names = ([pk], [pkc.get("name") or "PRIMARY"]) if pk else ([], [])
    for u in insp.get_unique_constraints(table, schema=schema):
        unique.append(tuple(u["column_names"]))
        names.append(u.get("name") or "")
    for i in insp.get_indexes(table, schema=schema):
        parts = key_parts(i["column_names"], i.get("expressions"))
        if i.get("unique") and None not in parts and parts not in unique:
            unique.append(parts)
            names.append(i.get("name") or "")
    fks = tuple(ForeignKey(f.get("name") or "", tuple(f["constrained_columns"]), f.get("referred_schema") or schema,
                           f["referred_table"], tuple(f["referred_columns"]),
                           (f.get("options") or {}).get("ondelete", "NO ACTION").upper(),
                           (f.get("options") or {}).get("onupdate", "NO ACTION").upper())
                for f in insp.get_foreign_keys(table, schema=schema))
    if family == "postgresql":
        _pg_collations(conn, columns)
    return TableInfo(schema, table, columns, pk, tuple(unique), fks=fks, unique_names=tuple(names))


def key_parts(columns: list, expressions: list | None) -> tuple:
    """A key's parts: column names, and ``(expression)`` for a functional key part (a unique index
    on an expression constrains rows like any unique key); None for a part that is neither."""
    exprs = expressions or [None] * len(columns)
    return tuple(c if c is not None else f"({e})" if e else None for c, e in zip(columns, exprs, strict=False))


def _pg_collations(conn: Connection, columns: dict[str, ColumnInfo]) -> None:
    """Mark columns whose collation is nondeterministic (equal strings that differ in bytes)."""
    named = {c.collation for c in columns.values() if c.collation}
    if not named:
        return
    rows = conn.exec_driver_sql("SELECT collname FROM pg_collation WHERE NOT collisdeterministic").fetchall()
    loose = {r[0] for r in rows}
    for c in columns.values():
        if c.collation in loose:
            c.deterministic = False


def _mysql_type(data_type: str, column_type: str, ischema: dict) -> sa.TypeEngine:
    if data_type == "enum":
        return my.ENUM(*[m.replace("''", "'") for m in _ENUM_MEMBER.findall(column_type)])
    if data_type == "bit":
        return my.BIT()
    cls = ischema.get(data_type)
    args = _ARGS.search(column_type or "")
    try:
        if cls is None:
            return sa.NullType()
        if args and data_type in ("datetime", "timestamp", "time"):  # fractional seconds kept
            return cls(fsp=int(args.group(1)))
        if args and data_type in ("decimal", "numeric"):  # the digits and the scale kept
            return cls(precision=int(args.group(1)), scale=int(args.group(2) or 0))
        if args and data_type in ("char", "varchar", "binary", "varbinary"):  # the length kept
            return cls(length=int(args.group(1)))
        return cls()
    except TypeError:
        return sa.NullType()


_ARGS = re.compile(r"\((\d+)(?:,(\d+))?\)")


_expressions: dict[Any, bool] = {}


def _has_expressions(conn: Connection, target_key: Any) -> bool:
    """True if the server reports functional key parts (information_schema.STATISTICS.EXPRESSION:
    MySQL 8.0.13+; MariaDB has no functional indexes)."""
    if target_key not in _expressions:
        _expressions[target_key] = bool(conn.exec_driver_sql(
            "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'information_schema' "
            "AND TABLE_NAME = 'STATISTICS' AND COLUMN_NAME = 'EXPRESSION'").scalar())
    return _expressions[target_key]


def _reflect_mysql(conn: Connection, schema: str | None, table: str, target_key: Any = None) -> TableInfo | None:
    return _reflect_mysql_many(conn, schema, [table], target_key).get(table)


def prefetch(conn: Connection, target_key: Any, family: str, schema: str | None, tables: list[str]) -> None:
    """Reflect those of ``tables`` that are not cached, a few hundred per query (MySQL/MariaDB;
    elsewhere :func:`table_info` reflects them one by one when asked): a mirrored database of a
    thousand tables is read in a few queries instead of three per table."""
    if family != "mysql":
        return
    with _lock:
        missing = [t for t in tables if _cache.get((target_key, schema, t)) is None]
    for i in range(0, len(missing), PREFETCH_CHUNK):
        chunk = missing[i:i + PREFETCH_CHUNK]
        infos = _reflect_mysql_many(conn, schema, chunk, target_key)
        with _lock:
            for t in chunk:
                if infos.get(t) is not None:
                    _cache[(target_key, schema, t)] = infos[t]


#: tables per query of :func:`prefetch`
PREFETCH_CHUNK = 500


def _reflect_mysql_many(conn: Connection, schema: str | None, tables: list[str],
                        target_key: Any = None) -> dict[str, TableInfo]:
    """The reflected tables among ``tables`` (absent: not there), in four queries (and SHOW CREATE TABLE
    of each system-versioned one)."""
    if not tables:
        return {}
    db = "%s" if schema is not None else "DATABASE()"
    where = f"TABLE_SCHEMA = {db} AND TABLE_NAME IN ({', '.join(['%s'] * len(tables))})"
    params = ((schema,) if schema is not None else ()) + tuple(tables)
    rows = conn.exec_driver_sql(
        "SELECT TABLE_NAME, COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, CHARACTER_SET_NAME, COLLATION_NAME, "
        f"CHARACTER_OCTET_LENGTH, EXTRA FROM information_schema.COLUMNS WHERE {where} "
        "ORDER BY TABLE_NAME, ORDINAL_POSITION", params).fetchall()
    ischema = conn.dialect.ischema_names
    columns: dict[str, dict[str, ColumnInfo]] = {}
    for r in rows:
        columns.setdefault(r[0], {})[r[1]] = ColumnInfo(
            r[1], _mysql_type(r[2].lower(), r[3], ischema), r[4] == "YES", r[5], r[6],
            octets=None if r[7] is None else int(r[7]), generated=bool(_GENERATED.search(r[8] or "")))
    if not columns:
        return {}
    expr = "EXPRESSION" if _has_expressions(conn, target_key) else "NULL"
    idx = conn.exec_driver_sql(
        f"SELECT TABLE_NAME, INDEX_NAME, COLUMN_NAME, {expr} FROM information_schema.STATISTICS WHERE {where} "
        "AND NON_UNIQUE = 0 ORDER BY TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX", params).fetchall()
    keys: dict[str, dict[str, list]] = {}
    for table, name, col, expression in idx:
        keys.setdefault(table, {}).setdefault(name, []).extend(key_parts([col], [expression]))
    fks = _mysql_fks(conn, where, params)
    versioned = {r[0] for r in conn.exec_driver_sql(
        f"SELECT TABLE_NAME FROM information_schema.TABLES WHERE {where} AND TABLE_TYPE = 'SYSTEM VERSIONED'",
        params).fetchall()}
    folded = {name.casefold(): name for name in sorted(columns, reverse=True)}
    out = {}
    for table in tables:  # information_schema compares names without case: as asked, else that match
        found = table if table in columns else folded.get(table.casefold())
        if found is None:
            continue
        groups = dict(keys.get(found, {}))
        pk = tuple(groups.pop("PRIMARY", ()))
        others = [(k, tuple(v)) for k, v in groups.items() if None not in v]
        unique = ([pk] if pk else []) + [v for _, v in others]
        names = (["PRIMARY"] if pk else []) + [k for k, _ in others]
        out[table] = TableInfo(schema, table, columns[found], pk, tuple(unique), fks=fks.get(found, ()),
                               unique_names=tuple(names))
        if found in versioned:
            _versioned(conn, out[table], ischema)
    return out


_PERIOD = re.compile(r"PERIOD FOR SYSTEM_TIME \(`((?:[^`]|``)+)`, `((?:[^`]|``)+)`\)")


def _versioned(conn: Connection, info: TableInfo, ischema: dict) -> None:
    """The period columns of a system-versioned table: named in SHOW CREATE TABLE, or the implicit
    ``row_start``/``row_end`` that information_schema.COLUMNS does not list. They are written (with
    ``system_versioning_insert_history``), not computed: not ``generated`` here."""
    name = (f"`{info.schema.replace('`', '``')}`." if info.schema else "") + f"`{info.name.replace('`', '``')}`"
    m = _PERIOD.search(conn.exec_driver_sql(f"SHOW CREATE TABLE {name}").fetchone()[1])
    if m is None:
        for col in ("row_start", "row_end"):
            info.columns[col] = ColumnInfo(col, _mysql_type("timestamp", "timestamp(6)", ischema), False)
        info.period = ("row_start", "row_end")
        return
    info.period = (m.group(1).replace("``", "`"), m.group(2).replace("``", "`"))
    for col in info.period:
        info.columns[col].generated = False
        if not isinstance(info.columns[col].type, sa.TIMESTAMP):
            info.period_problem = (f"its period columns {info.period[0]}, {info.period[1]} hold transaction ids "
                                   "(transaction-precise history), which only the source's transactions give")


def _mysql_fks(conn: Connection, where: str, params: tuple) -> dict[str, tuple[ForeignKey, ...]]:
    """The foreign keys of the tables ``where`` selects (a condition on TABLE_SCHEMA/TABLE_NAME), per table."""
    rows = conn.exec_driver_sql(
        "SELECT k.TABLE_NAME, k.CONSTRAINT_NAME, k.COLUMN_NAME, k.REFERENCED_TABLE_SCHEMA, k.REFERENCED_TABLE_NAME, "
        "k.REFERENCED_COLUMN_NAME, r.DELETE_RULE, r.UPDATE_RULE "
        "FROM information_schema.KEY_COLUMN_USAGE k JOIN information_schema.REFERENTIAL_CONSTRAINTS r "
        "ON r.CONSTRAINT_SCHEMA = k.CONSTRAINT_SCHEMA AND r.CONSTRAINT_NAME = k.CONSTRAINT_NAME "
        "AND r.TABLE_NAME = k.TABLE_NAME "
        f"WHERE {where.replace('TABLE_SCHEMA', 'k.TABLE_SCHEMA').replace('TABLE_NAME', 'k.TABLE_NAME')} "
        "AND k.REFERENCED_TABLE_NAME IS NOT NULL "
        "ORDER BY k.TABLE_NAME, k.CONSTRAINT_NAME, k.ORDINAL_POSITION", params).fetchall()
    out: dict[str, dict[str, list]] = {}
    for table, name, col, rschema, rtable, rcol, on_delete, on_update in rows:
        fk = out.setdefault(table, {}).setdefault(name, [[], rschema, rtable, [], on_delete, on_update])
        fk[0].append(col)
        fk[3].append(rcol)
    return {t: tuple(ForeignKey(name, tuple(c), rs, rt, tuple(rc), od, ou)
                     for name, (c, rs, rt, rc, od, ou) in fks.items()) for t, fks in out.items()}
