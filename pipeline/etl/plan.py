"""What a full load reads: one :class:`TableLoad` per (mapping, source table), with its
SELECT pieces, its ``etlCondition`` (``{}`` placeholders bound to ``--params``) and its key
ranges. Built on the driver; pickled to the executors as plain data."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pipeline.etl import ranges as R
from pipeline.etl.source import TableMeta, qi, table_meta
from pipeline.mapping import DbMapping, EsMapping, HbaseMapping, Mapping
from pipeline.source.catalog import database_exists, tables_of
from sluice_common.errors import ConfigError

DEFAULT_READ_BATCH = 5000
_LEADING_WHERE = re.compile(r"^\s*where\b", re.IGNORECASE)


@dataclass(frozen=True)
class TableLoad:
    """One source table of one mapping, and how to read it."""

    midx: int
    mapping_file: str
    meta: TableMeta
    alias: str                      # the main table's alias in ``from_sql``
    from_sql: str                   # FROM clause (the ES mapping's LEFT JOINs when the condition needs them)
    condition: str | None           # WHERE text with %s placeholders (other % doubled), or None
    params: tuple[str, ...]
    read_batch: int
    commit_batch: int
    est_rows: int = 0
    ranges: tuple[R.KeyRange, ...] = field(default=(R.KeyRange(),))
    #: a mirror's table without a primary key: no key to upsert by, so the load empties the target
    #: table and inserts every row (one range: the table is read in one streaming SELECT)
    replace: bool = False

    def select_sql(self, r: R.KeyRange, after: tuple | None = None, paged: bool = True) -> tuple[str, list]:
        """One page of ``r`` (keys after ``after``): raw key columns first, then every column."""
        a = qi(self.alias)
        keys = [f"{a}.{qi(c)}" for c in self.meta.pk]
        cols = [c.select_expr(f"{a}.{qi(c.name)}") for c in self.meta.columns]
        where, params = R.range_predicate(self.meta.pk, r, a, after)
        if self.condition:
            where = f"({where}) AND ({self.condition})"
            params = [*params, *self.params]
        sql = f"SELECT {', '.join([*keys, *cols])} FROM {self.from_sql} WHERE {where}"
        if paged and self.meta.pk:
            sql += f" ORDER BY {', '.join(keys)} LIMIT {int(self.read_batch)}"
        return sql, params


def bind_condition(text: str | None, params: tuple[str, ...], file: str, key: str) -> str | None:
    """canal's ``etlCondition`` -> a WHERE fragment for pymysql: a leading ``where`` is dropped,
    every ``{}`` becomes a bound parameter (``--params`` in order), other ``%`` are escaped."""
    if text is None or not text.strip():
        if params:
            raise ConfigError(file, key, f"has no etlCondition, but --params gave {len(params)} value(s)")
        return None
    body = _LEADING_WHERE.sub("", text.strip(), count=1).strip()
    n = body.count("{}")
    if n != len(params):
        raise ConfigError(file, key, f"{text!r} has {n} '{{}}' placeholder(s) but --params gave {len(params)} "
                          "value(s)", hint="pass one value per {} with --params 'a;b'")
    return body.replace("%", "%%").replace("{}", "%s") or None


def _spec_key(spec) -> str:
    return {DbMapping: "dbMapping", EsMapping: "esMapping", HbaseMapping: "hbaseMapping"}[type(spec)]


def table_loads(conn, mapping: Mapping, midx: int, params: tuple[str, ...], parts: int,
                main_database: str | None = None, replace_keyless: bool = False) -> list[TableLoad]:
    """The tables a mapping loads (every table of the database for ``mirrorDb``), split.
    ``replace_keyless``: a mirror's tables without a primary key are emptied and loaded whole
    (:attr:`TableLoad.replace`; a bootstrap, which checks the source stayed quiet, :mod:`.keyless`)."""
    spec = mapping.spec
    key = f"{_spec_key(spec)}.etlCondition"
    cond_text = getattr(spec, "etlCondition", None)
    params = tuple(params) if cond_text and "{}" in cond_text else ()
    condition = bind_condition(cond_text, params, mapping.file, key)
    read_batch = int(getattr(spec, "readBatch", DEFAULT_READ_BATCH) or DEFAULT_READ_BATCH)
    commit_batch = int(getattr(spec, "commitBatch", 3000) or 3000)
    joins_sql = ""
    if isinstance(spec, EsMapping):
        q = spec.query
        database = q.main.schema or main_database
        if not database:
            raise ConfigError(mapping.file, "esMapping.sql", f"the main table {q.main.name} names no database, "
                              "and the mapping's data source names none either",
                              hint="write schema.table in the SQL, or give dataSourceKey a jdbc url with a database")
        tables, alias = [q.main.name], q.main.alias
        if condition and q.joins:  # the condition may read joined tables (canal appends it to the SQL)
            for j in q.joins:
                t = j.table
                jt = f"{qi(t.schema or database)}.{qi(t.name)}"
                on = " AND ".join(f"{qi(t.alias)}.{qi(k.column)} = {qi(k.other.alias)}.{qi(k.other.column)}"
                                  for k in j.keys)
                joins_sql += f" LEFT JOIN {jt} AS {qi(t.alias)} ON {on}"
    else:
        database, alias = spec.database, "t"
        tables = tables_of(conn, database) if getattr(spec, "mirrorDb", False) else [spec.table]
        if not tables and not database_exists(conn, database):
            raise ConfigError(mapping.file, f"{_spec_key(spec)}.database",
                              f"source database {database!r} does not exist",
                              hint="fix the database name, or create it on the source (a mirror of a database "
                                   "without tables loads nothing; its tables arrive with their DDL)")
    out = []
    for t in tables:
        meta = table_meta(conn, database, t)
        if meta is None:
            raise ConfigError(mapping.file, f"{_spec_key(spec)}.table",
                              f"source table {database}.{t} does not exist")
        rows = R.estimate_rows(conn, meta)
        meta = TableMeta(meta.database, meta.table, meta.columns, meta.pk, rows)
        rngs = tuple(R.split(conn, meta, parts, rows))
        from_sql = f"{meta.qualified} AS {qi(alias)}{joins_sql}"
        replace = replace_keyless and not meta.pk and bool(getattr(spec, "mirrorDb", False)) and condition is None
        out.append(TableLoad(midx, mapping.file, meta, alias, from_sql, condition, params, read_batch,
                             commit_batch, rows, rngs, replace))
    return out
