"""Pre-flight of foreign keys whose cascades the binlog does not carry, through the CLI: a target
that lacks the source's cascading foreign key, a child mapped without its parent, and a foreign
key that cascades only in the target are each one clear message with nothing acked; a
non-mirror dbMapping whose target has the source's foreign keys (renamed columns) converges with
4 partitions."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.support import sysbench
from tests.support.compare import table_rows
from tests.support.deploy import rdb_adapter, sluice, write_deployment

PARENT = "CREATE TABLE p (id INT PRIMARY KEY, code VARCHAR(10) UNIQUE)"
CHILD = ("CREATE TABLE c (id INT PRIMARY KEY, pid INT, CONSTRAINT fk_c_p FOREIGN KEY (pid) REFERENCES p (id) "
         "ON DELETE CASCADE ON UPDATE CASCADE)")


def _exec(info, db, *stmts):
    with sysbench.connect(info, db) as c, c.cursor() as cur:
        for s in stmts:
            cur.execute(s)


@pytest.fixture()
def dbs(mariadb, mariadb_target):
    src, tgt = f"fkc_{uuid.uuid4().hex[:6]}", f"fkt_{uuid.uuid4().hex[:6]}"
    sysbench.create_database(mariadb, src)
    sysbench.create_database(mariadb_target, tgt)
    _exec(mariadb, src, PARENT, CHILD)
    yield src, tgt
    sysbench.drop_database(mariadb, src)
    sysbench.drop_database(mariadb_target, tgt)


def _deploy(tmp_path, mariadb, mariadb_target, src, tgt, mappings: dict):
    return write_deployment(tmp_path, mariadb, name=src, include=rf"{src}\..*",
                            groups=[{"groupId": "g1", "outerAdapters": [rdb_adapter(mariadb_target, "t", tgt)],
                                     "mappings": ["mappings/*.yml"]}], mappings=mappings, partitions=4)


def _table(src, tgt, table, target, columns, pk="id"):
    return {"groupId": "g1", "dbMapping": {"database": src, "table": table, "targetTable": f"{tgt}.{target}",
                                           "targetPk": {pk: "id"}, "targetColumns": columns}}


def _refused(cfg) -> str:
    sluice("capture", "--config", str(cfg), "--once")
    proc = sluice("sync", "--config", str(cfg), "--group", "g1", check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    st = json.loads(sluice("store", "status", "--config", str(cfg), "--json").stdout)
    assert st["groups"].get("g1", {}).get("cursor", 0) == 0
    return proc.stderr


def test_a_target_without_the_cascading_foreign_key_is_refused(tmp_path, mariadb, mariadb_target, dbs):
    src, tgt = dbs
    _exec(mariadb_target, tgt, "CREATE TABLE tp (id INT PRIMARY KEY, code VARCHAR(10) UNIQUE)",
          "CREATE TABLE tc (id INT PRIMARY KEY, parent INT)")
    cfg = _deploy(tmp_path, mariadb, mariadb_target, src, tgt, {
        "p.yml": _table(src, tgt, "p", "tp", {"code": "code"}),
        "c.yml": _table(src, tgt, "c", "tc", {"parent": "pid"})})
    err = _refused(cfg)
    assert "c.yml" in err and "fk_c_p" in err and f"{tgt}.tc" in err and "ON DELETE CASCADE" in err


def test_a_child_mapped_without_its_parent_is_refused(tmp_path, mariadb, mariadb_target, dbs):
    src, tgt = dbs
    _exec(mariadb_target, tgt, "CREATE TABLE tc (id INT PRIMARY KEY, parent INT)")
    cfg = _deploy(tmp_path, mariadb, mariadb_target, src, tgt, {"c.yml": _table(src, tgt, "c", "tc",
                                                                                {"parent": "pid"})})
    err = _refused(cfg)
    assert "c.yml" in err and "parent table is not mapped" in err and f"{src}.p" in err


def test_a_foreign_key_that_cascades_only_in_the_target_is_refused(tmp_path, mariadb, mariadb_target, dbs):
    src, tgt = dbs
    _exec(mariadb, src, "CREATE TABLE n (id INT PRIMARY KEY, pid INT)")  # no foreign key at the source
    _exec(mariadb_target, tgt, "CREATE TABLE tp (id INT PRIMARY KEY, code VARCHAR(10) UNIQUE)",
          "CREATE TABLE tn (id INT PRIMARY KEY, pid INT, CONSTRAINT fk_tn FOREIGN KEY (pid) REFERENCES tp (id) "
          "ON DELETE CASCADE)")
    cfg = _deploy(tmp_path, mariadb, mariadb_target, src, tgt, {
        "p.yml": _table(src, tgt, "p", "tp", {"code": "code"}),
        "n.yml": _table(src, tgt, "n", "tn", {"pid": "pid"})})
    err = _refused(cfg)
    assert "fk_tn" in err and "cascades where the source" in err


def test_a_mapped_target_with_the_foreign_keys_converges(tmp_path, mariadb, mariadb_target, dbs):
    src, tgt = dbs
    _exec(mariadb_target, tgt, "CREATE TABLE tp (id INT PRIMARY KEY, code VARCHAR(10) UNIQUE)",
          "CREATE TABLE tc (id INT PRIMARY KEY, parent INT, CONSTRAINT fk_tc FOREIGN KEY (parent) REFERENCES tp (id) "
          "ON DELETE CASCADE ON UPDATE CASCADE)")
    cfg = _deploy(tmp_path, mariadb, mariadb_target, src, tgt, {
        "p.yml": _table(src, tgt, "p", "tp", {"code": "code"}),
        "c.yml": _table(src, tgt, "c", "tc", {"parent": "pid"})})
    sluice("capture", "--config", str(cfg), "--once")
    stmts = []
    for i in range(1, 41):
        stmts.append(f"INSERT INTO p VALUES ({i}, 'k{i}')")
        stmts += [f"INSERT INTO c VALUES ({i * 10 + j}, {i})" for j in range(3)]
    stmts += ["UPDATE p SET id = id + 100 WHERE id % 3 = 0", "DELETE FROM p WHERE id % 5 = 0",
              "UPDATE p SET code = 'tmp' WHERE id = 1", "UPDATE p SET code = 'k1' WHERE id = 2",
              "UPDATE p SET code = 'k2' WHERE id = 1", "INSERT INTO p VALUES (999, 'new')",
              "UPDATE c SET pid = 999 WHERE pid = 7"]
    _exec(mariadb, src, *stmts)
    sluice("capture", "--config", str(cfg), "--once")
    sluice("sync", "--config", str(cfg), "--group", "g1")
    assert table_rows(mariadb, src, "p") == table_rows(mariadb_target, tgt, "tp")
    assert table_rows(mariadb, src, "c") == table_rows(mariadb_target, tgt, "tc")
