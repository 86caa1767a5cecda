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

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipeline.job.routing import Route, concurrent_expr, key_names_expr, key_of, midx_expr

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
    """One row per (Dml line, route that wants it), with ``ridx`` and the mapping's ``midx``."""
    hits = F.array(*[F.when(r.condition(), F.lit(i)) for i, r in enumerate(routes)])
    routed = dml.withColumn("ridx", F.explode(F.filter(hits, lambda x: x.isNotNull())))
    return routed.withColumn("midx", midx_expr(routes))


def split_rows(routed: DataFrame, routes: list[Route]) -> DataFrame:
    """Explode rows, detect key changes, and produce the change rows with their keys."""
    rows = routed.select(
        "ridx", "midx", "type", "database", "table", "pkNames", "mysqlType", "batchId", "seq", "old",
        F.posexplode("data").alias("row", "d"))
    o = F.try_element_at(F.col("old"), (F.col("row") + 1).cast("int"))
    rows = rows.withColumn("o", o).drop("old")
    names = key_names_expr(routes, F.coalesce(F.col("pkNames"), F.array().cast("array<string>")))
    before = F.transform_values(
        "d", lambda k, v: F.when(F.map_contains_key(F.col("o"), k), F.try_element_at(F.col("o"), k)).otherwise(v))
    rows = rows.withColumn("knames", names).withColumn("before", before)
    key, old_key = key_of(F.col("knames"), F.col("d")), key_of(F.col("knames"), F.col("before"))
    rows = rows.withColumn("key", key).withColumn("old_key", old_key)
    changed = (F.col("type") == "UPDATE") & (F.col("old_key") != F.col("key"))
    null_map = F.lit(None).cast(_MAP)

    def variant(kind: Column, k: Column, d: Column, o: Column, sub: int) -> Column:
        return F.struct(kind.alias("kind"), k.alias("key"), d.alias("d"), o.alias("o"), F.lit(sub).alias("sub"))

    variants = F.when(changed, F.array(
        variant(F.lit("DELETE"), F.col("old_key"), F.col("before"), null_map, 0),
        variant(F.lit("INSERT"), F.col("key"), F.col("d"), null_map, 1),
    )).otherwise(F.array(variant(F.col("type"), F.col("key"), F.col("d"), F.col("o"), 0)))
    out = rows.select("ridx", "midx", "database", "table", "pkNames", "mysqlType", "batchId", "seq", "row",
                      F.explode(variants).alias("v"))
    out = out.select("ridx", "midx", F.col("v.kind").alias("kind"), "database", "table", F.col("v.d").alias("d"),
                     F.col("v.o").alias("o"), "pkNames", "mysqlType", "batchId", "seq", "row",
                     F.col("v.sub").alias("sub"), F.col("v.key").alias("key"))
    out = out.withColumn("pkey", F.when(concurrent_expr(routes), F.col("key")).otherwise(F.lit("")))
    # per-table metadata travels as JSON text: the executor decodes each distinct text once
    return (out.drop("ridx").withColumn("pkNames", F.to_json("pkNames"))
            .withColumn("mysqlType", F.to_json("mysqlType")))


def partitioned_changes(dml: DataFrame, segment: Segment, routes: list[Route], partitions: int) -> DataFrame:
    """The changes of one segment, hash-partitioned by (mapping, key), sorted by seq."""
    routed = route_rows(dml.where(segment.condition()), routes)
    changes = split_rows(routed, routes)
    return (changes.repartition(partitions, "midx", "pkey")
            .sortWithinPartitions("batchId", "seq", "row", "sub")
            .drop("pkey"))
