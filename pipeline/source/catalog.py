"""What the source's catalog (``information_schema``) says about databases and tables, for every
part that asks: the ETL plan (:mod:`pipeline.etl.source`), the job's pre-flight and refusals
(:mod:`pipeline.job.group`, :mod:`pipeline.job.cascades`, :mod:`pipeline.job.collations`), verify
(:mod:`pipeline.ops.verify_source`) and repair. One query each, on a cursor the caller holds
(``tables_of``/``database_exists``: on a connection); names and types come back as ``str``
whatever the cursor (text or raw bytes), in the server's spelling (callers lower-case as they need).

The sources are MariaDB and MySQL; what differs between them is said where it matters (a
primary key of a MariaDB system-versioned table, MariaDB's JSON). The targets' catalogs are read
by the adapters (adapters/rdb/schema.py), which do not import this module.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import pymysql

from sluice_common.collations import SourceCharsets


class Column(NamedTuple):
    """One column as ``information_schema.COLUMNS`` describes it."""

    name: str
    data_type: str    #: DATA_TYPE (``int``, ``varchar``, MariaDB's JSON: ``longtext``)
    column_type: str  #: COLUMN_TYPE (``int(10) unsigned``, ``enum('a','B')``)
    key: str          #: COLUMN_KEY: ``PRI``, ``UNI``, ``MUL`` or empty


class ForeignKey(NamedTuple):
    """One foreign key: its columns and the referenced ones in key order, its rules."""

    name: str
    database: str
    table: str
    columns: tuple[str, ...]
    ref_database: str
    ref_table: str
    ref_columns: tuple[str, ...]
    on_delete: str
    on_update: str


def _s(v) -> str:
    return v.decode() if isinstance(v, bytes | bytearray) else str(v)


def tables(cur, database: str) -> list[str]:
    """The base tables of a database, by name."""
    cur.execute("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA=%s "
                "AND TABLE_TYPE='BASE TABLE' ORDER BY TABLE_NAME", (database,))
    return [_s(r[0]) for r in cur.fetchall()]


def settled_tables(cur, database: str, before: float) -> list[str]:
    """The base tables of a database created (or last rebuilt) before ``before`` (seconds since the
    epoch) by the source's clock, Sluice's own (``_sluice_*``, a chained mirror's) left out; a table
    whose creation time the server does not give is left out too. MySQL's cached statistics are not
    used (``information_schema_stats_expiry``)."""
    try:
        cur.execute("SET SESSION information_schema_stats_expiry = 0")
    except Exception:  # noqa: BLE001 - MariaDB has no such cache
        pass
    cur.execute("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA=%s AND TABLE_TYPE='BASE TABLE' "
                "AND TABLE_NAME NOT LIKE '\\_sluice\\_%%' AND UNIX_TIMESTAMP(CREATE_TIME) < %s ORDER BY TABLE_NAME",
                (database, before))
    return [_s(r[0]) for r in cur.fetchall()]


def schema_exists(cur, database: str) -> bool:
    """Whether the source has the database (an empty one too)."""
    cur.execute("SELECT 1 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME=%s", (database,))
    return cur.fetchone() is not None


def tables_of(conn, database: str) -> list[str]:
    """:func:`tables` on a connection."""
    with conn.cursor(pymysql.cursors.Cursor) as cur:
        return tables(cur, database)


def database_exists(conn, database: str) -> bool:
    """:func:`schema_exists` on a connection."""
    with conn.cursor(pymysql.cursors.Cursor) as cur:
        return schema_exists(cur, database)


_COLUMNS = "SELECT {}COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, COLUMN_KEY FROM information_schema.COLUMNS "


def columns(cur, database: str, table: str) -> list[Column]:
    """The table's columns in table order (none: no such table, or one the user may not see)."""
    cur.execute(_COLUMNS.format("") + "WHERE TABLE_SCHEMA=%s AND TABLE_NAME=%s ORDER BY ORDINAL_POSITION",
                (database, table))
    return [Column(*map(_s, r)) for r in cur.fetchall()]


def columns_by_table(cur, database: str) -> dict[str, list[Column]]:
    """:func:`columns` of every table (and view) of ``database``, in one query."""
    cur.execute(_COLUMNS.format("TABLE_NAME, ") + "WHERE TABLE_SCHEMA=%s ORDER BY TABLE_NAME, ORDINAL_POSITION",
                (database,))
    out: dict[str, list[Column]] = {}
    for table, *col in cur.fetchall():
        out.setdefault(_s(table), []).append(Column(*map(_s, col)))
    return out


def primary_key(cur, database: str, table: str) -> list[str]:
    """The primary key's columns in key order (empty: none). The key's index as the server keeps
    it (``STATISTICS``): a MariaDB system-versioned table's key without the ``row_end`` that
    ``KEY_COLUMN_USAGE`` adds to it (a column ``COLUMNS`` does not list)."""
    cur.execute("SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA=%s "
                "AND TABLE_NAME=%s AND INDEX_NAME='PRIMARY' ORDER BY SEQ_IN_INDEX", (database, table))
    return [_s(r[0]) for r in cur.fetchall()]


def unique_keys(cur, database: str, table: str) -> list[tuple[str, ...]]:
    """The primary key and the unique keys whose columns are all NOT NULL (a unique key lets
    any number of rows hold NULL; a functional key part has no column), each as its columns in
    key order, shortest first."""
    cur.execute("SELECT INDEX_NAME, COLUMN_NAME, NULLABLE FROM information_schema.STATISTICS "
                "WHERE TABLE_SCHEMA=%s AND TABLE_NAME=%s AND NON_UNIQUE=0 ORDER BY INDEX_NAME, SEQ_IN_INDEX",
                (database, table))
    keys: dict[str, list] = {}
    for name, col, nullable in cur.fetchall():
        keys.setdefault(_s(name), []).append(None if col is None or _s(nullable or "").upper() == "YES" else _s(col))
    usable = [tuple(cols) for cols in keys.values() if None not in cols]
    return sorted(usable, key=lambda k: (len(k), k))


def row_estimate(cur, database: str, table: str) -> int:
    """The server's estimate of the table's rows (``TABLE_ROWS``; 0 when it has none)."""
    cur.execute("SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA=%s AND TABLE_NAME=%s",
                (database, table))
    row = cur.fetchone()
    return int(row[0] or 0) if row else 0


def databases_with(cur, table: str) -> list[str]:
    """The databases that have a base table named ``table``."""
    cur.execute("SELECT TABLE_SCHEMA FROM information_schema.TABLES WHERE TABLE_NAME = %s AND "
                "TABLE_TYPE = 'BASE TABLE'", (table,))
    return [_s(r[0]) for r in cur.fetchall()]


def column_charsets(cur, database: str, table: str) -> list[tuple[str, str | None, str | None]]:
    """``(column, CHARACTER_SET_NAME, COLLATION_NAME)`` of each column (None for non-text columns)."""
    cur.execute("SELECT COLUMN_NAME, CHARACTER_SET_NAME, COLLATION_NAME FROM information_schema.COLUMNS "
                "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s", (database, table))
    return [(_s(n), None if cs is None else _s(cs), None if co is None else _s(co)) for n, cs, co in cur.fetchall()]


def charset_defaults(cur, databases: set[str]) -> SourceCharsets:
    """The defaults of ``databases`` and of every charset, from a source cursor (pymysql): what a
    replayed DDL statement left implicit means on the source (adapters/rdb/charsets.py)."""
    dbs: dict[str, tuple[str, str]] = {}
    if databases:
        marks = ", ".join(["%s"] * len(databases))
        cur.execute("SELECT SCHEMA_NAME, DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME FROM "
                    f"information_schema.SCHEMATA WHERE SCHEMA_NAME IN ({marks})", tuple(sorted(databases)))
        dbs = {r[0]: (r[1], r[2]) for r in cur.fetchall()}
    cur.execute("SELECT CHARACTER_SET_NAME, DEFAULT_COLLATE_NAME FROM information_schema.CHARACTER_SETS")
    charsets = {r[0]: r[1] for r in cur.fetchall()}
    cur.execute("SHOW GLOBAL VARIABLES WHERE Variable_name IN ('default_collation_for_utf8mb4', "
                "'character_set_collations')")
    for var, value in cur.fetchall():
        if var == "default_collation_for_utf8mb4" and value:
            charsets["utf8mb4"] = value
        elif value:  # MariaDB 11.2+: "utf8mb4=uca1400_ai_ci,..."; bare uca1400 names take the charset
            for part in str(value).split(","):
                cs, _, coll = part.strip().partition("=")
                if cs and coll:
                    charsets[cs] = coll if coll.startswith(cs + "_") else f"{cs}_{coll}"
    return SourceCharsets(dbs, charsets)


def json_checked_columns(cur, database: str, table: str) -> set[str]:
    """MariaDB's JSON is LONGTEXT with a ``json_valid(col)`` CHECK constraint: those columns (none
    on MySQL, whose CHECK_CONSTRAINTS has no TABLE_NAME and whose JSON is a type of its own)."""
    try:
        cur.execute("SELECT CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS WHERE CONSTRAINT_SCHEMA=%s "
                    "AND TABLE_NAME=%s", (database, table))
    except pymysql.MySQLError:
        return set()
    return {m.group(1) for (clause,) in cur.fetchall() if (m := _JSON_VALID.fullmatch(_s(clause).strip()))}


_JSON_VALID = re.compile(r"json_valid\(`?([^`()]+)`?\)", re.IGNORECASE)


def foreign_keys(cur, databases: set[str]) -> list[ForeignKey]:
    """The foreign keys of every table in ``databases``, by database, table and name."""
    if not databases:
        return []
    marks = ", ".join(["%s"] * len(databases))
    cur.execute(
        "SELECT k.CONSTRAINT_NAME, k.TABLE_SCHEMA, k.TABLE_NAME, k.COLUMN_NAME, k.REFERENCED_TABLE_SCHEMA, "
        "k.REFERENCED_TABLE_NAME, k.REFERENCED_COLUMN_NAME, r.DELETE_RULE, r.UPDATE_RULE "
        "FROM information_schema.KEY_COLUMN_USAGE k JOIN information_schema.REFERENTIAL_CONSTRAINTS r "
        "ON r.CONSTRAINT_SCHEMA = k.CONSTRAINT_SCHEMA AND r.CONSTRAINT_NAME = k.CONSTRAINT_NAME "
        "AND r.TABLE_NAME = k.TABLE_NAME "
        f"WHERE k.TABLE_SCHEMA IN ({marks}) AND k.REFERENCED_TABLE_NAME IS NOT NULL "
        "ORDER BY k.TABLE_SCHEMA, k.TABLE_NAME, k.CONSTRAINT_NAME, k.ORDINAL_POSITION", tuple(sorted(databases)))
    out: dict[tuple, list] = {}
    for row in cur.fetchall():
        name, db, table, col, rdb, rtable, rcol, on_delete, on_update = map(_s, row)
        fk = out.setdefault((db, table, name), [[], rdb, rtable, [], on_delete, on_update])
        fk[0].append(col)
        fk[3].append(rcol)
    return [ForeignKey(n, db, t, tuple(c), rdb, rt, tuple(rc), od, ou)
            for (db, t, n), (c, rdb, rt, rc, od, ou) in out.items()]
