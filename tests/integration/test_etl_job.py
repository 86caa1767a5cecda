"""``run_bootstrap`` and ``run_etl`` through a local Spark session into a SQLite target:
a store with a position is refused without force; with force the load runs, capture's start
moves to the snapshot (keeping ``nextId`` increasing) and every group's cursor skips the
batches captured before the load. ``run_etl`` honours etlCondition parameters."""

from __future__ import annotations

import sqlite3
import uuid

import pytest
import yaml

from pipeline.config import SparkConfig, load_config
from pipeline.etl.bootstrap import run_bootstrap
from pipeline.etl.driver import run_etl
from pipeline.job.group import load_group
from pipeline.job.session import get_spark
from pipeline.store.files import BatchStore
from sluice_common.errors import StoreError
from tests.support import sysbench


@pytest.fixture(scope="module")
def spark():
    return get_spark(SparkConfig(master="local[2]", partitions=2), "sluice-etl-tests")


@pytest.fixture()
def deployment(mariadb, tmp_path):
    db = f"etl_boot_{uuid.uuid4().hex[:6]}"
    with sysbench.connect(mariadb) as c, c.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{db}`")
        cur.execute(f"CREATE TABLE `{db}`.items (id INT PRIMARY KEY, v INT, name VARCHAR(20))")
        cur.execute(f"INSERT INTO `{db}`.items SELECT seq, seq % 10, CONCAT('n', seq) FROM `{db}`.seq_1_to_5000")
    target = tmp_path / "target.db"
    with sqlite3.connect(target) as t:
        t.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, v INTEGER, name TEXT)")
    (tmp_path / "items.yml").write_text(yaml.safe_dump({"groupId": "g1", "dbMapping": {
        "database": db, "table": "items", "targetTable": "items", "targetPk": {"id": "id"}, "mapAll": True,
        "etlCondition": "where v >= {}", "commitBatch": 700, "readBatch": 900}}))
    cfg = {"source": {"name": db, "host": mariadb["host"], "port": int(mariadb["port"]), "user": mariadb["user"],
                      "password": mariadb["password"], "filter": {"include": rf"{db}\..*"}},
           "store": {"path": str(tmp_path / "store")},
           "groups": [{"groupId": "g1", "mappings": ["items.yml"], "outerAdapters": [
               {"name": "rdb", "key": "t", "properties": {"jdbc.url": f"jdbc:sqlite:{target}"}}]}],
           "spark": {"master": "local[2]", "partitions": 3}}
    path = tmp_path / "sluice.yml"
    path.write_text(yaml.safe_dump(cfg))
    yield load_config(path), target
    with sysbench.connect(mariadb) as c, c.cursor() as cur:
        cur.execute(f"DROP DATABASE `{db}`")


def _target_rows(target) -> list[tuple]:
    with sqlite3.connect(target) as t:
        return t.execute("SELECT id, v, name FROM items ORDER BY id").fetchall()


def test_etl_condition_params_and_counts(deployment, spark):
    cfg, target = deployment
    with sqlite3.connect(target) as t:
        t.execute("INSERT INTO items VALUES (10, -1, 'stale')")  # a reload overwrites it
    summary = run_etl(cfg, load_group(cfg, "g1"), spark, params=("8",), partitions=3)
    rows = _target_rows(target)
    want = [(i, i % 10, f"n{i}") for i in range(1, 5001) if i % 10 >= 8]
    assert [r for r in rows if r[0] != 10] == want and (10, -1, "stale") in rows  # 10 % 10 = 0: not loaded
    out = summary.as_dict()
    assert out["rows"] == len(want) and out["tables"][f"{cfg.source.name}.items"]["ranges"] == 3
    assert out["tables"][f"{cfg.source.name}.items"]["written"] == len(want)


def test_bootstrap_refuses_a_positioned_store_unless_forced(deployment, spark):
    cfg, target = deployment
    store = BatchStore(cfg.store_dir())
    with store.capture_lock():
        store.set_start_position({"logfile": "mysql-bin.000001", "logpos": 4, "nextId": 77})
        store.append([], start={"logfile": "mysql-bin.000001", "logpos": 4, "nextId": 77},
                     end={"logfile": "mysql-bin.000001", "logpos": 400, "nextId": 90})
    with pytest.raises(StoreError, match="already has a capture position"):
        run_bootstrap(cfg, spark, params=("0",))
    assert _target_rows(target) == []  # refused before loading anything
    out = run_bootstrap(cfg, spark, force=True, params=("0",))
    assert out["forced"] and out["cursors"] == {"g1": {"from": 0, "to": 1}}
    assert out["position"]["nextId"] == 90  # record ids keep increasing across the forced restart
    assert (out["position"]["logfile"], out["position"]["logpos"]) != ("mysql-bin.000001", 400)
    assert BatchStore(cfg.store_dir()).last_position() == out["position"]
    assert BatchStore(cfg.store_dir()).cursor("g1") == 1
    assert len(_target_rows(target)) == 5000
