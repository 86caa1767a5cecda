"""A mirrored database without tables is a normal state (all dropped, or not created yet by the
application): the group's pre-flight passes, the group's other mapping is applied, and the
database's tables arrive with their DDL -- issue 35, case 11. A database that does not exist at
all is still refused by name (a misspelt ``dbMapping.database``)."""

from __future__ import annotations

import json
import uuid

import yaml

from tests.support import sysbench
from tests.support.compare import diff_databases
from tests.support.deploy import rdb_adapter, sluice, write_deployment


def _exec(info, *stmts, db=None):
    with sysbench.connect(info, db) as c, c.cursor() as cur:
        for s in stmts:
            cur.execute(s)


def _summary(proc) -> dict:
    return json.loads([line for line in proc.stdout.splitlines() if line.startswith("{")][-1])


def test_an_empty_mirrored_database_does_not_stop_its_group(tmp_path, mariadb, mariadb_target):
    tag = uuid.uuid4().hex[:6]
    full, empty = f"full_{tag}", f"empty_{tag}"
    _exec(mariadb, f"CREATE DATABASE `{full}`", f"CREATE DATABASE `{empty}`")
    for db in (full, empty):
        sysbench.create_database(mariadb_target, f"{db}_m")
    mappings = {f"{db}.yml": {"groupId": "g1", "outerAdapterKey": "t",
                              "dbMapping": {"mirrorDb": True, "database": db, "targetDb": f"{db}_m"}}
                for db in (full, empty)}
    cfg = write_deployment(tmp_path, mariadb, name=full, include=rf"({full}|{empty})\..*",
                           groups=[{"groupId": "g1", "outerAdapters": [rdb_adapter(mariadb_target, "t", f"{full}_m")],
                                    "mappings": ["mappings/*.yml"]}], mappings=mappings)
    sluice("capture", "--config", str(cfg), "--once")
    _exec(mariadb, "CREATE TABLE a (id INT PRIMARY KEY, v VARCHAR(10))", "INSERT INTO a VALUES (1, 'x'), (2, 'y')",
          db=full)
    sluice("capture", "--config", str(cfg), "--once")
    try:
        out = _summary(sluice("sync", "--config", str(cfg), "--group", "g1", "--partitions", "1", "--json"))
        assert out["rows"] == 2
        assert diff_databases(mariadb, full, mariadb_target, f"{full}_m") == {"a": 0}
        # the application creates its tables now: they arrive with their DDL
        _exec(mariadb, "CREATE TABLE b (id INT PRIMARY KEY, n INT)", "INSERT INTO b VALUES (1, 1), (2, 2), (3, 3)",
              "UPDATE b SET n = 20 WHERE id = 2", db=empty)
        sluice("capture", "--config", str(cfg), "--once")
        sluice("sync", "--config", str(cfg), "--group", "g1", "--partitions", "4")
        assert diff_databases(mariadb, empty, mariadb_target, f"{empty}_m") == {"b": 0}
        # a database that does not exist is a mistake in the mapping: refused by name, nothing acked
        gone = tmp_path / "mappings" / f"{empty}.yml"
        spec = yaml.safe_load(gone.read_text())
        spec["dbMapping"]["database"] = f"nodb_{tag}"
        gone.write_text(yaml.safe_dump(spec))
        proc = sluice("sync", "--config", str(cfg), "--group", "g1", check=False)
        assert proc.returncode == 2 and f"nodb_{tag}" in proc.stderr and "does not exist" in proc.stderr
        assert "Traceback" not in proc.stderr
    finally:
        for db in (full, empty):
            sysbench.drop_database(mariadb, db)
            sysbench.drop_database(mariadb_target, f"{db}_m")
