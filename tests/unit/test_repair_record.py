"""Capture waivers after repairs (pipeline/repair/record.py): a table is waived only once every group
whose mappings cover it has repaired it with each such mapping, up to the oldest of their start
positions; repairing only some groups waives nothing (no services: the config is only read)."""

from __future__ import annotations

import pytest
import yaml

from pipeline.config import load_config
from pipeline.repair import record
from pipeline.state.waivers import waivers
from pipeline.store import open_store


@pytest.fixture
def cfg(tmp_path):
    for name, body in {"a/t.yml": {"dbMapping": {"database": "d", "table": "t", "targetTable": "t",
                                                 "targetPk": {"id": "id"}, "mapAll": True}},
                       "b/mirror.yml": {"dbMapping": {"mirrorDb": True, "database": "d"}},
                       "b/t_copy.yml": {"dbMapping": {"database": "d", "table": "t", "targetTable": "t2",
                                                      "targetPk": {"id": "id"}, "mapAll": True}},
                       "c/other.yml": {"dbMapping": {"database": "e", "table": "t", "targetTable": "t",
                                                     "targetPk": {"id": "id"}, "mapAll": True}}}.items():
        (tmp_path / "mappings" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "mappings" / name).write_text(yaml.safe_dump(body))
    adapter = [{"name": "rdb", "properties": {"jdbc.url": "jdbc:mysql://127.0.0.1:1/d", "jdbc.username": "u",
                                              "jdbc.password": "p"}}]
    path = tmp_path / "sluice.yml"
    path.write_text(yaml.safe_dump({
        "source": {"name": "s", "host": "127.0.0.1", "port": 1, "password": "x"},
        "store": {"path": str(tmp_path / "store")},
        "groups": [{"groupId": g, "outerAdapters": adapter, "mappings": [f"mappings/{g}/*.yml"]} for g in "abc"]}))
    config = load_config(path)
    open_store(config, create=True)  # a deployment whose capture has run
    return config


def _pos(n: int, f: int = 3) -> dict:
    return {"logfile": f"mysql-bin.{f:06d}", "logpos": n, "gtid": None, "nextId": 1}


def test_only_a_table_every_covering_group_repaired_is_waived(cfg):
    root = cfg.store_dir()
    files = record.covering(cfg, "d", "t")
    assert set(files) == {"a", "b"} and len(files["a"]) == 1 and len(files["b"]) == 2  # c maps e.t only
    assert record.record_repaired(cfg, "a", {("d", "t"): files["a"]}, _pos(900)) == []     # b has not
    assert record.record_repaired(cfg, "b", {("d", "t"): files["b"][:1]}, _pos(100, 4)) == []  # one of b's two
    waived = record.record_repaired(cfg, "b", {("d", "t"): files["b"][1:]}, _pos(200, 4))
    assert waived == ["d.t"]
    # the oldest of the groups' positions (file 3 before file 4)
    assert waivers(root) == {("d", "t"): {"logfile": "mysql-bin.000003", "logpos": 900, "gtid": None}}
    assert set(record.read(root)["d.t"]) == {"a", "b"}
    assert record.record_repaired(cfg, "c", {("e", "t"): record.covering(cfg, "e", "t")["c"]}, _pos(5)) == ["e.t"]
