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


def routes_for(midx: int, m: Mapping) -> list[Route]:
    """The routes of one mapping (RDB and HBase: the mapped table; ES: its main table)."""
    spec = m.spec
    if isinstance(spec, DbMapping):
        keys = None if spec.mirrorDb else spec.source_pk_columns
        table = None if spec.mirrorDb else spec.table
        return [Route(midx, spec.database, table, keys, m.concurrent, spec.caseInsensitive)]
    if isinstance(spec, HbaseMapping):
        return [Route(midx, spec.database, spec.table, spec.rowkey_columns, m.concurrent)]
    if isinstance(spec, EsMapping):
        main = spec.query.main
        return [Route(midx, main.schema, main.name, None, m.concurrent, True)]
    raise TypeError(type(spec))  # pragma: no cover - the loader admits only these kinds


def _by_route(routes: list[Route], branch, default: Column) -> Column:
    expr = None
    for r in routes:
        cond = F.col("midx") == r.midx
        expr = F.when(cond, branch(r)) if expr is None else expr.when(cond, branch(r))
    return default if expr is None else expr.otherwise(default)


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


def key_of(names: Column, image: Column) -> Column:
    """The key string of a row image: its key columns' values joined (NULL-safe)."""
    return F.concat_ws("\u0001", F.transform(names, lambda c: F.coalesce(image[c], F.lit("\u0000"))))
