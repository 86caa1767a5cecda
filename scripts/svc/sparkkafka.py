"""Spark's own Kafka connector (``spark-sql-kafka-0-10``) for the apply job, fetched from Maven
Central with its dependencies and cached (stdlib only).

The connector must be the same version as Spark (the pyspark package of the project's virtualenv)
and the same Scala version (2.13). Jars pyspark already ships (Scala, Hadoop client, lz4, snappy,
slf4j, ...) are left out, so the job's class path gets exactly what the connector adds:
``spark-sql-kafka-0-10``, ``spark-token-provider-kafka-0-10``, ``kafka-clients`` and
``commons-pool2``. ``scripts/bootstrap`` runs this; the job finds the jars in
``<cache>/spark-kafka/<spark version>/`` (pipeline/store/kafka/sparkjars.py), and ``sluice
package`` copies them next to the zip for ``spark-submit --jars``.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripts.svc import base  # noqa: E402

SCALA = "2.13"


def spark_version(ctx: base.Ctx) -> tuple[str, Path]:
    """pyspark's version and its jars folder, from the project's virtualenv."""
    out = subprocess.run([ctx.venv_python, "-c", "import pyspark, os; print(pyspark.__version__); "
                          "print(os.path.join(os.path.dirname(pyspark.__file__), 'jars'))"],
                         text=True, capture_output=True)
    if out.returncode != 0:
        raise base.ServiceError(f"pyspark is not installed in {ctx.venv_python}: {out.stderr[-800:]}")
    version, jars = out.stdout.split()
    return version, Path(jars)


def _pom(version: str) -> str:
    return ("<project>\n  <modelVersion>4.0.0</modelVersion>\n  <groupId>sluice.local</groupId>"
            f"<artifactId>spark-kafka</artifactId><version>{version}</version><packaging>pom</packaging>\n"
            "  <dependencies><dependency><groupId>org.apache.spark</groupId>"
            f"<artifactId>spark-sql-kafka-0-10_{SCALA}</artifactId><version>{version}</version>"
            "</dependency></dependencies>\n</project>\n")


def _artifact(jar: str) -> str:
    """``kafka-clients-3.9.2.jar`` -> ``kafka-clients``."""
    return re.sub(r"-\d[\w.+-]*\.jar$", "", jar)


def fetch(ctx: base.Ctx) -> Path:
    """Make sure the connector for this pyspark is cached; return its folder."""
    version, pyspark_jars = spark_version(ctx)
    dest = ctx.cache / "spark-kafka" / version
    pom = _pom(version)
    digest = hashlib.sha256(pom.encode()).hexdigest()
    stamp = dest / ".complete"
    if stamp.exists() and stamp.read_text().strip() == digest:
        return dest
    base.log(f"spark-kafka: resolving spark-sql-kafka-0-10_{SCALA} {version} with Maven")
    work = ctx.cache / "spark-kafka" / f".{version}.partial"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    (work / "pom.xml").write_text(pom)
    proc = base.run(["mvn", "-q", "-B", "-f", str(work / "pom.xml"), "dependency:copy-dependencies",
                     f"-DoutputDirectory={work / 'lib'}", "-DincludeScope=runtime"], check=False, timeout=1800)
    if proc.returncode != 0:
        raise base.ServiceError(
            f"spark-kafka: Maven could not resolve spark-sql-kafka-0-10_{SCALA}:{version}, the Kafka connector of "
            f"this Spark (pyspark {version}); the connector must match Spark's version exactly, so pin pyspark to a "
            f"version whose connector Maven Central serves (pyproject.toml)\n{(proc.stdout or '')[-1500:]}")
    have = {_artifact(p.name) for p in pyspark_jars.glob("*.jar")}
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.glob("*.jar"):
        old.unlink()
    for jar in sorted((work / "lib").glob("*.jar")):
        if _artifact(jar.name) not in have:
            shutil.copy2(jar, dest / jar.name)
    shutil.rmtree(work, ignore_errors=True)
    stamp.write_text(digest + "\n")
    base.log(f"spark-kafka: {', '.join(sorted(p.name for p in dest.glob('*.jar')))} in {dest}")
    return dest


if __name__ == "__main__":
    try:
        print(fetch(base.Ctx.load()))
    except base.ServiceError as e:
        sys.exit(f"bootstrap: {e}")
