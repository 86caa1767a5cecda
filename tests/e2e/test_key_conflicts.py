"""Seeded random OLTP workloads with keys that collide: composite and single string keys under
``_ci`` collations whose values differ only in case, accents or trailing spaces; PK changes and
swaps; unique values swapped, cycled and moved from deleted rows; REPLACE and IODKU; a table
with only a unique key and one with no key; DDL in the middle. Captured once, applied by four
groups (MariaDB mirror and PostgreSQL, 1 and 4 partitions): every target must equal the source
row for row (as text, byte for byte), and a replay of everything (cursor 0) must too.

The same workload also goes through the Kafka store (3 partitions hashed by primary key, as
canal's partitionHash): key variants that are one row under ``_ci`` land in different Kafka
partitions, and the job must still apply their changes in the source's order.
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
#: the groups of the Kafka run (one Spark partition: records of three Kafka partitions sorted)
KAFKA_GROUPS = {"m1": ("maria", 1), "p4": ("pg", 4)}


def _pg(postgres):
    return psycopg.connect(host=postgres["host"], port=postgres["port"], user=postgres["user"],
                           password=postgres["password"], dbname=postgres["database"], autocommit=True)


def _deployed(tmp, mariadb, mariadb_target, postgres, groups_of: dict, kafka: dict | None = None):
    """Capture the seeded workload once (into files, or ``kafka``) for ``groups_of``' targets."""
    db = f"kc_{uuid.uuid4().hex[:6]}"
    groups, mappings = [], {}
    for g, (kind, _) in groups_of.items():
        tdb = f"{db}_{g}"
        if kind == "maria":
            sysbench.create_database(mariadb_target, tdb)
            adapter = rdb_adapter(mariadb_target, g, tdb)
        else:
            with _pg(postgres) as c:
                c.execute(f'CREATE SCHEMA "{tdb}"')
                for stmt in workloads.KEYS_PG_DDL:
                    c.execute(stmt.format(s=f'"{tdb}"'))
            adapter = rdb_adapter(postgres, g, postgres["database"], dialect="postgresql")
        mappings[f"{g}.yml"] = {"groupId": g, "outerAdapterKey": g,
                                "dbMapping": {"mirrorDb": True, "database": db, "targetDb": tdb}}
        groups.append({"groupId": g, "outerAdapters": [adapter], "mappings": [f"mappings/{g}.yml"]})
    store = {} if kafka is None else {"kafka": kafka_store(kafka, db, partitionsNum=3, partitionHash=rf"{db}\..*:$pk$")}
    cfg = write_deployment(tmp, mariadb, name=db, include=rf"{db}\..*", groups=groups, mappings=mappings,
                           batch_rows=300, **store)
    sluice("capture", "--config", str(cfg), "--once")
    with sysbench.connect(mariadb) as c, c.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{db}`")
        cur.execute(f"USE `{db}`")
        for stmt in workloads.KEYS_DDL:
            cur.execute(stmt)
        workloads.keys_seed(cur)
        workloads.run(cur, workloads.keys_step, seed=20, steps=700, ddl_mid=workloads.KEYS_DDL_MID)
    sluice("capture", "--config", str(cfg), "--once")
    return {"cfg": cfg, "db": db}


def _drop(d, mariadb, mariadb_target, postgres, groups_of: dict) -> None:
    db = d["db"]
    sysbench.drop_database(mariadb, db)
    for g, (kind, _) in groups_of.items():
        if kind == "maria":
            sysbench.drop_database(mariadb_target, f"{db}_{g}")
        else:
            with _pg(postgres) as c:
                c.execute(f'DROP SCHEMA "{db}_{g}" CASCADE')


@pytest.fixture(scope="module")
def keyed(tmp_path_factory, mariadb, mariadb_target, postgres):
    d = _deployed(tmp_path_factory.mktemp("keys"), mariadb, mariadb_target, postgres, GROUPS)
    yield d
    _drop(d, mariadb, mariadb_target, postgres, GROUPS)


@pytest.fixture(scope="module")
def keyed_kafka(tmp_path_factory, mariadb, mariadb_target, postgres, kafka):
    d = _deployed(tmp_path_factory.mktemp("keys-kafka"), mariadb, mariadb_target, postgres, KAFKA_GROUPS, kafka)
    yield d
    _drop(d, mariadb, mariadb_target, postgres, KAFKA_GROUPS)


def _sync(cfg, group: str, partitions: int) -> dict:
    out = sluice("sync", "--config", str(cfg), "--group", group, "--partitions", str(partitions), "--json")
    return json.loads([line for line in out.stdout.splitlines() if line.startswith("{")][-1])


def _diff(kind, d, group, mariadb, mariadb_target, postgres) -> dict:
    if kind == "maria":
        return diff_databases(mariadb, d["db"], mariadb_target, f"{d['db']}_{group}")
    return pg_diff(mariadb, d["db"], postgres, f"{d['db']}_{group}")


def _converges(d: dict, kind: str, group: str, partitions: int, mariadb, mariadb_target, postgres) -> None:
    """One sync of everything captured: every table equal to the source."""
    assert _sync(d["cfg"], group, partitions)["rows"] > 500
    diff = _diff(kind, d, group, mariadb, mariadb_target, postgres)
    assert set(diff) == {"b", "s", "u", "uk", "nk"} and all(v == 0 for v in diff.values()), diff


def _replays(d: dict, kind: str, group: str, partitions: int, mariadb, mariadb_target, postgres) -> dict:
    """Cursor 0 and one sync again, over the converged target: still equal; the sync's summary."""
    sluice("store", "set-cursor", "--config", str(d["cfg"]), "--group", group, "--to", "0")
    summary = _sync(d["cfg"], group, partitions)
    diff = _diff(kind, d, group, mariadb, mariadb_target, postgres)
    assert all(v == 0 for v in diff.values()), diff
    return summary


@pytest.mark.parametrize("group", list(GROUPS))
def test_seeded_workload_converges(keyed, group, mariadb, mariadb_target, postgres):
    kind, partitions = GROUPS[group]
    _converges(keyed, kind, group, partitions, mariadb, mariadb_target, postgres)


@pytest.mark.parametrize("group", ["m4", "p4"])
def test_replay_from_zero_over_the_newer_target_converges(keyed, group, mariadb, mariadb_target, postgres):
    """Replaying every batch over a target that already holds the end state (PK changes and moved
    unique values in the history) converges; the ordered tables skip what the target holds."""
    kind, partitions = GROUPS[group]
    cursor = json.loads(sluice("store", "status", "--config", str(keyed["cfg"]), "--json").stdout)
    assert cursor["groups"][group]["cursor"] > 0, "the convergence test ran first"
    summary = _replays(keyed, kind, group, partitions, mariadb, mariadb_target, postgres)
    assert sum(summary["skipped"].values()) > 0


@pytest.mark.parametrize("group", list(KAFKA_GROUPS))
def test_seeded_workload_through_kafka_converges(keyed_kafka, group, mariadb, mariadb_target, postgres):
    """Through the Kafka store, then a replay of everything over the converged target."""
    kind, partitions = KAFKA_GROUPS[group]
    _converges(keyed_kafka, kind, group, partitions, mariadb, mariadb_target, postgres)
    _replays(keyed_kafka, kind, group, partitions, mariadb, mariadb_target, postgres)
