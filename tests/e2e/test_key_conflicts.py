"""Seeded random OLTP workloads with keys that collide: composite and single string keys under
``_ci`` collations whose values differ only in case, accents or trailing spaces; PK changes and
swaps; unique values swapped, cycled and moved from deleted rows; REPLACE and IODKU; a table
with only a unique key and one with no key; DDL in the middle. Captured once, applied by four
groups (MariaDB mirror and PostgreSQL, 1 and 4 partitions): every target must equal the source
row for row (as text, byte for byte), and a replay of everything (cursor 0) must too.

The same workload also goes through the Kafka store (3 partitions hashed by primary key, as
canal's partitionHash): key variants that are one row under ``_ci`` land in different Kafka
partitions, and the job must still apply their changes in the source's order.

And from Oracle MySQL, with keys under its NO PAD collations, into MySQL, MariaDB and PostgreSQL
(tests/support/matrix.py: the groups, and the full cross product with SLUICE_E2E_FULL=1).
"""

from __future__ import annotations

import json
import uuid

import pytest

from tests.support import matrix, sysbench, workloads
from tests.support.deploy import kafka_store, sluice, write_deployment

#: y4: MariaDB's PAD SPACE keys (one of them the database's default collation) into Oracle MySQL,
#: whose default is NO PAD
#: (the default run: each kind once, both partition counts; SLUICE_E2E_FULL=1: every pair)
GROUPS = ({"m1": ("maria", 1), "m4": ("maria", 4), "p1": ("pg", 1), "p4": ("pg", 4), "y4": ("mysql", 4)}
          if matrix.FULL else {"m1": ("maria", 1), "p4": ("pg", 4), "y4": ("mysql", 4)})
#: the groups of the Kafka run (one Spark partition: records of three Kafka partitions sorted)
KAFKA_GROUPS = {"m1": ("maria", 1), "p4": ("pg", 4)} if matrix.FULL else {"m1": ("maria", 1)}
#: from Oracle MySQL (keys under NO PAD collations): each target kind, each partition count
#: (SLUICE_E2E_FULL=1: every kind with 1 and 4 partitions)
#: transactions of the seeded workload (each of its 16 kinds commits about a dozen times)
STEPS = 400
MYSQL_GROUPS = matrix.groups({"y4": ("mysql", 4)})


def _deployed(tmp, servers: matrix.Servers, groups_of: dict, kafka: dict | None = None, mysql: bool = False):
    """Capture the seeded workload once (into files, or ``kafka``) for ``groups_of``' targets."""
    db = f"kc_{uuid.uuid4().hex[:6]}"
    groups, mappings = [], {}
    for g, (kind, _) in groups_of.items():
        tdb = f"{db}_{g}"
        adapter = servers.create(kind, tdb, g, workloads.KEYS_PG_DDL, s=f'"{tdb}"')
        mappings[f"{g}.yml"] = {"groupId": g, "outerAdapterKey": g,
                                "dbMapping": {"mirrorDb": True, "database": db, "targetDb": tdb}}
        groups.append({"groupId": g, "outerAdapters": [adapter], "mappings": [f"mappings/{g}.yml"]})
    store = {} if kafka is None else {"kafka": kafka_store(kafka, db, partitionsNum=3, partitionHash=rf"{db}\..*:$pk$")}
    cfg = write_deployment(tmp, servers.source, name=db, include=rf"{db}\..*", groups=groups, mappings=mappings,
                           batch_rows=300, **store)
    sluice("capture", "--config", str(cfg), "--once")
    with sysbench.connect(servers.source) as c, c.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{db}`")
        cur.execute(f"USE `{db}`")
        for stmt in workloads.KEYS_DDL_MYSQL if mysql else workloads.KEYS_DDL:
            cur.execute(stmt)
        workloads.keys_seed(cur)
        tally = workloads.run(cur, workloads.keys_step, seed=20, steps=STEPS, ddl_mid=workloads.KEYS_DDL_MID)
    # the workload did what this module claims: every kind of conflict committed several times
    assert not tally.missing(workloads.KEYS_KINDS, 3), f"kinds that (almost) never committed: {tally}"
    sluice("capture", "--config", str(cfg), "--once")
    return {"cfg": cfg, "db": db, "servers": servers, "groups": groups_of}


def _drop(d) -> None:
    db, servers = d["db"], d["servers"]
    sysbench.drop_database(servers.source, db)
    for g, (kind, _) in d["groups"].items():
        servers.drop(kind, f"{db}_{g}")


@pytest.fixture(scope="module")
def keyed(tmp_path_factory, request):
    servers = matrix.Servers.of(request, "mariadb", [k for k, _ in GROUPS.values()])
    d = _deployed(tmp_path_factory.mktemp("keys"), servers, GROUPS)
    yield d
    _drop(d)


@pytest.fixture(scope="module")
def keyed_kafka(tmp_path_factory, request, kafka):
    servers = matrix.Servers.of(request, "mariadb", [k for k, _ in KAFKA_GROUPS.values()])
    d = _deployed(tmp_path_factory.mktemp("keys-kafka"), servers, KAFKA_GROUPS, kafka)
    yield d
    _drop(d)


@pytest.fixture(scope="module")
def keyed_mysql(tmp_path_factory, request):
    servers = matrix.Servers.of(request, "mysql", [k for k, _ in MYSQL_GROUPS.values()])
    d = _deployed(tmp_path_factory.mktemp("keys-mysql"), servers, MYSQL_GROUPS, mysql=True)
    yield d
    _drop(d)


def _sync(cfg, group: str, partitions: int) -> dict:
    out = sluice("sync", "--config", str(cfg), "--group", group, "--partitions", str(partitions), "--json")
    return json.loads([line for line in out.stdout.splitlines() if line.startswith("{")][-1])


def _diff(d, group) -> dict:
    kind, _ = d["groups"][group]
    return d["servers"].diff(kind, d["db"], f"{d['db']}_{group}")


def _status(d: dict) -> dict:
    return json.loads(sluice("store", "status", "--config", str(d["cfg"]), "--json").stdout)


def _converges(d: dict, group: str) -> None:
    """One sync of everything captured: it takes exactly the captured batches, applies at least
    one change per captured row (a key change is two: the old key's delete, the new key's
    upsert), acks the last batch, and every table equals the source. Once per group: a test that
    needs the converged target calls it too, in whatever order the tests run."""
    done = d.setdefault("converged", set())
    if group in done:
        return
    st = _status(d)
    pending, last = st["groups"].get(group, {}), st["last_batch"]
    summary = _sync(d["cfg"], group, d["groups"][group][1])
    assert summary["batches"] == pending.get("pending_batches", last), (summary, st)
    assert summary["rows"] >= pending.get("pending_rows", st["rows"]) > 300, (summary, st)
    assert summary["cursor"] == last == _status(d)["groups"][group]["cursor"]
    diff = _diff(d, group)
    assert set(diff) == {"b", "s", "u", "uk", "nk"} and all(v == 0 for v in diff.values()), diff
    done.add(group)


def _replays(d: dict, group: str) -> dict:
    """Cursor 0 and one sync again, over the converged target: still equal; the sync's summary."""
    sluice("store", "set-cursor", "--config", str(d["cfg"]), "--group", group, "--to", "0")
    summary = _sync(d["cfg"], group, d["groups"][group][1])
    diff = _diff(d, group)
    assert all(v == 0 for v in diff.values()), diff
    return summary


@pytest.mark.parametrize("group", list(GROUPS))
def test_seeded_workload_converges(keyed, group):
    _converges(keyed, group)


@pytest.mark.parametrize("group", [g for g in ("m4", "p4") if g in GROUPS])
def test_replay_from_zero_over_the_newer_target_converges(keyed, group):
    """Replaying every batch over a target that already holds the end state (PK changes and moved
    unique values in the history) converges; the ordered tables skip what the target holds."""
    _converges(keyed, group)
    summary = _replays(keyed, group)
    assert sum(summary["skipped"].values()) > 0


@pytest.mark.parametrize("group", list(KAFKA_GROUPS))
def test_seeded_workload_through_kafka_converges(keyed_kafka, group):
    """Through the Kafka store, then a replay of everything over the converged target."""
    _converges(keyed_kafka, group)
    _replays(keyed_kafka, group)


@pytest.mark.parametrize("group", list(MYSQL_GROUPS))
def test_seeded_workload_from_mysql_converges(keyed_mysql, group):
    """From Oracle MySQL, keys under its NO PAD default ``utf8mb4_0900_ai_ci`` (``'z'`` and ``'z '``
    are two rows) and ``utf8mb4_0900_as_ci`` beside PAD SPACE ones, into MySQL, MariaDB (whose
    replayed tables must compare keys as the source did) and PostgreSQL."""
    _converges(keyed_mysql, group)
