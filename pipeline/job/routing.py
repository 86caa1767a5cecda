"""Which changes feed which mapping, and by which key they are partitioned.

A route is one (database, table) filter of one mapping plus the source columns whose
values form the partition key (the target primary key, in source column names). ``None``
key columns mean "the change's own pkNames" (mirrorDb, and mappings without targetPk).
``concurrent: false`` gives an empty key list: the mapping's changes share one partition.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F

from pipeline.mapping import DbMapping, EsMapping, HbaseMapping, Mapping


@dataclass(frozen=True)
class Route:
    """One mapping's interest in one source table (or every table of a database)."""

    midx: int
    database: str | None  # None: any database (ES SQL without a schema)
    table: str | None  # None: every table of the database
    key_columns: tuple[str, ...] | None  # None: the change's own pkNames
    concurrent: bool = True
    case_insensitive: bool = False

    def condition(self) -> Column:
        """A Spark predicate over the Dml's ``database``/``table`` columns."""
        def eq(col: str, value: str) -> Column:
            if self.case_insensitive:
                return F.lower(F.col(col)) == value.lower()
            return F.col(col) == value

        cond = F.lit(True) if self.database is None else eq("database", self.database)
        return cond if self.table is None else cond & eq("table", self.table)


def routes_for(midx: int, m: Mapping, database: str | None = None) -> list[Route]:
    """The routes of one mapping (RDB and HBase: the mapped table; ES: every table of its SQL).

    ``database``: where the ES SQL's unqualified tables live (the database of the mapping's
    data source), None when unknown (then any database matches, as before).
    """
    spec = m.spec
    if isinstance(spec, DbMapping):
        keys = None if spec.mirrorDb else spec.source_pk_columns
        table = None if spec.mirrorDb else spec.table
        return [Route(midx, spec.database, table, keys, m.concurrent, spec.caseInsensitive)]
    if isinstance(spec, HbaseMapping):
        return [Route(midx, spec.database, spec.table, spec.rowkey_columns, m.concurrent)]
    if isinstance(spec, EsMapping):
        return _es_routes(midx, m, spec, database)
    raise TypeError(type(spec))  # pragma: no cover - the loader admits only these kinds


def _es_routes(midx: int, m: Mapping, spec: EsMapping, database: str | None) -> list[Route]:
    """One route per distinct table of the ES SQL (main first; a self-joined table once).

    Main table: keyed by the main-table columns the document id is computed from, so all
    changes of one document share a partition and an id-changing UPDATE becomes DELETE +
    INSERT. Joined tables: keyed by the joined row's own primary key; the ES writer answers
    a joined-row change by re-querying the affected documents from the source, which reads
    the source's current state and so does not depend on the order across partitions.
    """
    q = spec.query
    main = q.main
    idf = q.field(spec.id_field)
    keys = None
    if idf is not None and idf.columns and all(c.alias == main.alias for c in idf.columns):
        keys = tuple(dict.fromkeys(c.column for c in idf.columns))
    routes, seen = [], set()
    for t in q.tables:
        db = t.schema or database
        ident = (db.casefold() if db else None, t.name.casefold())
        if ident in seen:
            continue
        seen.add(ident)
        routes.append(Route(midx, db, t.name, keys if t is main else None, m.concurrent, True))
    return routes


def _by_route(routes: list[Route], branch, default: Column) -> Column:
    """A CASE over ``ridx`` (the route's index in ``routes``): one mapping may have
    several routes (an ES mapping: one per table of its SQL), each with its own key."""
    expr = None
    for i, r in enumerate(routes):
        cond = F.col("ridx") == i
        expr = F.when(cond, branch(r)) if expr is None else expr.when(cond, branch(r))
    return default if expr is None else expr.otherwise(default)


def midx_expr(routes: list[Route]) -> Column:
    """The mapping index of a routed change."""
    return _by_route(routes, lambda r: F.lit(r.midx), F.lit(-1))


def key_names_expr(routes: list[Route], pk_names: Column) -> Column:
    """The source column names that form the target key, per route."""
    def names(r: Route) -> Column:
        if r.key_columns is None:
            return pk_names
        return F.array(*[F.lit(c) for c in r.key_columns]).cast("array<string>")
    return _by_route(routes, names, pk_names)


def concurrent_expr(routes: list[Route]) -> Column:
    """True where the route's changes may spread over partitions by key."""
    return _by_route(routes, lambda r: F.lit(r.concurrent), F.lit(True))


def sql_lambda(sql: str) -> Column:
    """A Spark expression with a higher-order function, written as SQL text.

    PySpark names every Python lambda's variable afresh (``x_1``, ``x_2``, ... for the life of
    the JVM), and the name lands in a comment of the generated Java code, which is the key of
    Spark's codegen cache: each sync then compiled its plan anew with Janino and the JIT had to
    compile the new classes again (1.4-2.2 CPU s per 100k-row sync on 2 cores). A lambda in SQL
    text keeps the name it is written with, so a repeated plan reuses the compiled classes."""
    return F.expr(sql)


def key_of() -> Column:
    """The key string of the row image in column ``dm`` by the key column names in column
    ``knames``: the values joined by U+0001, NULL as U+0000."""
    return sql_lambda("concat_ws(chr(1), transform(knames, k -> coalesce(dm[k], chr(0))))")
