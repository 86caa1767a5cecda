"""Where the job finds Spark's Kafka connector (``spark-sql-kafka-0-10`` and what it needs).

``scripts/bootstrap`` caches the jars for the installed pyspark under
``<repo>/.sluice/cache/spark-kafka/<spark version>/`` (scripts/svc/sparkkafka.py);
``SLUICE_SPARK_KAFKA_JARS`` (a folder or a comma-separated list of jars) overrides it. Under
spark-submit the connector comes from ``--jars`` (``sluice package`` copies the jars into
``dist/jars``) or ``--packages org.apache.spark:spark-sql-kafka-0-10_2.13:<spark version>``.
"""

from __future__ import annotations

import os
from pathlib import Path

from sluice_common.errors import ConfigError

REPO = Path(__file__).resolve().parents[3]


def connector_dir() -> Path:
    """The cached connector folder for this pyspark."""
    import pyspark

    cache = Path(os.environ.get("SLUICE_CACHE", REPO / ".sluice" / "cache"))
    return cache / "spark-kafka" / pyspark.__version__


def kafka_jars() -> list[str]:
    """The connector's jar paths; ConfigError naming what to run when they are missing."""
    given = os.environ.get("SLUICE_SPARK_KAFKA_JARS")
    if given:
        p = Path(given)
        jars = sorted(map(str, p.glob("*.jar"))) if p.is_dir() else [j for j in given.split(",") if j]
    else:
        jars = sorted(map(str, connector_dir().glob("*.jar")))
    if not any("spark-sql-kafka-0-10" in j for j in jars):
        raise ConfigError("<install>", "store.kind", f"the Kafka store needs Spark's Kafka connector "
                          f"(spark-sql-kafka-0-10), which is not in {given or connector_dir()}",
                          hint="run scripts/bootstrap (it fetches the connector for this pyspark), or set "
                          "SLUICE_SPARK_KAFKA_JARS to a folder holding it")
    return jars
