"""Turn the Dml lines of pending batches into partitioned single-row changes (in the JVM).

Steps (all Spark SQL expressions, so splitting and hashing never leave the JVM):
1. keep DML lines of one segment (between two DDL barriers);
2. route each line to every mapping whose table it names (one output row per mapping);
3. split multi-row Dml into rows with ``posexplode`` (keeping seq = batchId, seq, row);
4. an UPDATE that changes the target key becomes DELETE(old key) + INSERT(new row), except in
   an ordered group (:mod:`adapters.rdb.keys`), where it stays one UPDATE (the target's own
   ``ON UPDATE CASCADE`` must see it as one);
5. hash-partition by the part key -- the ordered group, or (mapping, target key as the target
   compares it: :mod:`pipeline.job.keyfold`) -- and sort each partition by seq (one partition:
   neither, the lines stream in batch order). Tables of a writer that folds each key's changes
   (``Capabilities.folds``) whose rows need only per-key order come after the others, sorted by
   key (``hk``: the key, then mapping and table) and by seq within a key, so that a chunk holds a
   key's whole run of changes and the target receives rows in key order.
Row images stay JSON text throughout (parsed in the JVM only where a key is needed).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipeline.job.keyfold import KeyPlan
from pipeline.job.routing import Route, concurrent_expr, key_names_expr, key_of, midx_expr, sql_lambda

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
        return dml.where(routes[0].condition()).withColumns({"ridx": F.lit(0), "midx": F.lit(routes[0].midx)})
    hits = F.array(*[F.when(r.condition(), F.lit(i)) for i, r in enumerate(routes)])
    routed = dml.withColumn("ridx", F.explode(F.array_compact(hits)))
    return routed.withColumn("midx", midx_expr(routes))


def split_rows(routed: DataFrame, routes: list[Route], keyed: bool = True, keys: KeyPlan | None = None
               ) -> DataFrame:
    """Explode rows, detect key changes, and produce the change rows (with their part key if ``keyed``).

    The row images ``d``/``o`` are JSON text from the reader (:data:`JOB_SCHEMA`) and leave the
    JVM as that text, decoded on the executor. The JVM parses them only where it needs a key:
    ``o`` of every UPDATE (does it touch a key column?), ``d`` of an UPDATE that does, and (when
    ``keyed``, i.e. hash-partitioned) ``d`` of every row. Only a key-changing UPDATE builds its
    before-image and becomes two rows (``sub`` 0 = DELETE of the old key, 1 = INSERT of the new
    row); every other row passes through as is. ``keys``: ordered groups and key folds (None: none),
    see :mod:`pipeline.job.keyfold`; a key-changing UPDATE of an ordered group stays one UPDATE."""
    keys = keys or KeyPlan()
    kept = ("ridx", "midx", "type", "database", "table", "pkNames", "mysqlType", "batchId", "seq", "fkChecks")
    rows = routed.select(*kept, "old", "rowNo", F.posexplode("data").alias("row", "d"))
    # Each DataFrame step is analyzed on its own (tens of ms on a warm driver, 50 ms and more in
    # a small run's cold JVM, paid again by every sync): independent columns are made in one step.
    # A record the Kafka store split across partitions keeps its rows' original numbers (rowNo).
    rows = rows.select(*kept, "d", F.try_element_at(F.col("old"), (F.col("row") + 1).cast("int")).alias("o"),
                       F.coalesce(F.try_element_at(F.col("rowNo"), (F.col("row") + 1).cast("int")),
                                  F.col("row").cast("long")).alias("row"),
                       keys.group_expr().alias("grp"))
    pk = F.coalesce(F.from_json(F.col("pkNames"), "array<string>"), F.array().cast("array<string>"))
    names = key_names_expr(routes, pk)
    is_update = (F.col("type") == "UPDATE") & F.col("o").isNotNull()
    if keyed:
        rows = rows.withColumns({"om": F.when(is_update, F.from_json(F.col("o"), _MAP)), "knames": names,
                                 "dm": F.from_json(F.col("d"), _MAP)})
        rows = rows.withColumn("key", key_of())
        key = F.col("key")
    else:  # one partition: key names and a row image only for an UPDATE that touches a key column
        # (``knames`` for every UPDATE with a before-image: where ``om`` did not parse, nothing
        # below uses them, as every use is behind ``om`` being there)
        rows = rows.withColumns({"om": F.when(is_update, F.from_json(F.col("o"), _MAP)),
                                 "knames": F.when(is_update, names)})
        touches = sql_lambda("exists(knames, k -> map_contains_key(om, k))")
        rows = rows.withColumn("dm", F.when(F.coalesce(touches, F.lit(False)), F.from_json(F.col("d"), _MAP)))
        key = key_of()
    om, dm = F.col("om"), F.col("dm")
    old_key = sql_lambda("concat_ws(chr(1), transform(knames, k -> coalesce("
                         "CASE WHEN map_contains_key(om, k) THEN try_element_at(om, k) ELSE dm[k] END, chr(0))))")
    changed = F.when(om.isNotNull() & dm.isNotNull() & F.col("grp").isNull(), old_key != key).otherwise(F.lit(False))
    rows = rows.withColumn("changed", changed)
    if keyed:
        rows = rows.withColumn("old_key", F.when(F.col("changed"), old_key).otherwise(key))
    before = sql_lambda("transform_values(dm, (k, v) -> "
                        "CASE WHEN map_contains_key(om, k) THEN try_element_at(om, k) ELSE v END)")
    rows = rows.withColumn(
        "sub", F.explode(F.when(F.col("changed"), F.array(F.lit(0), F.lit(1))).otherwise(F.array(F.lit(0)))))
    first = F.col("changed") & (F.col("sub") == 0)
    kind = (F.when(first, F.lit("DELETE")).when(F.col("changed"), F.lit("INSERT")).otherwise(F.col("type")))
    cols = ["midx", kind.alias("kind"), "database", "table",
            F.when(first, F.to_json(before)).otherwise(F.col("d")).alias("d"),
            F.when(F.col("changed"), F.lit(None).cast("string")).otherwise(F.col("o")).alias("o"),
            "pkNames", "mysqlType", "batchId", "seq", "row", "sub", F.col("grp").isNotNull().alias("ordered"),
            F.coalesce(F.col("fkChecks"), F.lit(True)).alias("fk")]
    if keyed:
        row_key = F.when(first, F.col("old_key")).otherwise(F.col("key"))
        by_key = F.concat(F.col("midx").cast("string"), F.lit("\u0002"),
                          F.when(concurrent_expr(routes), keys.fold_expr(row_key)).otherwise(F.lit("")))
        cols += [row_key.alias("key"),
                 F.when(F.col("grp").isNotNull(), F.concat(F.lit("G"), F.col("grp"))).otherwise(by_key).alias("part"),
                 F.when(concurrent_expr(routes), keys.by_key_expr(row_key)).alias("hk")]
    return rows.select(*cols)


def partitioned_changes(dml: DataFrame, segment: Segment, routes: list[Route], partitions: int,
                        keys: KeyPlan | None = None, in_order: bool = True) -> DataFrame:
    """The changes of one segment, hash-partitioned by part key (ordered group, or mapping and
    key as the target compares it), sorted by seq (a folding writer's key-grouped tables: by key,
    then seq; after the rest).

    One partition: no shuffle and no sort. ``dml`` must then come from :func:`read_dml` with
    ``ordered=True``: the lines stream in batch order from the JSON reader straight to the
    executor's Python worker (which checks the order), so parsing and applying overlap
    instead of waiting for a shuffle and a sort. (Records read from several Kafka partitions:
    ``in_order=False``, and the one partition is sorted.)"""
    routed = route_rows(dml.where(segment.condition()), routes)
    if partitions == 1:
        one = split_rows(routed, routes, keyed=False, keys=keys).coalesce(1)
        # ``in_order``: the lines arrive in (batchId, seq) order (files; one Kafka partition); else sort
        return one if in_order else one.sortWithinPartitions("batchId", "seq", "row", "sub")
    changes = split_rows(routed, routes, keyed=True, keys=keys)
    return (changes.repartition(partitions, "part")
            .sortWithinPartitions(F.col("hk").asc_nulls_first(), "batchId", "seq", "row", "sub")
            .drop("part"))
