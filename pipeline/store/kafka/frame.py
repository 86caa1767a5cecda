"""The Spark side of the Kafka store: a round's offset ranges as the job's DataFrame.

Spark's own Kafka source (``spark-sql-kafka-0-10``) reads the ranges in batch mode
(``assign`` + ``startingOffsets``/``endingOffsets``), one task per topic-partition range, on the
executors, read-committed, failing on data loss. Each value is parsed in the JVM into the job's
schema (:data:`pipeline.job.schema.JOB_SCHEMA`: row images stay JSON text), so what follows the
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
    from pyspark.sql import functions as F

    from pipeline.job.schema import JOB_SCHEMA, KAFKA_FIELDS

    ranges = {tp for tp, o in end.items() if o > start.get(tp, 0)}
    if not ranges:
        return spark.createDataFrame([], JOB_SCHEMA)
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
              .option("kafka.fetch.max.bytes", str(64 << 20)))
    for k, v in topics.settings().items():
        if k.startswith(("bootstrap", "security", "sasl", "ssl")):
            reader = reader.option(f"kafka.{k}", v)
    raw = reader.load()
    # The value is parsed once per record. The parse sits in a projection with a nondeterministic
    # guard (``spark_partition_id``): otherwise the optimizer pushes every later filter (the poison
    # check, the segment, the routes) below it and inlines ``from_json`` into each of them -- ten
    # parses of each record instead of one (the Kafka store read 4x slower than the file store).
    value = F.col("value").cast("string")
    rec = F.when(F.spark_partition_id() >= 0, F.from_json(value, JOB_SCHEMA, {"mode": "PERMISSIVE"}))
    parsed = raw.select(rec.alias("r"), "topic", "partition", "offset")
    r = F.col("r")
    bad = r.isNull() | r["type"].isNull() | (
        ~F.coalesce(r["isDdl"], F.lit(False)) & r["data"].isNull() & r["type"].isin("INSERT", "UPDATE", "DELETE"))
    if not canal:
        bad = bad | r["batchId"].isNull() | r["seq"].isNull()
    where = F.concat(F.lit(f"{POISON}: topic "), F.col("topic"), F.lit(" partition "),
                     F.col("partition").cast("string"), F.lit(" offset "), F.col("offset").cast("string"),
                     F.lit(": not a canal flatMessage / Sluice Dml JSON object (type, data"
                           + ("" if canal else ", batchId, seq") + "); nothing was acked"))
    # every field is read through the check: no later filter can drop a poison record unchecked
    checked = parsed.select(F.when(bad, F.raise_error(where)).otherwise(r).alias("c"), "partition", "offset")
    cols = [F.col(f"c.{f}").alias(f) for f in KAFKA_FIELDS if f not in ("batchId", "seq")]
    if canal:
        cols += [(F.col("offset") + 1).alias("batchId"), F.col("partition").cast("long").alias("seq")]
    else:
        cols += [F.col("c.batchId").alias("batchId"), F.col("c.seq").alias("seq")]
    return checked.select(*cols)
