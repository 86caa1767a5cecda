"""Rows of Spark's Kafka source with their values parsed into the job's schema, in the JVM, once
per record: the job's read where ``sluice.spark.KafkaRanges`` is not used (no sluice-spark.jar,
or ``SLUICE_KAFKA_READER=spark``; frame.py). ``KafkaRanges`` parses with the same
``ValueParser`` as the byte path here.

Two ways, the same rows (``topic``, ``partition``, ``offset``, ``value`` of
:data:`pipeline.store.records.JOB_SCHEMA`, ``bad``):

* **From the bytes** (``sluice.spark.KafkaValues``, ``jvm/`` built into ``sluice-spark.jar``
  by ``scripts/bootstrap`` beside Spark's Kafka connector): Spark's own ``JacksonParser`` over
  each value's bytes, as Spark's JSON data source reads the lines of a file -- Jackson's UTF-8
  parser, and a nested object the schema keeps as a string (a row image) is the slice of the
  record it came from. ``bad``: the value is missing, is not exactly one JSON object, is not
  UTF-8, or does not fit the schema.
* **From text**, where that jar is not on the class path (e.g. a cluster given only
  ``--packages spark-sql-kafka``): Spark's JSON data source over a ``Dataset[String]``
  (``DataFrameReader.json(Dataset)``, public in Scala, reached through py4j). Each line carries
  the record's place, ``{"topic":..,"partition":..,"offset":..,"value":<the record>}``; a line the
  reader cannot parse keeps its text, and the place is read back from its start (written here,
  always intact). A value that is not UTF-8 is poison here too. What this path cannot see: a value
  that is an object followed by more members (``{...},"k":1``) reads as a longer line, the extra
  members ignored (or, named ``value``, taking its place); no producer writes that, and the
  byte path refuses it.

Both are faster than ``from_json``, which in Spark 4.2 decodes every value through an
``InputStreamReader`` and writes every row image out again with a JSON generator
(docs/benchmarks.md: the Kafka store's read was 0.8x the file store's). Either way the Kafka
source runs as DataSource V2 (rows handed on as they are read, where the V1 relation Spark picks
by default converts each to an external ``Row`` and back).
"""

from __future__ import annotations

from typing import Any

#: the JSON object each record becomes on the text path: its place, then its value
_WRAP = ('{"topic":"', '","partition":', ',"offset":', ',"value":', "}")
#: the column the JSON reader puts a line it cannot parse in (its text)
_CORRUPT = "_corrupt"
#: the place at the start of a line the reader could not parse (Java regex; groups 1-3)
_PLACE = "^" + "".join(f"\\Q{s}\\E{g}" for s, g in zip(_WRAP[:3], ('([^"]*)', "(-?[0-9]+)", "(-?[0-9]+)"), strict=True))
#: Spark's list of sources read through their V1 relation (``kafka`` is taken out for our read)
V1_SOURCES = "spark.sql.sources.useV1SourceList"


def parsed_values(spark: Any, raw: Any, *, from_bytes: bool | None = None) -> Any:
    """``raw`` (Spark's Kafka source rows) parsed; ``from_bytes``: force a path (tests)."""
    if from_bytes is None:
        from_bytes = has_byte_parser(spark)
    return _from_bytes(spark, raw) if from_bytes else _from_text(spark, raw)


def has_byte_parser(spark: Any) -> bool:
    """Whether ``sluice-spark.jar`` (``sluice.spark.KafkaValues``) is on the session's class path."""
    return _loads(spark, "sluice.spark.KafkaValues")


def has_range_reader(spark: Any) -> bool:
    """Whether the job reads its ranges with ``sluice.spark.KafkaRanges`` (``sluice-spark.jar``,
    and the Kafka client beside it), not Spark's Kafka source; ``SLUICE_KAFKA_READER=spark``
    forces Spark's (tests, benchmarks)."""
    import os

    if os.environ.get("SLUICE_KAFKA_READER", "").lower() == "spark":
        return False
    return _loads(spark, "sluice.spark.KafkaRanges", "org.apache.kafka.clients.consumer.KafkaConsumer")


def _loads(spark: Any, *classes: str) -> bool:
    """Whether the session's JVM finds every one of ``classes``."""
    try:  # py4j answers a class it found with a JavaClass, a name it did not with a JavaPackage
        return all(type(_lookup(spark._jvm, name)).__name__ == "JavaClass" for name in classes)
    except Exception:  # noqa: BLE001 - no JVM view (e.g. Spark Connect): neither JVM path
        return False


def _lookup(jvm: Any, name: str) -> Any:
    for part in name.split("."):
        jvm = getattr(jvm, part)
    return jvm


def v2_kafka(spark: Any) -> Any:
    """A context manager: Spark's DataSource V2 Kafka reader for the loads inside it."""
    from contextlib import contextmanager

    @contextmanager
    def scope():
        before = spark.conf.get(V1_SOURCES)
        kept = ",".join(s for s in before.split(",") if s.strip().lower() != "kafka")
        if kept != before:
            spark.conf.set(V1_SOURCES, kept)
        try:
            yield
        finally:
            if kept != before:
                spark.conf.set(V1_SOURCES, before)

    return scope()


def _from_bytes(spark: Any, raw: Any) -> Any:
    from pyspark.sql import DataFrame

    from pipeline.store.records import JOB_SCHEMA

    jdf = spark._jvm.sluice.spark.KafkaValues.parse(raw._jdf, JOB_SCHEMA.json())
    return DataFrame(jdf, spark)


def _from_text(spark: Any, raw: Any) -> Any:
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

    from pipeline.store.records import JOB_SCHEMA

    t, p, o, v, end = _WRAP
    # a value that is not UTF-8 becomes nothing (a line the reader cannot parse: poison), where the
    # cast to a Java String would have replaced its bad bytes with U+FFFD
    text = F.col("value").cast("string")
    text = F.when(F.expr("is_valid_utf8(cast(value as string))"), text).otherwise(F.lit(""))
    line = F.concat(F.lit(t), F.col("topic"), F.lit(p), F.col("partition").cast("string"), F.lit(o),
                    F.col("offset").cast("string"), F.lit(v), F.coalesce(text, F.lit("")), F.lit(end))
    lines = getattr(raw.select(line.alias("value"))._jdf, "as")(spark._jvm.org.apache.spark.sql.Encoders.STRING())
    schema = StructType([StructField("topic", StringType()), StructField("partition", IntegerType()),
                         StructField("offset", LongType()), StructField("value", JOB_SCHEMA),
                         StructField(_CORRUPT, StringType())])
    reader = spark.read.schema(schema).option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", _CORRUPT)
    parsed = DataFrame(reader._jreader.json(lines), spark)
    broken = F.col(_CORRUPT)

    def at(name: str, group: int, kind: str) -> Any:  # parsed, else read from the broken line's start
        return F.coalesce(F.col(name), F.regexp_extract(broken, _PLACE, group).cast(kind)).alias(name)

    return parsed.select(at("topic", 1, "string"), at("partition", 2, "int"), at("offset", 3, "long"), "value",
                         broken.isNotNull().alias("bad"))
