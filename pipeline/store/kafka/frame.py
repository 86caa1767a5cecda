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
              .option("kafka.isolation.level", "read_committed"))
    for k, v in topics.settings().items():
        if k.startswith(("bootstrap", "security", "sasl", "ssl")):
            reader = reader.option(f"kafka.{k}", v)
    raw = reader.load()
    rec = F.from_json(F.col("value").cast("string"), JOB_SCHEMA, {"mode": "PERMISSIVE"})
    parsed = raw.select(rec.alias("r"), "topic", "partition", "offset")
    bad = F.col("r").isNull() | F.col("r.type").isNull() | (
        ~F.coalesce(F.col("r.isDdl"), F.lit(False)) & F.col("r.data").isNull() & F.col("r.type").isin(
            "INSERT", "UPDATE", "DELETE"))
    if not canal:
        bad = bad | F.col("r.batchId").isNull() | F.col("r.seq").isNull()
    where = F.concat(F.lit(f"{POISON}: topic "), F.col("topic"), F.lit(" partition "),
                     F.col("partition").cast("string"), F.lit(" offset "), F.col("offset").cast("string"),
                     F.lit(": not a canal flatMessage / Sluice Dml JSON object (type, data"
                           + ("" if canal else ", batchId, seq") + "); nothing was acked"))
    checked = parsed.where(F.when(bad, F.raise_error(where)).otherwise(F.lit(True)))
    cols = [F.col(f"r.{f}").alias(f) for f in KAFKA_FIELDS if f not in ("batchId", "seq")]
    if canal:
        cols += [(F.col("offset") + 1).alias("batchId"), F.col("partition").cast("long").alias("seq")]
    else:
        cols += [F.col("r.batchId").alias("batchId"), F.col("r.seq").alias("seq")]
    return checked.select(*cols)
