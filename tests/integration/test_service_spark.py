"""Spark works both ways the job will run: local mode and spark-submit to the standalone cluster."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _submit(tmp_path: Path, master: str, spark_home: str | None = None) -> str:
    app = tmp_path / "count.py"
    app.write_text(textwrap.dedent("""
        import sys
        from pyspark.sql import SparkSession
        spark = SparkSession.builder.appName("sluice-smoke").getOrCreate()
        n = spark.sparkContext.parallelize(range(1000), 4).map(lambda x: x * 2).sum()
        print("RESULT", n, spark.sparkContext.master)
        spark.stop()
    """))
    import pyspark

    home = spark_home or os.path.dirname(pyspark.__file__)
    env = dict(os.environ, SPARK_HOME=home, PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    env.setdefault("JAVA_HOME", "/usr/lib/jvm/java-17-openjdk-amd64")
    proc = subprocess.run([f"{home}/bin/spark-submit", "--master", master,
                           "--conf", "spark.ui.enabled=false", str(app)],
                          env=env, text=True, capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_spark_submit_local(tmp_path):
    assert "RESULT 999000 local[2]" in _submit(tmp_path, "local[2]")


def test_spark_submit_standalone(tmp_path, spark_cluster):
    out = _submit(tmp_path, spark_cluster["master_url"], spark_cluster["spark_home"])
    assert f"RESULT 999000 {spark_cluster['master_url']}" in out
