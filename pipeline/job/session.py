"""The SparkSession of a sync: local[*] by default, or whatever spark-submit set up."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from pipeline.config import Config, SparkConfig


def get_spark(conf: SparkConfig, app_name: str = "sluice-sync", master: str | None = None,
              jars: list[str] | None = None) -> SparkSession:
    """Build (or join, under spark-submit) the session with the settings the job relies on.
    ``jars``: added to the class path of a session built here (the Kafka store's connector;
    under spark-submit ``--jars`` brings it)."""
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    submitted = "spark.master" in _submit_conf()
    if not submitted:
        m = master or conf.master
        builder = builder.master(m)
        if m.startswith("local"):
            builder = (builder.config("spark.driver.bindAddress", "127.0.0.1")
                       .config("spark.driver.host", "127.0.0.1").config("spark.ui.enabled", "false"))
    builder = (builder.config("spark.sql.shuffle.partitions", str(conf.partitions))
               .config("spark.sql.execution.arrow.maxRecordsPerBatch", "5000")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.ui.showConsoleProgress", "false"))
    if jars and not submitted:
        builder = builder.config("spark.jars", ",".join(jars))
    for k, v in conf.conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("SLUICE_SPARK_LOG_LEVEL", "WARN"))
    return spark


def _submit_conf() -> dict:
    """Settings spark-submit passed to this driver (empty when run as a plain program)."""
    props = os.environ.get("SPARK_SUBMIT_OPTS", "")
    if "PYSPARK_GATEWAY_PORT" in os.environ or os.environ.get("SPARK_ENV_LOADED"):
        return {"spark.master": "from spark-submit", "opts": props}
    return {}


def store_jars(cfg: Config) -> list[str] | None:
    """The jars the configured store needs in Spark (the Kafka connector), or None."""
    if cfg.store.kind != "kafka":
        return None
    from pipeline.store.kafka.sparkjars import kafka_jars

    return kafka_jars()
