"""Java options for the Spark driver JVM: a class-data-sharing archive and short-run JIT settings.

A cold ``sluice run`` spends most of its wall time starting the JVM: loading and verifying
some ten thousand classes, then interpreting and compiling them. Two JDK 17 features lower
that floor without changing what the job does:

* **AppCDS** (a dynamic class-data-sharing archive): one run with
  ``-XX:ArchiveClassesAtExit`` writes the classes a representative job loaded, already parsed
  and verified, to ``spark-<key>.jsa``; later JVMs map it with ``-XX:SharedArchiveFile``.
  ``scripts/bootstrap`` builds it once (:func:`build_archive`, ``sluice jvm build``). The
  archive is only valid for the JVM build and the class path it was made with, so its name
  carries a key of both (:func:`archive_key`): a new Spark or JDK simply finds no archive and
  runs without one (the JVM also refuses a stale archive by itself and runs on).
* **C1 only** (``-XX:TieredStopAtLevel=1``) for a *small* run: the JIT's optimizing compiler
  (C2) pays off only for code that runs long; a run that applies a few thousand rows is over
  before C2's work returns. ``sluice run``/``sync`` know the pending volume before the JVM
  starts (:func:`driver_java_options`).
* **Later C2** (``-XX:CompileThresholdScaling=10``) for a *large* run: tiered compilation with
  its thresholds ten times higher. With the default ones the JIT compiled Spark's planner and
  scheduler code, warm but short, for each of a backlog's many jobs: 5.7 CPU seconds of C1 and
  C2 threads in a 22 s sync on 2 cores, where scanned segments leave the JVM little else to do.
  The plan's row loops (JSON, shuffle, sort) run millions of times and still reach C2; C1 only
  made that path 40% slower (docs/benchmarks.md, backlog).
* **No generated code** for a *small* run (:data:`SMALL_SQL_CONF`): Spark SQL compiles Java
  source for each plan (whole-stage code generation, Janino) before it runs a row; for a few
  thousand rows, interpreting the same expressions costs less than compiling them (a 1000-row
  cold ``sluice run`` here: about 1.2 s less). A round larger than ``spark.smallRows`` in such a
  session turns code generation back on (:func:`pipeline.job.session.codegen_for_round`).

Under ``spark-submit`` the driver JVM exists before any of this runs: pass the options with
``--driver-java-options "$(sluice jvm options)"`` (docs/job.md).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: quiet JVM logging: the archive's own messages off, other warnings to stderr (not stdout,
#: which carries ``--json`` output)
LOG_OPTS = ("-Xlog:disable", "-Xlog:all=warning:stderr", "-Xlog:cds*=off:stderr")
#: JIT settings for a short run (C1 only)
SMALL_OPTS = ("-XX:TieredStopAtLevel=1",)
#: JIT settings for a large run: C2 for code that runs long, not for the planner's warm code
LARGE_OPTS = ("-XX:CompileThresholdScaling=10",)
ARCHIVE_PREFIX = "spark-"
#: Spark SQL settings of a small run's session: expressions interpreted, no Java generated and
#: compiled (``factoryMode`` is Spark's switch between generated and interpreted projections)
SMALL_SQL_CONF = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
#: Spark's defaults of the same settings (a large round in a small run's session)
CODEGEN_SQL_CONF = {"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": "FALLBACK"}


def spark_home() -> Path:
    """The Spark installation the driver is launched from (``SPARK_HOME``, else pyspark's own)."""
    home = os.environ.get("SPARK_HOME")
    if home:
        return Path(home)
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def java_binary() -> Path | None:
    """The ``java`` that Spark's launcher runs (``JAVA_HOME``, else the one on ``PATH``)."""
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else (Path(p) if (p := shutil.which("java")) else None)
    return found.resolve() if found is not None and found.exists() else None


def archive_dir() -> Path:
    """Where archives live: ``SLUICE_CDS_DIR``, else ``.sluice/cache/cds`` of this checkout
    (git-ignored), else ``~/.cache/sluice/cds`` for an installed package."""
    env = os.environ.get("SLUICE_CDS_DIR")
    if env:
        return Path(env)
    repo = Path(__file__).resolve().parents[2]
    if (repo / "pyproject.toml").exists():
        return repo / ".sluice" / "cache" / "cds"
    return Path.home() / ".cache" / "sluice" / "cds"


def archive_key(home: Path | None = None, java: Path | None = None) -> str | None:
    """A short hash of what an archive depends on: the JVM binary (path, size, mtime) and the
    class path (every jar of ``<home>/jars`` with its size and mtime), and the job it is made from
    (:data:`_WORKLOAD`). None without java."""
    home = home or spark_home()
    java = java or java_binary()
    if java is None:
        return None
    h = hashlib.sha256()
    st = java.stat()
    h.update(f"{java}:{st.st_size}:{int(st.st_mtime)}\n".encode())
    h.update(_WORKLOAD.encode())
    jars = home / "jars"
    for jar in sorted(jars.glob("*.jar")) if jars.is_dir() else ():
        js = jar.stat()
        h.update(f"{jar.name}:{js.st_size}:{int(js.st_mtime)}\n".encode())
    return h.hexdigest()[:16]


def archive_path(home: Path | None = None) -> Path | None:
    """The archive for this JVM and Spark installation, if it has been built."""
    key = archive_key(home)
    if key is None:
        return None
    p = archive_dir() / f"{ARCHIVE_PREFIX}{key}.jsa"
    return p if p.is_file() else None


def driver_java_options(small: bool, home: Path | None = None, *, archive: bool = True) -> list[str]:
    """The driver JVM's options for a run: the archive when there is one, C1 only when ``small``,
    later C2 when not. ``SLUICE_JVM_ARCHIVE=0`` / ``SLUICE_JVM_SMALL=0`` / ``SLUICE_JVM_LARGE=0``
    turn each off (benchmarks compare)."""
    opts: list[str] = []
    path = archive_path(home) if archive and os.environ.get("SLUICE_JVM_ARCHIVE", "1") != "0" else None
    if path is not None:
        opts += [f"-XX:SharedArchiveFile={path}", *LOG_OPTS]
    if small and os.environ.get("SLUICE_JVM_SMALL", "1") != "0":
        opts += list(SMALL_OPTS)
    elif not small and os.environ.get("SLUICE_JVM_LARGE", "1") != "0":
        opts += list(LARGE_OPTS)
    return opts


def small_sql_conf(small: bool) -> dict[str, str]:
    """:data:`SMALL_SQL_CONF` for a small run (``SLUICE_JVM_SMALL=0``: none, as for C1)."""
    return dict(SMALL_SQL_CONF) if small and os.environ.get("SLUICE_JVM_SMALL", "1") != "0" else {}


def join_options(opts: list[str]) -> str:
    """Java options as one string Spark splits back into the same options (its launcher's
    ``parseOptionString`` honours shell quoting): an archive in a folder with spaces stays one
    option instead of becoming ``-XX:SharedArchiveFile=/opt/my`` and a main class ``apps/...``."""
    return shlex.join(opts)


def merge_options(ours: list[str], theirs: str | None) -> str:
    """Our options first, then the user's ``spark.driver.extraJavaOptions`` (the JVM takes the
    last of a repeated option, so the user's win)."""
    return " ".join([join_options(ours), *([theirs] if theirs else [])]).strip()


#: the job the archive is made from: a session, the batch reader, the plan's kinds of
#: expressions (posexplode, JSON to map, higher-order functions), both partition layouts,
#: a mapInArrow round trip through a Python worker and an RDD's (a scanned segment's) -- what a
#: sync's JVM loads
_WORKLOAD = r'''
import json, os, sys, tempfile
from pyspark.sql import SparkSession, functions as F
from pipeline.store.records import read_dml

spark = (SparkSession.builder.master("local[2]").appName("sluice-cds")
         .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.sql.execution.arrow.maxRecordsPerBatch", "5000")
         .config("spark.driver.extraJavaOptions", sys.argv[1]).getOrCreate())
proc = spark.sparkContext._gateway.proc
d = tempfile.mkdtemp()
for b in (1, 2):
    with open(os.path.join(d, f"{b}.jsonl"), "w") as f:
        for s in range(3):
            f.write(json.dumps({"id": s, "database": "db", "table": "t", "type": "UPDATE", "isDdl": False,
                                "pkNames": ["id"], "data": [{"id": str(s), "v": "x"}], "old": [{"v": "y"}],
                                "mysqlType": {"id": "bigint", "v": "varchar(9)"}, "es": 1, "ts": 1,
                                "batchId": b, "seq": s}) + "\n")

def passthrough(batches):
    import pyarrow as pa
    for batch in batches:
        yield pa.RecordBatch.from_pylist([{"n": batch.num_rows}])

paths = [os.path.join(d, f"{b}.jsonl") for b in (1, 2)]
for ordered in (True, False):
    dml = read_dml(spark, paths, ordered=ordered).where(~F.coalesce(F.col("isDdl"), F.lit(False)))
    rows = dml.select("batchId", "seq", "type", "old", F.posexplode("data").alias("row", "d"))
    rows = rows.withColumn("m", F.from_json(F.col("d"), "map<string,string>"))
    rows = rows.withColumn("k", F.expr("concat_ws(chr(1), transform(array('id'), k -> coalesce(m[k], chr(0))))"))
    rows = rows.withColumn("o", F.try_element_at(F.col("old"), (F.col("row") + 1).cast("int")))
    if not ordered:
        rows = rows.repartition(2, "k").sortWithinPartitions("batchId", "seq", "row")
    else:
        rows = rows.coalesce(1)
    rows.select("k", "d", "o").mapInArrow(passthrough, "n long").collect()
spark.sparkContext.parallelize(range(2), 2).mapPartitions(lambda it: [{"n": sum(1 for _ in it)}]).collect()
spark.stop()
proc.stdin.close()  # the gateway JVM exits on EOF, and writes the archive as it exits
sys.exit(proc.wait(timeout=600))
'''


def build_archive(home: Path | None = None, *, force: bool = False, timeout: float = 900) -> Path | None:
    """Build the archive for this JVM and Spark installation (a no-op when it exists); returns
    its path, or None without java. Older archives in the folder are removed."""
    home = home or spark_home()
    key = archive_key(home)
    if key is None:
        return None
    out_dir = archive_dir()
    out = out_dir / f"{ARCHIVE_PREFIX}{key}.jsa"
    if out.is_file() and not force:
        return out
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out_dir, prefix=".build-"))
    try:
        dump = tmp / "spark.jsa"
        env = dict(os.environ, PYSPARK_PYTHON=os.environ.get("PYSPARK_PYTHON", sys.executable),
                   SLUICE_JVM_ARCHIVE="0")
        if "SPARK_HOME" in os.environ or home != spark_home():
            env["SPARK_HOME"] = str(home)
        repo = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join([repo, *filter(None, [env.get("PYTHONPATH")])])
        opts = join_options([f"-XX:ArchiveClassesAtExit={dump}", "-Xlog:disable", "-Xlog:all=error:stderr"])
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-c", _WORKLOAD, opts], env=env, check=True, timeout=timeout,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if not dump.is_file() or dump.stat().st_size == 0:
            raise RuntimeError(f"the JVM wrote no archive to {dump}")
        for old in out_dir.glob(f"{ARCHIVE_PREFIX}*.jsa"):
            old.unlink(missing_ok=True)
        os.replace(dump, out)
        print(f"sluice: built {out} ({out.stat().st_size >> 20} MB) in {time.monotonic() - t0:.1f} s",
              file=sys.stderr)
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
