"""The Spark side of the Kafka store: a round's offset ranges as the job's DataFrame.

The executors read the ranges, one task per topic-partition range, read-committed, failing on
data loss: with ``sluice.spark.KafkaRanges`` (sluice-spark.jar: a pooled ``KafkaConsumer`` per
task, nothing asked of the broker on the driver), else with Spark's own Kafka source
(``spark-sql-kafka-0-10``) in batch mode (``assign`` + ``startingOffsets``/``endingOffsets``).
Each value is parsed in the JVM into the job's
schema (:data:`pipeline.store.records.JOB_SCHEMA`: row images stay JSON text), so what follows the
read is the file store's path unchanged. A record that is not a Dml/flatMessage JSON object
stops the job with ``poison record`` and its topic, partition and offset (``raise_error``).

Positions: records Sluice's capture wrote carry their own ``batchId`` and ``seq`` (the same as
the file store would give them). Records canal-server wrote carry none; theirs is derived from
where they are: ``batchId = offset + 1``, ``seq = partition`` -- stable across runs, and the
source order within a partition (the only order canal's topics have).
"""

from __future__ import annotations

import json
from typing import Any

from pipeline.store.kafka.client import Topics

POISON = "poison record"


def _by_topic(offsets: dict[tuple[str, int], int], keep: set[tuple[str, int]]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (t, p), o in sorted(offsets.items()):
        if (t, p) in keep:
            out.setdefault(t, {})[str(p)] = o
    return out


def kafka_frame(spark: Any, topics: Topics, start: dict[tuple[str, int], int], end: dict[tuple[str, int], int],
                canal: bool) -> Any:
    """The records in ``[start, end)`` per partition as a DataFrame of the job's schema."""

    from pipeline.store.records import JOB_SCHEMA

    ranges = {tp for tp, o in end.items() if o > start.get(tp, 0)}
    if not ranges:
        return spark.createDataFrame([], JOB_SCHEMA)
    settings = {k: v for k, v in topics.settings().items() if k.startswith(("bootstrap", "security", "sasl", "ssl"))}
    from .values import has_range_reader

    if has_range_reader(spark):
        return checked(read_ranges(spark, [(t, p, start.get((t, p), 0), end[(t, p)]) for t, p in sorted(ranges)],
                                   settings), canal)
    assign = {t: sorted(p for tt, p in ranges if tt == t) for t in sorted({t for t, _ in ranges})}
    reader = (spark.read.format("kafka").option("assign", json.dumps(assign))
              .option("startingOffsets", json.dumps(_by_topic({tp: start.get(tp, 0) for tp in ranges}, ranges)))
              .option("endingOffsets", json.dumps(_by_topic(end, ranges)))
              .option("failOnDataLoss", "true")
              .option("kafka.isolation.level", "read_committed")
              # larger fetches than the consumer's defaults (500 records a poll, 1 MiB a partition):
              # fewer round trips to the broker; bench/apply.py --store kafka read 10-20% faster
              .option("kafka.max.poll.records", "10000")
              .option("kafka.max.partition.fetch.bytes", str(16 << 20))
              .option("kafka.fetch.max.bytes", str(64 << 20))
              # the range's end is known: never let the broker hold a fetch waiting for more data.
              # With the default (500 ms) every task waited that long once, at its range's end
              # (a transaction's commit marker is the last offset): a 100k-record read took 0.8 s
              # instead of 0.3 s, mostly idle
              .option("kafka.fetch.max.wait.ms", "10")
              .options(**{f"kafka.{k}": v for k, v in settings.items()}))
    from .values import v2_kafka

    with v2_kafka(spark):
        raw = reader.load()
    return parse_values(spark, raw, canal)


def read_ranges(spark: Any, ranges: list[tuple[str, int, int, int]], settings: dict[str, str]) -> Any:
    """``(topic, partition, start, end)`` ranges read by the executors with ``sluice-spark.jar``'s
    reader (``sluice.spark.KafkaRanges``), values parsed from their bytes: rows ``topic``,
    ``partition``, ``offset``, ``value`` (the job's schema), ``bad``."""
    from pyspark.sql import DataFrame

    from pipeline.store.records import JOB_SCHEMA

    jdf = spark._jvm.sluice.spark.KafkaRanges.read(spark._jsparkSession, json.dumps(ranges), json.dumps(settings),
                                                   JOB_SCHEMA.json())
    return DataFrame(jdf, spark)


def parse_values(spark: Any, raw: Any, canal: bool, *, from_bytes: bool | None = None) -> Any:
    """Kafka source rows (``topic``, ``partition``, ``offset``, ``value``) as the job's DataFrame.

    Each value is parsed once (:func:`.values.parsed_values`). A record that is not a Dml /
    flatMessage JSON object stops the job with ``poison record`` and its topic, partition and
    offset. The parsed rows sit behind an RDD, so the optimizer cannot push a later filter of the
    job below the parse, and every field is read through the check: no filter drops a poison
    record unchecked. ``from_bytes``: which parse (:func:`.values.parsed_values`; tests)."""
    from .values import parsed_values

    return checked(parsed_values(spark, raw, from_bytes=from_bytes), canal)


def checked(parsed: Any, canal: bool) -> Any:
    """Parsed rows (``topic``, ``partition``, ``offset``, ``value``, ``bad``) as the job's
    DataFrame; a poison record stops the job naming its place (:func:`parse_values`)."""
    from pipeline.store.records import KAFKA_FIELDS

    # SQL text, one py4j call per projection: built with Column functions, the same projections
    # took some sixty py4j round trips, 0.1 s of every read's start
    bad = ("bad OR value IS NULL OR value.type IS NULL OR (NOT coalesce(value.isDdl, false) AND value.data IS NULL "
           "AND value.type IN ('INSERT', 'UPDATE', 'DELETE'))")
    if not canal:
        bad += " OR value.batchId IS NULL OR value.seq IS NULL"
    what = (": not a canal flatMessage / Sluice Dml JSON object (type, data" + ("" if canal else ", batchId, seq")
            + "); nothing was acked")
    where = (f"concat('{POISON}: topic ', topic, ' partition ', cast(`partition` AS string), ' offset ', "
             f"cast(`offset` AS string), '{what}')")
    # ``ok`` is computed once per record (a projection of its own: the optimizer does not copy a
    # non-trivial expression into each of its uses), and every field is read through it
    ok = parsed.selectExpr("value", "`offset`", "`partition`",
                           f"CASE WHEN {bad} THEN raise_error({where}) ELSE true END AS ok")
    cols = [f"CASE WHEN ok THEN value.`{f}` END AS `{f}`" for f in KAFKA_FIELDS if f not in ("batchId", "seq")]
    if canal:
        cols += ["CASE WHEN ok THEN `offset` + 1 END AS batchId",
                 "CASE WHEN ok THEN cast(`partition` AS bigint) END AS seq"]
    else:
        cols += ["CASE WHEN ok THEN value.batchId END AS batchId", "CASE WHEN ok THEN value.seq END AS seq"]
    return ok.selectExpr(*cols)
