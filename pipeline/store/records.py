"""The batch record as Spark reads it: one schema that capture's records (pipeline/capture/dml.py
writes them), the stores (files read by Spark's JSON reader, Kafka records parsed in the JVM) and
the job all use, here below all three (the store imports neither capture nor the job).

``DML_SCHEMA`` is a whole record (canal's flatMessage and Sluice's fields), ``JOB_SCHEMA`` what the
job reads of it, :func:`read_dml` the file store's batch files as such a DataFrame.
"""

from __future__ import annotations

from functools import reduce
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

_STR_MAP = MapType(StringType(), StringType(), valueContainsNull=True)

#: One batch-file line: one Dml per binlog rows event (or one DDL).
DML_SCHEMA = StructType([
    StructField("id", LongType()),
    StructField("database", StringType()),
    StructField("table", StringType()),
    StructField("type", StringType()),
    StructField("isDdl", BooleanType()),
    StructField("sql", StringType()),
    StructField("pkNames", ArrayType(StringType())),
    StructField("data", ArrayType(_STR_MAP)),
    StructField("old", ArrayType(_STR_MAP)),
    StructField("mysqlType", _STR_MAP),
    StructField("sqlType", MapType(StringType(), IntegerType())),
    StructField("es", LongType()),
    StructField("ts", LongType()),
    StructField("gtid", StringType()),
    StructField("logfile", StringType()),
    StructField("logpos", LongType()),
    StructField("batchId", LongType()),
    StructField("seq", LongType()),
    #: Kafka store: the original row numbers of a record split across partitions (routing.py)
    StructField("rowNo", ArrayType(LongType())),
    #: false: the rows event's NO_FOREIGN_KEY_CHECKS flag was set (absent: checked)
    StructField("fkChecks", BooleanType()),
])

#: How the job reads a batch line: the row images (``data``/``old`` elements), ``pkNames`` and
#: ``mysqlType`` stay raw JSON text (Spark's JSON reader copies a nested value given a string
#: type as its text), so they cross to the executor without being built into maps and written
#: back with ``to_json``; the JVM parses a row image only where it needs a key (see plan.py).
#: Fields the plan does not use are skipped by the reader.
_AS_TEXT = {"pkNames": StringType(), "data": ArrayType(StringType()), "old": ArrayType(StringType()),
            "mysqlType": StringType()}
_JOB_FIELDS = ("database", "table", "type", "isDdl", "sql", "pkNames", "data", "old", "mysqlType", "batchId", "seq",
               "rowNo", "fkChecks")
JOB_SCHEMA = StructType([StructField(f.name, _AS_TEXT.get(f.name, f.dataType))
                         for f in DML_SCHEMA.fields if f.name in _JOB_FIELDS])
#: the job's fields, in order (what a Kafka record's value is parsed into)
KAFKA_FIELDS = tuple(f.name for f in JOB_SCHEMA.fields)


def read_dml(spark: Any, paths: list[str], ordered: bool) -> Any:
    """The batch files' lines as a DataFrame of :data:`JOB_SCHEMA` (row images as JSON text).

    ``ordered``: one scan per file, unioned in batch order, so that the DataFrame's partitions
    hold the lines in (batchId, seq) order (the single-partition plan relies on it instead of a
    sort); otherwise one scan over all files (Spark packs files into partitions by size)."""
    from pyspark.sql import DataFrame

    def scan(p):
        return spark.read.schema(JOB_SCHEMA).option("mode", "FAILFAST").json(p)
    if not ordered:
        return scan(paths)
    return reduce(DataFrame.unionAll, [scan(p) for p in paths])
