"""The driver JVM's options (pipeline/job/jvm.py): the archive is used only when it was built for
this JVM and this Spark's jars, C1-only JIT only for a small run, the user's options come last,
and a small round runs in one partition unless --partitions says otherwise."""

from __future__ import annotations

import os

from pipeline.config import parse_config
from pipeline.job import jvm
from pipeline.job.driver import round_partitions


def _spark_home(tmp_path, jars=("a.jar", "b.jar")):
    home = tmp_path / "spark"
    (home / "jars").mkdir(parents=True)
    for j in jars:
        (home / "jars" / j).write_bytes(b"x" * len(j))
    return home


def _java(tmp_path):
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\n")
    return java


def test_the_archive_key_follows_the_jvm_and_the_jars(tmp_path, monkeypatch):
    home, java = _spark_home(tmp_path), _java(tmp_path)
    monkeypatch.setenv("JAVA_HOME", str(java.parent.parent))
    monkeypatch.setenv("SLUICE_CDS_DIR", str(tmp_path / "cds"))
    key = jvm.archive_key(home)
    assert key and key == jvm.archive_key(home)
    (home / "jars" / "c.jar").write_bytes(b"new")
    assert jvm.archive_key(home) != key, "another jar: another class path, another archive"
    assert jvm.archive_path(home) is None
    (tmp_path / "cds").mkdir()
    (tmp_path / "cds" / f"spark-{jvm.archive_key(home)}.jsa").write_bytes(b"archive")
    assert jvm.archive_path(home).name.startswith("spark-")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nojdk"))
    monkeypatch.setenv("PATH", "")
    assert jvm.archive_key(home) is None and jvm.driver_java_options(False, home) == list(jvm.LARGE_OPTS)


def test_options_archive_small_and_the_users_last(tmp_path, monkeypatch):
    home, java = _spark_home(tmp_path), _java(tmp_path)
    monkeypatch.setenv("JAVA_HOME", str(java.parent.parent))
    monkeypatch.setenv("SLUICE_CDS_DIR", str(tmp_path / "cds"))
    assert jvm.driver_java_options(False, home) == ["-XX:CompileThresholdScaling=10"]
    assert jvm.driver_java_options(True, home) == ["-XX:TieredStopAtLevel=1"]
    monkeypatch.setenv("SLUICE_JVM_LARGE", "0")
    assert jvm.driver_java_options(False, home) == []
    monkeypatch.delenv("SLUICE_JVM_LARGE")
    os.makedirs(tmp_path / "cds")
    archive = tmp_path / "cds" / f"spark-{jvm.archive_key(home)}.jsa"
    archive.write_bytes(b"archive")
    opts = jvm.driver_java_options(True, home)
    assert opts[0] == f"-XX:SharedArchiveFile={archive}" and opts[-1] == "-XX:TieredStopAtLevel=1"
    assert "-Xlog:cds*=off:stderr" in opts, "a stale archive must not print to stdout (--json)"
    monkeypatch.setenv("SLUICE_JVM_ARCHIVE", "0")
    monkeypatch.setenv("SLUICE_JVM_SMALL", "0")
    assert jvm.driver_java_options(True, home) == []
    merged = jvm.merge_options(["-XX:TieredStopAtLevel=1"], "-XX:TieredStopAtLevel=4 -Dx=1")
    assert merged.endswith("-XX:TieredStopAtLevel=4 -Dx=1"), "the JVM takes the last: the user's win"


def test_a_small_round_runs_in_one_partition():
    cfg = parse_config({"spark": {"partitions": 4, "smallRows": 1000}})
    assert round_partitions(1000, None, cfg) == 1
    assert round_partitions(1001, None, cfg) == 4
    assert round_partitions(10, 3, cfg) == 3, "--partitions is obeyed"
    off = parse_config({"spark": {"partitions": 4, "smallRows": 0}})
    assert round_partitions(1, None, off) == 4


def test_a_small_run_interprets_its_plans_unless_turned_off(monkeypatch):
    monkeypatch.delenv("SLUICE_JVM_SMALL", raising=False)
    assert jvm.small_sql_conf(True) == jvm.SMALL_SQL_CONF
    assert jvm.small_sql_conf(False) == {}
    assert set(jvm.CODEGEN_SQL_CONF) == set(jvm.SMALL_SQL_CONF)
    monkeypatch.setenv("SLUICE_JVM_SMALL", "0")  # benchmarks compare: both JIT and SQL settings off
    assert jvm.small_sql_conf(True) == {}
