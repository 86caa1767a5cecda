"""Capture waivers after repairs (pipeline/repair/record.py): a table is waived only once every group
whose mappings cover it has repaired it with each such mapping, up to the oldest of their start
positions; repairing only some groups waives nothing (no services: the config is only read)."""

from __future__ import annotations

import importlib
import sys
import types

import pytest
import yaml

from pipeline.config import load_config
from pipeline.repair import record
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


@pytest.fixture
def added(monkeypatch):
    """The waivers capture was given: the real module's record where it exists, else what was asked."""
    try:
        real = importlib.import_module("pipeline.capture.waivers")
    except ImportError:
        real = None
    calls: list = []
    if real is None:  # capture's waivers are the lead's part (pipeline/capture/waivers.py): its interface
        stub = types.ModuleType("pipeline.capture.waivers")
        stub.add_waiver = lambda root, database, table, upto: calls.append((database, table, upto))
        monkeypatch.setitem(sys.modules, "pipeline.capture.waivers", stub)
    return calls, real


def _pos(n: int, f: int = 3) -> dict:
    return {"logfile": f"mysql-bin.{f:06d}", "logpos": n, "gtid": None, "nextId": 1}


def test_only_a_table_every_covering_group_repaired_is_waived(cfg, added):
    calls, real = added
    root = cfg.store_dir()
    files = record.covering(cfg, "d", "t")
    assert set(files) == {"a", "b"} and len(files["a"]) == 1 and len(files["b"]) == 2  # c maps e.t only
    assert record.record_repaired(cfg, "a", {("d", "t"): files["a"]}, _pos(900)) == []     # b has not
    assert record.record_repaired(cfg, "b", {("d", "t"): files["b"][:1]}, _pos(100, 4)) == []  # one of b's two
    waived = record.record_repaired(cfg, "b", {("d", "t"): files["b"][1:]}, _pos(200, 4))
    assert waived == ["d.t"]
    if real is not None:
        assert real.waivers(root)  # the real module recorded it
    else:
        assert calls == [("d", "t", _pos(900))]  # the oldest of the groups' positions (file 3 before file 4)
    assert set(record.read(root)["d.t"]) == {"a", "b"}
    assert record.record_repaired(cfg, "c", {("e", "t"): record.covering(cfg, "e", "t")["c"]}, _pos(5)) == ["e.t"]
