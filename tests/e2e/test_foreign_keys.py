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
children in different partitions) converges too.
"""

from __future__ import annotations

import json
import uuid

import psycopg
import pytest

from tests.support import sysbench, workloads
from tests.support.compare import diff_databases, pg_diff
from tests.support.deploy import kafka_store, rdb_adapter, sluice, write_deployment

GROUPS = {"m1": ("maria", 1), "m4": ("maria", 4), "p1": ("pg", 1), "p4": ("pg", 4)}
KAFKA_GROUPS = {"m4": ("maria", 4), "p1": ("pg", 1)}


def _pg(postgres):
    return psycopg.connect(host=postgres["host"], port=postgres["port"], user=postgres["user"],
                           password=postgres["password"], dbname=postgres["database"], autocommit=True)


def _deployed(tmp, mariadb, mariadb_target, postgres, groups_of: dict, kafka: dict | None = None) -> dict:
    """Capture the seeded workload once (into files, or ``kafka``) for ``groups_of``' targets."""
    base = f"fk_{uuid.uuid4().hex[:6]}"
    a, b, c = f"{base}_a", f"{base}_b", f"{base}_c"
    groups, mappings = [], {}
    for g, (kind, _) in groups_of.items():
        dbs = (a, b, c) if kind == "maria" else (a, b)
        if kind == "maria":
            for d in dbs:
                sysbench.create_database(mariadb_target, f"{d}_{g}")
            adapter = rdb_adapter(mariadb_target, g, f"{a}_{g}")
        else:
            with _pg(postgres) as conn:
                for d in dbs:
                    conn.execute(f'CREATE SCHEMA "{d}_{g}"')
                for stmt in workloads.FK_PG_DDL_A + workloads.FK_PG_DDL_B:
                    conn.execute(stmt.format(a=f'"{a}_{g}"', b=f'"{b}_{g}"'))
            adapter = rdb_adapter(postgres, g, postgres["database"], dialect="postgresql")
        for d in dbs:
            mappings[f"{g}/{d}.yml"] = {"groupId": g, "outerAdapterKey": g,
                                        "dbMapping": {"mirrorDb": True, "database": d, "targetDb": f"{d}_{g}"}}
        groups.append({"groupId": g, "outerAdapters": [adapter], "mappings": [f"mappings/{g}/*.yml"]})
    store = {} if kafka is None else {
        "kafka": kafka_store(kafka, base, partitionsNum=3, partitionHash=rf"{base}_.*\..*:$pk$")}
    cfg = write_deployment(tmp, mariadb, name=base, include=rf"{base}_.*\..*", groups=groups, mappings=mappings,
                           batch_rows=400, **store)
    sluice("capture", "--config", str(cfg), "--once")
    with sysbench.connect(mariadb) as conn, conn.cursor() as cur:
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
    return {"cfg": cfg, "dbs": (a, b, c)}


def _drop(d: dict, mariadb, mariadb_target, postgres, groups_of: dict) -> None:
    a, b, c = d["dbs"]
    for db in (c, b, a):  # children's databases first
        sysbench.drop_database(mariadb, db)
    for g, (kind, _) in groups_of.items():
        if kind == "maria":
            for db in (c, b, a):
                sysbench.drop_database(mariadb_target, f"{db}_{g}")
        else:
            with _pg(postgres) as conn:
                for db in (b, a):
                    conn.execute(f'DROP SCHEMA "{db}_{g}" CASCADE')


@pytest.fixture(scope="module")
def fk(tmp_path_factory, mariadb, mariadb_target, postgres):
    d = _deployed(tmp_path_factory.mktemp("fk"), mariadb, mariadb_target, postgres, GROUPS)
    yield d
    _drop(d, mariadb, mariadb_target, postgres, GROUPS)


@pytest.fixture(scope="module")
def fk_kafka(tmp_path_factory, mariadb, mariadb_target, postgres, kafka):
    d = _deployed(tmp_path_factory.mktemp("fk-kafka"), mariadb, mariadb_target, postgres, KAFKA_GROUPS, kafka)
    yield d
    _drop(d, mariadb, mariadb_target, postgres, KAFKA_GROUPS)


def _converges(fk: dict, group: str, kind: str, partitions: int, mariadb, mariadb_target, postgres) -> None:
    out = sluice("sync", "--config", str(fk["cfg"]), "--group", group, "--partitions", str(partitions), "--json")
    summary = json.loads([line for line in out.stdout.splitlines() if line.startswith("{")][-1])
    assert summary["rows"] > 500
    a, b, c = fk["dbs"]
    if kind == "maria":
        diffs = {d: diff_databases(mariadb, d, mariadb_target, f"{d}_{group}") for d in (a, b, c)}
    else:
        diffs = {d: pg_diff(mariadb, d, postgres, f"{d}_{group}") for d in (a, b)}
    assert all(len(t) > 0 and all(v == 0 for v in t.values()) for t in diffs.values()), diffs


@pytest.mark.parametrize("group", list(GROUPS))
def test_foreign_keys_and_generated_columns_converge(fk, group, mariadb, mariadb_target, postgres):
    _converges(fk, group, *GROUPS[group], mariadb, mariadb_target, postgres)


@pytest.mark.parametrize("group", list(KAFKA_GROUPS))
def test_foreign_keys_and_generated_columns_converge_through_kafka(fk_kafka, group, mariadb, mariadb_target,
                                                                  postgres):
    _converges(fk_kafka, group, *KAFKA_GROUPS[group], mariadb, mariadb_target, postgres)
