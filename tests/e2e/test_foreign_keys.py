"""Mirrored schemas with foreign keys and generated columns (the binlog does not carry cascaded
changes; the target computes generated columns itself).

A seeded random workload over parent/child/grandchild tables with every foreign key action
(CASCADE, SET NULL, RESTRICT on delete and update), a self-reference, a composite key, a
foreign key into another mapped database, parents re-keyed and deleted with many children,
children moved to a parent created in the same transaction, unique codes swapped, generated
columns (VIRTUAL and STORED), and -- into MariaDB, which replays DDL -- a foreign key added and
dropped mid-stream and columns turned generated and back. Captured once, applied by four groups
(MariaDB mirror and PostgreSQL, 1 and 4 partitions): every table equal to the source, exit 0.
The same workload through the Kafka store (3 partitions hashed by primary key: a parent and its
children in different partitions) converges too. So does the workload from Oracle MySQL 9 into
MySQL, MariaDB and PostgreSQL (tests/support/matrix.py).
"""

from __future__ import annotations

import json
import uuid

import pytest

from pipeline.config import load_config
from tests.support import matrix, sysbench, workloads
from tests.support.capture_check import all_records
from tests.support.deploy import kafka_store, sluice, write_deployment

#: each target kind and each partition count once (SLUICE_E2E_FULL=1: every pair)
GROUPS = matrix.groups({"m1": ("maria", 1), "p4": ("pg", 4)}, kinds=("maria", "pg"))
KAFKA_GROUPS = {"m4": ("maria", 4), "p1": ("pg", 1)} if matrix.FULL else {"m4": ("maria", 4)}
#: from Oracle MySQL 9 (cascaded rows logged, ahead of their parent's): into MySQL with 1 partition
#: by default (CI budget; PostgreSQL with 4 too with SLUICE_E2E_FULL=1, and every kind with 1 and 4)
MYSQL_GROUPS = matrix.groups({"y1": ("mysql", 1)})


def _deployed(tmp, servers: matrix.Servers, groups_of: dict, kafka: dict | None = None) -> dict:
    """Capture the seeded workload once (into files, or ``kafka``) for ``groups_of``' targets."""
    base = f"fk_{uuid.uuid4().hex[:6]}"
    a, b, c = f"{base}_a", f"{base}_b", f"{base}_c"
    groups, mappings = [], {}
    for g, (kind, _) in groups_of.items():
        dbs = (a, b) if kind == "pg" else (a, b, c)  # PostgreSQL replays no DDL: no mid-stream changes
        pg_ddl = workloads.FK_PG_DDL_A + workloads.FK_PG_DDL_B
        adapter = None
        for d in dbs:  # PostgreSQL: every schema first, then the tables (a foreign key across them)
            made = servers.create(kind, f"{d}_{g}", g, pg_ddl if kind == "pg" and d == b else [],
                                  a=f'"{a}_{g}"', b=f'"{b}_{g}"')
            adapter = adapter or made
            mappings[f"{g}/{d}.yml"] = {"groupId": g, "outerAdapterKey": g,
                                        "dbMapping": {"mirrorDb": True, "database": d, "targetDb": f"{d}_{g}"}}
        groups.append({"groupId": g, "outerAdapters": [adapter], "mappings": [f"mappings/{g}/*.yml"]})
    store = {} if kafka is None else {
        "kafka": kafka_store(kafka, base, partitionsNum=3, partitionHash=rf"{base}_.*\..*:$pk$")}
    cfg = write_deployment(tmp, servers.source, name=base, include=rf"{base}_.*\..*", groups=groups,
                           mappings=mappings, batch_rows=400, **store)
    sluice("capture", "--config", str(cfg), "--once")
    with sysbench.connect(servers.source) as conn, conn.cursor() as cur:
        for d in (a, b, c):
            cur.execute(f"CREATE DATABASE `{d}`")
        cur.execute(f"USE `{a}`")
        for stmt in workloads.FK_DDL_A:
            cur.execute(stmt)
        cur.execute(f"USE `{b}`")
        for stmt in workloads.FK_DDL_B:
            cur.execute(stmt.format(a=a))
        cur.execute(f"USE `{c}`")
        for stmt in workloads.FK_DDL_C:
            cur.execute(stmt)
        workloads.fk_seed(cur, a, b, c)
        workloads.fk_run(cur, seed=24, steps=600, a=a, b=b, c=c)
    sluice("capture", "--config", str(cfg), "--once")
    return {"cfg": cfg, "dbs": (a, b, c), "servers": servers, "groups": groups_of}


def _drop(d: dict) -> None:
    a, b, c = d["dbs"]
    servers = d["servers"]
    for db in (c, b, a):  # children's databases first
        sysbench.drop_database(servers.source, db)
    for g, (kind, _) in d["groups"].items():
        for db in (c, b, a):
            servers.drop(kind, f"{db}_{g}")


@pytest.fixture(scope="module")
def fk(tmp_path_factory, request):
    servers = matrix.Servers.of(request, "mariadb", [k for k, _ in GROUPS.values()])
    d = _deployed(tmp_path_factory.mktemp("fk"), servers, GROUPS)
    yield d
    _drop(d)


@pytest.fixture(scope="module")
def fk_kafka(tmp_path_factory, request, kafka):
    servers = matrix.Servers.of(request, "mariadb", [k for k, _ in KAFKA_GROUPS.values()])
    d = _deployed(tmp_path_factory.mktemp("fk-kafka"), servers, KAFKA_GROUPS, kafka)
    yield d
    _drop(d)


@pytest.fixture(scope="module")
def fk_mysql(tmp_path_factory, request):
    servers = matrix.Servers.of(request, "mysql", [k for k, _ in MYSQL_GROUPS.values()])
    d = _deployed(tmp_path_factory.mktemp("fk-mysql"), servers, MYSQL_GROUPS)
    yield d
    _drop(d)


def _converges(fk: dict, group: str) -> None:
    kind, partitions = fk["groups"][group]
    out = sluice("sync", "--config", str(fk["cfg"]), "--group", group, "--partitions", str(partitions), "--json")
    summary = json.loads([line for line in out.stdout.splitlines() if line.startswith("{")][-1])
    assert summary["rows"] > 500
    dbs = fk["dbs"][:2] if kind == "pg" else fk["dbs"]
    diffs = {d: fk["servers"].diff(kind, d, f"{d}_{group}") for d in dbs}
    assert all(len(t) > 0 and all(v == 0 for v in t.values()) for t in diffs.values()), diffs


@pytest.mark.parametrize("group", list(GROUPS))
def test_foreign_keys_and_generated_columns_converge(fk, group):
    _converges(fk, group)


@pytest.mark.parametrize("group", list(KAFKA_GROUPS))
def test_foreign_keys_and_generated_columns_converge_through_kafka(fk_kafka, group):
    _converges(fk_kafka, group)


@pytest.mark.parametrize("group", list(MYSQL_GROUPS))
def test_foreign_keys_and_generated_columns_converge_from_mysql(fk_mysql, group):
    """From Oracle MySQL 9, whose SQL-layer foreign keys (``innodb_native_foreign_keys=OFF``) log
    the cascaded child rows, flagged NO_FOREIGN_KEY_CHECKS, ahead of the parent row whose change
    caused them: the job applies them with the target's foreign key checks off
    (tests/integration/test_rdb_fk_checks.py), as capture records the flag (``fkChecks: false``)."""
    records = all_records(str(load_config(str(fk_mysql["cfg"])).store_dir()))
    assert any(r.get("fkChecks") is False for r in records)
    _converges(fk_mysql, group)
