"""Fixed Spark schemas: the Dml batch line (canal flatMessage + Sluice fields), the
single-row change the executors receive, and the per-partition result."""

from __future__ import annotations

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

#: One single-row change routed to one mapping (what a partition holds).
CHANGE_COLUMNS = ["midx", "kind", "database", "table", "d", "o", "pkNames", "mysqlType",
                  "batchId", "seq", "row", "sub", "ordered", "fk"]

#: What each partition returns to the driver.
RESULT_SCHEMA = StructType([
    StructField("partition", IntegerType()),
    StructField("ok", BooleanType()),
    StructField("rows", LongType()),
    StructField("stats", StringType()),     # JSON of ApplyStats.as_dict()
    StructField("error", StringType()),     # one actionable message, or null
    StructField("error_table", StringType()),
    StructField("error_key", StringType()),
    StructField("seconds", StringType()),
])
