"""The SparkSession of a sync: local[*] by default, or whatever spark-submit set up.

A session started here (not under spark-submit) gets the driver Java options of
:mod:`pipeline.job.jvm`: the class-data-sharing archive when ``scripts/bootstrap`` built one,
and C1-only JIT when the caller says the run is small. While the JVM starts, a thread imports
the Python modules PySpark's driver needs right after it (PySpark's first py4j call imports
pandas and pyarrow through ``pyspark.testing.utils``), so the two overlap instead of adding up.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

from pyspark.sql import SparkSession

from pipeline.config import Config, SparkConfig

DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"


def get_spark(conf: SparkConfig, app_name: str = "sluice-sync", master: str | None = None,
              jars: list[str] | None = None, *, small: bool = False) -> SparkSession:
    """Build (or join, under spark-submit) the session with the settings the job relies on.

    ``jars``: added to the class path of a session built here (the Kafka store's connector;
    under spark-submit ``--jars`` brings it). ``small``: the run applies at most
    ``spark.smallRows`` rows, so the JVM gets C1-only JIT
    (:func:`pipeline.job.jvm.driver_java_options`); ignored when the JVM is already running."""
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
                       .config("spark.driver.host", "127.0.0.1").config("spark.ui.enabled", "false")
                       # workers import PySpark's cached bytecode, not its zip (pipeline/job/pydaemon.py)
                       .config("spark.python.daemon.module", "pipeline.job.pydaemon"))
    builder = (builder.config("spark.sql.shuffle.partitions", str(conf.partitions))
               .config("spark.sql.execution.arrow.maxRecordsPerBatch", "5000")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.ui.showConsoleProgress", "false"))
    if jars and not submitted:
        builder = builder.config("spark.jars", ",".join(jars))
    for k, v in conf.conf.items():
        if k != DRIVER_JAVA_OPTIONS:
            builder = builder.config(k, v)
    user_opts = conf.conf.get(DRIVER_JAVA_OPTIONS)
    if not submitted and not _jvm_running():
        from pipeline.job.jvm import driver_java_options, merge_options, small_sql_conf
        from pipeline.job.reaper import install

        install()  # every exit path ends the JVM launched here, also one interrupted while it starts

        opts = merge_options(driver_java_options(small), user_opts)
        if opts:
            builder = builder.config(DRIVER_JAVA_OPTIONS, opts)
        for k, v in small_sql_conf(small).items():
            if k not in conf.conf:  # the user's spark.conf wins
                builder = builder.config(k, v)
                _INTERPRETED.add(k)
        prefetch = threading.Thread(target=_prefetch_imports, name="sluice-prefetch", daemon=True)
        prefetch.start()
    elif user_opts:
        builder = builder.config(DRIVER_JAVA_OPTIONS, user_opts)
    spark = builder.getOrCreate()
    _plain_sigint()
    spark.sparkContext.setLogLevel(os.environ.get("SLUICE_SPARK_LOG_LEVEL", "WARN"))
    _quiet_loggers(spark)
    return spark


def _plain_sigint() -> None:
    """Ctrl-C raises KeyboardInterrupt, as before the session started. A SparkContext made in the
    main thread installs a SIGINT handler that calls the JVM from inside the signal handler, while
    the main thread waits on the same py4j connection: "reentrant call", Py4JNetworkError and
    three tracebacks. The run cancels the session's jobs itself once the interrupt reached it
    (:func:`pipeline.ops.run._cancel_jobs`); a plain ``sluice sync`` ends, and its JVM with it."""
    if threading.current_thread() is not threading.main_thread():
        return
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler) and getattr(handler, "__module__", "").startswith("pyspark"):
        from sluice_common import stopping

        stopping.on_sigint()


#: Spark loggers whose warnings say nothing about a sync: reading one batch file whose path has an
#: escaped glob character (a store in a folder named ``[x]``: pipeline/fsutil.py), Spark looks
#: for a streaming sink's metadata under the escaped name and logs 90 lines of "does not exist"
QUIET_LOGGERS = ("org.apache.spark.sql.execution.streaming.sinks.FileStreamSink",
                 "org.apache.spark.sql.execution.streaming.FileStreamSink")


def _quiet_loggers(spark: SparkSession) -> None:
    """Set :data:`QUIET_LOGGERS` to ERROR (best effort: a session without log4j 2 keeps them)."""
    try:
        jvm = spark.sparkContext._jvm
        level = jvm.org.apache.logging.log4j.Level.ERROR
        for name in QUIET_LOGGERS:
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, level)
    except Exception:  # noqa: BLE001 - only quieter logs
        pass


#: the small-run settings this process gave its session (:func:`codegen_for_round`)
_INTERPRETED: set[str] = set()


def codegen_for_round(spark: SparkSession, rows: int, small_rows: int) -> None:
    """A round of more than ``small_rows`` rows in a session started for a small run (the
    pending count was an estimate, or more arrived): Spark's code generation back on for this
    session's later jobs."""
    if _INTERPRETED and not (small_rows and rows <= small_rows):
        from pipeline.job.jvm import CODEGEN_SQL_CONF

        for k in sorted(_INTERPRETED):
            spark.conf.set(k, CODEGEN_SQL_CONF[k])
        _INTERPRETED.clear()


def _jvm_running() -> bool:
    from pyspark import SparkContext

    return SparkContext._gateway is not None


def _prefetch_imports() -> None:
    """Import what the driver needs once the JVM answers, while the JVM is still starting."""
    try:
        import pyarrow  # noqa: F401  (mapInArrow on the driver)
        import pyspark.testing.utils  # noqa: F401  (PySpark's py4j argument converter imports it)
    except Exception:  # noqa: BLE001 - only a head start; the real import reports any problem
        pass


def _submit_conf() -> dict:
    """Settings spark-submit passed to this driver (empty when run as a plain program)."""
    props = os.environ.get("SPARK_SUBMIT_OPTS", "")
    if "PYSPARK_GATEWAY_PORT" in os.environ or os.environ.get("SPARK_ENV_LOADED"):
        return {"spark.master": "from spark-submit", "opts": props}
    return {}


def store_jars(cfg: Config) -> list[str] | None:
    """The jars the configured store needs in Spark (the Kafka connector), or None. None under
    spark-submit too: ``--jars`` (``sluice package``'s dist/jars) or ``--packages`` brings them, and
    the driver has no cache of its own to look in."""
    if cfg.store.kind != "kafka" or "spark.master" in _submit_conf() or SparkSession.getActiveSession() is not None:
        return None  # a running session (a notebook's, a follow's earlier round) has what it was given
    from pipeline.store.kafka.sparkjars import kafka_jars

    return kafka_jars()


def warm_workers(spark: SparkSession, kinds: list[str], scan: bool = True) -> None:
    """Run one trivial task that imports the executor side of the job (the chunk runner, the
    scan and the adapters of ``kinds``): with worker reuse (Spark's default) the sync's first task
    then finds a Python worker with its imports done. With ``scan`` (the run's segments scan) a
    plain RDD's task, as a scanned segment's (pipeline/job/segment.py: no SQL planning); else a
    ``mapInArrow`` task, which also compiles the JVM's Arrow path the plan's segments take.
    Called in the background while the driver plans its first round; errors are ignored (only
    a head start)."""
    from functools import partial

    if scan:
        spark.sparkContext.parallelize([0], 1).mapPartitions(partial(_warm, tuple(kinds), True)).collect()
    else:
        spark.range(1, numPartitions=1).mapInArrow(partial(_warm, tuple(kinds), False), "id long").collect()


def _warm(kinds: tuple[str, ...], scan: bool, items):  # noqa: ANN001, ANN202 - an RDD or mapInArrow function
    import importlib

    import pipeline.job.partition  # noqa: F401
    if scan:
        import pipeline.job.scan  # noqa: F401
    for kind in kinds:
        importlib.import_module(f"adapters.{kind}.writer")
    yield from items
