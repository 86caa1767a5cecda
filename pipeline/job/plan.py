"""Turn the Dml lines of pending batches into partitioned single-row changes (in the JVM).

Steps (all Spark SQL expressions, so splitting and hashing never leave the JVM):
1. keep DML lines of one segment (between two DDL barriers);
2. route each line to every mapping whose table it names (one output row per mapping);
3. split multi-row Dml into rows with ``posexplode`` (keeping seq = batchId, seq, row);
4. an UPDATE that changes the target key becomes DELETE(old key) + INSERT(new row);
5. hash-partition by (mapping, target key) and sort each partition by seq.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from pipeline.job.routing import Route, concurrent_expr, key_names_expr, key_of, midx_expr
from pipeline.job.schema import DML_SCHEMA

_MAP = "map<string,string>"


@dataclass(frozen=True)
class Segment:
    """DML lines strictly after ``start`` and strictly before ``end`` ((batchId, seq) pairs;
    None = open). ``ddl`` is the barrier that ends it (applied after the segment)."""

    start: tuple[int, int] | None
    end: tuple[int, int] | None
    ddl: object | None = None

    def condition(self) -> Column:
        pos = F.struct(F.col("batchId"), F.col("seq"))
        cond = ~F.coalesce(F.col("isDdl"), F.lit(False))
        if self.start is not None:
            cond &= pos > F.struct(F.lit(self.start[0]).cast("long"), F.lit(self.start[1]).cast("long"))
        if self.end is not None:
            cond &= pos < F.struct(F.lit(self.end[0]).cast("long"), F.lit(self.end[1]).cast("long"))
        return cond


def segments(barriers: list) -> list[Segment]:
    """Cut at each DDL barrier (objects with ``.seq = (batchId, seq, 0)``), in order."""
    out, start = [], None
    for ddl in barriers:
        end = (ddl.seq[0], ddl.seq[1])
        out.append(Segment(start, end, ddl))
        start = end
    out.append(Segment(start, None, None))
    return out


def route_rows(dml: DataFrame, routes: list[Route]) -> DataFrame:
    """One row per (Dml line, route that wants it), with ``ridx`` and the mapping's ``midx``.
    A single route (the common one-table group) is a plain filter, no explode."""
    if len(routes) == 1:
        return dml.where(routes[0].condition()).withColumn("ridx", F.lit(0)).withColumn("midx", F.lit(routes[0].midx))
    hits = F.array(*[F.when(r.condition(), F.lit(i)) for i, r in enumerate(routes)])
    routed = dml.withColumn("ridx", F.explode(F.filter(hits, lambda x: x.isNotNull())))
    return routed.withColumn("midx", midx_expr(routes))


def split_rows(routed: DataFrame, routes: list[Route]) -> DataFrame:
    """Explode rows, detect key changes, and produce the change rows with their keys.

    Only a key-changing UPDATE builds its before-image and becomes two rows (``sub`` 0 =
    DELETE of the old key, 1 = INSERT of the new row); every other row passes through as is.
    The row images leave the JVM as JSON text (``d``, ``o``): shuffling and handing strings to
    Arrow costs a fraction of what map columns cost, and the executor decodes them with
    ``json.loads``."""
    rows = routed.select(
        "ridx", "midx", "type", "database", "table", "pkNames", "mysqlType", "batchId", "seq", "old",
        F.posexplode("data").alias("row", "d"))
    o = F.try_element_at(F.col("old"), (F.col("row") + 1).cast("int"))
    rows = rows.withColumn("o", o).drop("old")
    names = key_names_expr(routes, F.coalesce(F.col("pkNames"), F.array().cast("array<string>")))
    rows = rows.withColumn("knames", names).withColumn("key", key_of(F.col("knames"), F.col("d")))
    is_update = (F.col("type") == "UPDATE") & F.col("o").isNotNull()
    old_key = F.concat_ws("\u0001", F.transform(F.col("knames"), lambda c: F.coalesce(
        F.when(F.map_contains_key(F.col("o"), c), F.try_element_at(F.col("o"), c)).otherwise(F.col("d")[c]),
        F.lit("\u0000"))))
    rows = rows.withColumn("old_key", F.when(is_update, old_key).otherwise(F.col("key")))
    changed = F.col("old_key") != F.col("key")
    before = F.transform_values(
        "d", lambda k, v: F.when(F.map_contains_key(F.col("o"), k), F.try_element_at(F.col("o"), k)).otherwise(v))
    rows = rows.withColumn("changed", changed).withColumn(
        "sub", F.explode(F.when(F.col("changed"), F.array(F.lit(0), F.lit(1))).otherwise(F.array(F.lit(0)))))
    first = F.col("changed") & (F.col("sub") == 0)
    kind = (F.when(first, F.lit("DELETE")).when(F.col("changed"), F.lit("INSERT")).otherwise(F.col("type")))
    out = rows.select(
        "midx", kind.alias("kind"), "database", "table",
        F.to_json(F.when(first, before).otherwise(F.col("d"))).alias("d"),
        F.to_json(F.when(F.col("changed"), F.lit(None).cast(_MAP)).otherwise(F.col("o"))).alias("o"),
        F.to_json("pkNames").alias("pkNames"), F.to_json("mysqlType").alias("mysqlType"),
        "batchId", "seq", "row", "sub", F.when(first, F.col("old_key")).otherwise(F.col("key")).alias("key"),
        F.when(concurrent_expr(routes), F.when(first, F.col("old_key")).otherwise(F.col("key")))
        .otherwise(F.lit("")).alias("pkey"))
    # per-table metadata travels as JSON text too: the executor decodes each distinct text once
    return out


def read_dml(spark: SparkSession, paths: list[str], ordered: bool) -> DataFrame:
    """The batch files' lines as a DataFrame of the fixed Dml schema.

    ``ordered``: one scan per file, unioned in batch order, so that the DataFrame's partitions
    hold the lines in (batchId, seq) order (the single-partition plan relies on it instead of a
    sort); otherwise one scan over all files (Spark packs files into partitions by size)."""
    def scan(p):
        return spark.read.schema(DML_SCHEMA).option("mode", "FAILFAST").json(p)
    if not ordered:
        return scan(paths)
    return reduce(DataFrame.unionAll, [scan(p) for p in paths])


def partitioned_changes(dml: DataFrame, segment: Segment, routes: list[Route], partitions: int) -> DataFrame:
    """The changes of one segment, hash-partitioned by (mapping, key), sorted by seq.

    One partition: no shuffle and no sort. ``dml`` must then come from :func:`read_dml` with
    ``ordered=True``: the lines stream in batch order from the JSON reader straight to the
    executor's Python worker (which checks the order), so parsing and applying overlap
    instead of waiting for a shuffle and a sort."""
    routed = route_rows(dml.where(segment.condition()), routes)
    changes = split_rows(routed, routes)
    if partitions == 1:
        return changes.coalesce(1).drop("pkey")
    return (changes.repartition(partitions, "midx", "pkey")
            .sortWithinPartitions("batchId", "seq", "row", "sub")
            .drop("pkey"))
