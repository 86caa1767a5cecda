"""``sluice-spark.jar``: the job's own JVM code (``jvm/src/main/java``), compiled with ``javac``
against the project's pyspark jars and the Kafka connector's (``kafka-clients``), and cached
beside them (stdlib only).

It holds ``sluice.spark.KafkaRanges`` (the job's reader of the Kafka store's offset ranges) and
``sluice.spark.KafkaValues`` (values parsed from their bytes; pipeline/store/kafka/frame.py,
values.py). It lands in ``<cache>/spark-kafka/<spark version>/``, the
folder the job's Kafka store already adds to Spark's class path and ``sluice package`` copies
for ``spark-submit --jars``; without it the job reads with Spark's Kafka source and parses the
values from text (slower, same rows).
The jar's name carries a hash of its sources and the Spark version, so an edit or a new pyspark
builds it again. ``scripts/bootstrap`` runs this after the connector is fetched.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripts.svc import base  # noqa: E402
from scripts.svc.sparkkafka import spark_version  # noqa: E402

SOURCES = base.REPO / "jvm" / "src" / "main" / "java"
PREFIX = "sluice-spark-"
MANIFEST = "Manifest-Version: 1.0\r\nCreated-By: sluice scripts/svc/sparkjar.py\r\n\r\n"


def _javac() -> str:
    home = os.environ.get("JAVA_HOME")
    for candidate in ([Path(home) / "bin" / "javac"] if home else []) + [Path(base.JAVA17_HOME) / "bin" / "javac"]:
        if candidate.exists():
            return str(candidate)
    found = shutil.which("javac")
    if not found:
        raise base.ServiceError("sluice-spark.jar: no javac (a JDK 17) found; install openjdk-17-jdk-headless")
    return found


def build(ctx: base.Ctx) -> Path:
    """Make sure the jar for these sources and this pyspark is built; return its path."""
    version, pyspark_jars = spark_version(ctx)
    sources = sorted(SOURCES.rglob("*.java"))
    h = hashlib.sha256(version.encode())
    for src in sources:
        h.update(str(src.relative_to(SOURCES)).encode() + b"\0" + src.read_bytes())
    dest = ctx.cache / "spark-kafka" / version
    jar = dest / f"{PREFIX}{h.hexdigest()[:12]}.jar"
    if jar.exists():
        return jar
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="sluice-jvm-") as tmp:
        out = Path(tmp) / "classes"
        classpath = os.pathsep.join([str(pyspark_jars / "*"), str(dest / "*")])  # kafka-clients is in dest
        proc = subprocess.run([_javac(), "-nowarn", "--release", "17", "-encoding", "UTF-8",
                               "-cp", classpath, "-d", str(out), *map(str, sources)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise base.ServiceError(f"sluice-spark.jar: javac failed\n{(proc.stdout + proc.stderr)[-2000:]}")
        partial = dest / f".{jar.name}.partial"
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("META-INF/MANIFEST.MF", MANIFEST)
            for f in sorted(out.rglob("*.class")):
                z.write(f, f.relative_to(out).as_posix())
        for old in dest.glob(f"{PREFIX}*.jar"):
            old.unlink()
        os.replace(partial, jar)
    base.log(f"sluice-spark: built {jar}")
    return jar


if __name__ == "__main__":
    try:
        print(build(base.Ctx.load()))
    except base.ServiceError as e:
        sys.exit(f"bootstrap: {e}")
