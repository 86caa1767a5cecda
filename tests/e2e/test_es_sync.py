"""The real pipeline into Elasticsearch and OpenSearch (the ``search`` fixture): source tables ->
``sluice capture --once`` -> ``sluice sync`` with an ``es8`` (or ``opensearch``) outerAdapter and
canal's mytest_user mapping (user LEFT JOIN role).

The index must equal what the mapping SQL gives now; a bulk item the server rejects makes
sync exit non-zero without moving the group's cursor, and the next sync converges.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pymysql
import pytest
import yaml

from tests.support.deploy import REPO, write_deployment
from tests.support.matrix import FULL
from tests.support.search import SearchServer

CANAL_ES8 = REPO.parent / "shared" / "reference" / "canal-mappings" / "es8"


def sluice(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """The ``sluice`` console script of this venv (``python -m pipeline.cli`` registers no
    sub-commands today: its ``__main__`` module is not the ``pipeline.cli`` they attach to)."""
    exe = Path(sys.executable).with_name("sluice")
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    proc = subprocess.run([str(exe), *args], cwd=REPO, env=env, text=True, capture_output=True, timeout=900)
    if check and proc.returncode != 0:
        raise AssertionError(f"sluice {' '.join(args)} exited {proc.returncode}\n{proc.stdout[-3000:]}\n"
                             f"{proc.stderr[-5000:]}")
    return proc


def run_sql(info: dict, *stmts: str) -> list[tuple]:
    conn = pymysql.connect(host=info["host"], port=info["port"], user=info["user"], password=info["password"],
                           autocommit=True, charset="utf8mb4")
    try:
        with conn.cursor() as cur:
            for s in stmts:
                cur.execute(s)
            return list(cur.fetchall())
    finally:
        conn.close()


@pytest.fixture(scope="module", params=["elasticsearch", "opensearch"] if FULL else ["elasticsearch"])
def search(request):
    """The search server of this module's pipeline: Elasticsearch (CI budget; the adapter's OpenSearch
    client is proven by the integration tier's ``search`` fixture and test_opensearch_join_sync.py),
    both with SLUICE_E2E_FULL=1."""
    server = SearchServer.open(request.param, request.getfixturevalue(request.param))
    yield server
    server.close()


@pytest.fixture(scope="module")
def deployment(tmp_path_factory, mariadb, search: SearchServer):
    tmp = tmp_path_factory.mktemp("es_sync")
    db = f"es_e2e_{uuid.uuid4().hex[:6]}"
    index = f"sluice-e2e-{uuid.uuid4().hex[:8]}"
    mapping = yaml.safe_load((CANAL_ES8 / "mytest_user.yml").read_text())
    mapping["esMapping"]["_index"] = index
    mapping["outerAdapterKey"] = "es1"
    es_adapter = search.adapter("es1", **{"cluster.name": search.cluster_name})
    cfg = write_deployment(tmp, mariadb, name=db, include=rf"{db}\..*",
                           groups=[{"groupId": "g1", "outerAdapters": [es_adapter], "mappings": ["mappings/es/*.yml"]}],
                           mappings={"es/mytest_user.yml": mapping}, partitions=3)
    raw = yaml.safe_load(cfg.read_text())
    raw["srcDataSources"] = {"defaultDS": {"url": f"jdbc:mysql://{mariadb['host']}:{mariadb['port']}/{db}"
                                           "?useUnicode=true", "username": mariadb["user"],
                                           "password": mariadb["password"]}}
    cfg.write_text(yaml.safe_dump(raw, sort_keys=False))
    sluice("capture", "--config", str(cfg), "--once")   # the store starts here
    run_sql(mariadb, f"CREATE DATABASE `{db}`",
            f"CREATE TABLE `{db}`.`user` (id BIGINT PRIMARY KEY, name VARCHAR(50), role_id BIGINT, c_time DATETIME)",
            f"CREATE TABLE `{db}`.`role` (id BIGINT PRIMARY KEY, role_name VARCHAR(50))")
    yield {"cfg": cfg, "db": db, "index": index, "es": search}
    run_sql(mariadb, f"DROP DATABASE `{db}`")
    search.delete_index(index)


def expected(mariadb: dict, db: str) -> dict[str, dict]:
    rows = run_sql(mariadb, f"SELECT a.id, a.name, a.role_id, b.role_name, a.c_time FROM `{db}`.`user` a "
                            f"LEFT JOIN `{db}`.`role` b ON b.id = a.role_id")
    return {str(r[0]): {"name": r[1], "role_id": r[2], "role_name": r[3],
                        "c_time": r[4].isoformat() if isinstance(r[4], dt.datetime) else None} for r in rows}


def docs(es: SearchServer, index: str) -> dict[str, dict]:
    return es.docs(index)


def cursor(cfg: Path) -> int:
    st = json.loads(sluice("store", "status", "--config", str(cfg), "--json").stdout)
    return st["groups"].get("g1", {}).get("cursor", 0)


def sync(cfg: Path, check: bool = True) -> subprocess.CompletedProcess:
    return sluice("sync", "--config", str(cfg), "--group", "g1", "--json", check=check)


def test_es_sync_converges_and_fails_closed(deployment, mariadb):
    d = deployment
    db, es, index = d["db"], d["es"], d["index"]
    users = ", ".join(f"({i}, 'u{i}', {i % 4 or 'NULL'}, '2024-01-0{i % 9 + 1} 10:00:00')" for i in range(1, 201))
    run_sql(mariadb, f"INSERT INTO `{db}`.role VALUES (1, 'admin'), (2, 'dev'), (3, 'ops')",
            f"INSERT INTO `{db}`.`user` VALUES {users}")
    sluice("capture", "--config", str(d["cfg"]), "--once")
    sync(d["cfg"])
    assert docs(es, index) == expected(mariadb, db) and len(expected(mariadb, db)) == 200

    # both tables change in one transaction: their changes land in different partitions
    run_sql(mariadb, "START TRANSACTION",
            f"UPDATE `{db}`.role SET role_name = 'developers' WHERE id = 2",
            f"UPDATE `{db}`.`user` SET role_id = 2 WHERE id BETWEEN 1 AND 10",
            f"UPDATE `{db}`.`user` SET name = CONCAT(name, '!') WHERE id % 7 = 0",
            f"DELETE FROM `{db}`.role WHERE id = 1",
            f"DELETE FROM `{db}`.`user` WHERE id > 190",
            f"UPDATE `{db}`.`user` SET id = id + 1000 WHERE id BETWEEN 181 AND 185",
            "COMMIT",
            f"INSERT INTO `{db}`.role VALUES (1, 'root')")
    sluice("capture", "--config", str(d["cfg"]), "--once")
    sync(d["cfg"])
    assert docs(es, index) == expected(mariadb, db)
    acked = cursor(d["cfg"])

    # a bulk item the server rejects (index write block): no ack, non-zero exit
    es.put_settings(index, {"index.blocks.write": True})
    try:
        run_sql(mariadb, f"UPDATE `{db}`.`user` SET name = 'blocked' WHERE id = 3")
        sluice("capture", "--config", str(d["cfg"]), "--once")
        failed = sync(d["cfg"], check=False)
        assert failed.returncode != 0, failed.stdout
        assert "cluster_block_exception" in failed.stderr + failed.stdout
        assert cursor(d["cfg"]) == acked
    finally:
        es.put_settings(index, {"index.blocks.write": False})
    sync(d["cfg"])
    assert cursor(d["cfg"]) > acked
    assert docs(es, index) == expected(mariadb, db)
