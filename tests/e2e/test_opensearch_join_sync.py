"""canal's es8 parent/child example through the whole pipeline, on OpenSearch.

canal's ``customer.yml`` and ``biz_order.yml`` are copied into the deployment byte for byte
(index ``customer``, join field ``customer_order``, ``_id: concat('oid_', t.id)``, ``skips``,
``etlCondition: where t.c_time>={}``), next to an ``outerAdapters`` entry ``name: opensearch``;
the index is created with the join mapping of customer.yml's comment (4 shards, so routing
matters). Then: a full load with ``sluice etl --params`` (only rows the etlCondition selects),
``sluice capture`` + ``sluice sync`` on 3 Spark partitions (parents and children in different
partitions) through transactions that insert a child before its parent, move children, re-key a
parent with its children and delete parents with and without their children; ``sluice verify``;
and a replay of every batch. After each step every document (``_id``, routing, ``_source``)
equals, as canonical JSON bytes, what the mapping SQLs give on the source.
"""

from __future__ import annotations

import shutil
import uuid

import pytest
import yaml

from tests.support import joins
from tests.support.deploy import sluice, write_deployment
from tests.support.search import SearchServer

INDEX = "customer"  # as the canal files name it


def run_sql(info: dict, db: str, *stmts: str) -> None:
    import pymysql

    conn = pymysql.connect(host=info["host"], port=info["port"], user=info["user"], password=info["password"],
                           database=db, autocommit=True, charset="utf8mb4")
    try:
        with conn.cursor() as cur:
            for s in stmts:
                cur.execute(s)
    finally:
        conn.close()


def query(info: dict, db: str):
    import pymysql

    def run(sql: str):
        conn = pymysql.connect(host=info["host"], port=info["port"], user=info["user"], password=info["password"],
                               database=db, charset="utf8mb4")
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
                return [d[0] for d in cur.description], list(cur.fetchall())
        finally:
            conn.close()
    return run


@pytest.fixture(scope="module")
def deployment(tmp_path_factory, mariadb, opensearch):
    tmp = tmp_path_factory.mktemp("os_join")
    db = f"os_e2e_{uuid.uuid4().hex[:6]}"
    server = SearchServer.open("opensearch", opensearch)
    cfg = write_deployment(tmp, mariadb, name=db, include=rf"{db}\..*",
                           groups=[{"groupId": "g1", "outerAdapters": [server.adapter(**{"cluster.name": "sluice-os"})],
                                    "mappings": ["mappings/es/*.yml"]}],
                           mappings={}, partitions=3)
    (tmp / "mappings" / "es").mkdir(parents=True)
    for name in joins.FILES:  # canal's files as they are
        shutil.copyfile(joins.CANAL_ES8 / name, tmp / "mappings" / "es" / name)
    raw = yaml.safe_load(cfg.read_text())
    raw["srcDataSources"] = {"defaultDS": {"url": f"jdbc:mysql://{mariadb['host']}:{mariadb['port']}/{db}"
                                           "?useUnicode=true", "username": mariadb["user"],
                                           "password": mariadb["password"]}}
    cfg.write_text(yaml.safe_dump(raw, sort_keys=False))
    run_sql(mariadb, "", f"CREATE DATABASE `{db}`", *(d.format(db=db) for d in joins.DDL))
    server.delete_index(INDEX)
    server.create_index(INDEX, {"properties": joins.PROPERTIES}, {"number_of_shards": 4, "number_of_replicas": 0})
    yield {"cfg": str(cfg), "db": db, "server": server}
    run_sql(mariadb, "", f"DROP DATABASE `{db}`")
    server.delete_index(INDEX)
    server.close()


def converged(server: SearchServer, sql, where: dict[str, str] | None = None) -> dict:
    want = joins.expected(sql, where)
    got = joins.actual(server, INDEX)
    assert joins.canonical(got) == joins.canonical(want)
    customers = {k for k, (r, _) in want.items() if r is None}
    assert joins.parents_with_children(server, INDEX) == {r for r, _ in want.values() if r in customers}
    return got


def test_canal_parent_child_mappings_load_sync_verify_and_replay(deployment, mariadb):
    d = deployment
    cfg, db, server = d["cfg"], d["db"], d["server"]
    sql = query(mariadb, db)
    sluice("capture", "--config", cfg, "--once")                     # the binlog is read from here on
    customers = ", ".join(f"({i}, 'c{i}', 'c{i}@example.com', '2024-0{1 + i % 6}-15 08:00:00')" for i in range(1, 31))
    orders = ", ".join(f"({i}, {1 + i % 30}, 'S-{i}', '2024-0{1 + i % 6}-20 09:30:00')" for i in range(1, 91))
    run_sql(mariadb, db, f"INSERT INTO customer VALUES {customers}", f"INSERT INTO biz_order VALUES {orders}")

    # full load of what the etlCondition selects (both files: where t.c_time>={})
    cut = "2024-04-01 00:00:00"
    sluice("etl", "--config", cfg, "--group", "g1", "--all", "--params", cut, "--partitions", "2")
    got = converged(server, sql, {f: f"where t.c_time>='{cut}'" for f in joins.FILES})
    assert 0 < len(got) < 120 and all(s.get("order_time", "2024-04") >= "2024-04" for _, s in got.values())

    # the binlog catches up: every row, and then changes whose order matters
    sluice("capture", "--config", cfg, "--once")
    sluice("sync", "--config", cfg, "--group", "g1")
    converged(server, sql)
    run_sql(mariadb, db,
            "INSERT INTO biz_order VALUES (500, 50, 'early', '2024-06-01 00:00:00')",      # child before parent
            "START TRANSACTION",
            "UPDATE biz_order SET customer_id = 2 WHERE customer_id = 1",                 # children move
            "UPDATE customer SET id = 300 WHERE id = 3",                                  # parent re-keyed ...
            "UPDATE biz_order SET customer_id = 300 WHERE customer_id = 3",               # ... with its children
            "DELETE FROM biz_order WHERE customer_id = 4", "DELETE FROM customer WHERE id = 4",  # with children
            "DELETE FROM customer WHERE id = 5",                                          # alone: orphans
            "UPDATE biz_order SET serial_code = CONCAT(serial_code, '!') WHERE id % 7 = 0",
            "UPDATE biz_order SET id = id + 1000 WHERE id BETWEEN 60 AND 62",             # computed _id moves
            "COMMIT",
            "INSERT INTO customer VALUES (50, 'late parent', NULL, '2024-06-02 00:00:00')")
    sluice("capture", "--config", cfg, "--once")
    sluice("sync", "--config", cfg, "--group", "g1")
    got = converged(server, sql)
    assert got["oid_500"][0] == "50" and "50" in joins.parents_with_children(server, INDEX)
    assert "oid_1060" in got and "oid_60" not in got and "4" not in got and "300" in got
    assert not any(r == "1" for r, _ in got.values())
    verified = sluice("verify", "--config", cfg, "--json", check=False)
    assert verified.returncode == 0, verified.stdout + verified.stderr

    sluice("store", "set-cursor", "--config", cfg, "--group", "g1", "--to", "0")   # replay every batch
    sluice("sync", "--config", cfg, "--group", "g1")
    assert joins.actual(server, INDEX) == got
