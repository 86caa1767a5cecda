"""Fixed Spark schemas of the job: the single-row change the executors receive, and the
per-partition result. (The batch record's schema is the store's: pipeline/store/records.py.)"""

from __future__ import annotations

from pyspark.sql.types import (
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

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
    StructField("error_code", StringType()),  # pipeline.job.partition.result_batch's code, or null
])
