"""A small run's Spark session interprets its plans (no generated code to compile), and a round
larger than ``spark.smallRows`` in it turns code generation back on (pipeline/job/jvm.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

_SCRIPT = r'''
from pipeline.config import parse_config
from pipeline.job.session import codegen_for_round, get_spark

cfg = parse_config({"spark": {"master": "local[1]", "smallRows": 100,
                              "conf": {"spark.sql.shuffle.partitions": "1"}}})
spark = get_spark(cfg.spark, "sluice-test-small", small=True)
conf = spark.conf
assert conf.get("spark.sql.codegen.wholeStage") == "false", conf.get("spark.sql.codegen.wholeStage")
assert conf.get("spark.sql.codegen.factoryMode") == "NO_CODEGEN"
df = spark.range(50).selectExpr("id * 2 AS x", "to_json(map('k', cast(id AS string))) AS j")
rows = df.where("x % 3 = 0").orderBy("x").collect()
assert [r.x for r in rows][:3] == [0, 6, 12] and rows[1].j == '{"k":"3"}' and len(rows) == 17
codegen_for_round(spark, 100, 100)  # still small
assert conf.get("spark.sql.codegen.wholeStage") == "false"
codegen_for_round(spark, 101, 100)  # more than smallRows: Spark's code generation again
assert conf.get("spark.sql.codegen.wholeStage") == "true", conf.get("spark.sql.codegen.wholeStage")
assert conf.get("spark.sql.codegen.factoryMode") == "FALLBACK"
assert df.where("x % 3 = 0").count() == 17
spark.stop()
print("small session ok")
'''


def test_a_small_session_interprets_and_a_large_round_turns_code_generation_back_on():
    proc = subprocess.run([sys.executable, "-c", _SCRIPT], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "SLUICE_JVM_SMALL": "1"})
    assert proc.returncode == 0 and "small session ok" in proc.stdout, proc.stderr[-3000:]
