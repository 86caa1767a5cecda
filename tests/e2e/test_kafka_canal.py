"""Topics canal-server writes, applied by Sluice from canal's own adapter config (``mode: kafka``).

The records are built exactly in canal's documented flatMessage format (tests/support/canal_records.py):
batch (multi-row) and single-row records, UPDATE with ``old``, DELETE, and DDL (``isDdl``), with
``sqlType``, ``mysqlType``, ``es``, ``ts``. The same statements run on the source, so the target
must equal it afterwards. A one-partition topic (canal's default) and a three-partition one hashed
by primary key as canal hashes; a poison record stops the sync naming topic, partition and offset
and nothing is acked past it.
"""

from __future__ import annotations

import json
import uuid

import pytest

from tests.support import sysbench
from tests.support.canal_records import USER_TYPES, adapter_config, canal_partition, flat, publish
from tests.support.compare import diff_databases
from tests.support.deploy import sluice
from tests.support.matrix import FULL

DDL_T = ("CREATE TABLE `user` (id INT PRIMARY KEY, name VARCHAR(40), role_id BIGINT, c_time DATETIME) "
         "ENGINE=InnoDB")


def _scenario(db: str) -> tuple[list[str], list[dict]]:
    """SQL run on the source, and the flatMessages canal writes for it (in binlog order)."""
    t = "2026-11-24 10:00:00"
    rows = [{"id": str(i), "name": f"n{i}", "role_id": str(i % 3), "c_time": t} for i in range(1, 7)]
    values = ", ".join(f"({i}, 'n{i}', {i % 3}, '{t}')" for i in range(1, 6))
    sql = [f"INSERT INTO `user` VALUES {values}",
           f"INSERT INTO `user` VALUES (6, 'n6', 0, '{t}')",
           "UPDATE `user` SET name = 'changed' WHERE id IN (2, 3)",
           "DELETE FROM `user` WHERE id = 4",
           "ALTER TABLE `user` ADD COLUMN note VARCHAR(20) DEFAULT NULL",
           "UPDATE `user` SET note = 'after ddl', role_id = 9 WHERE id = 5"]
    msgs = [flat(1, db, "user", "INSERT", rows[:5]),                    # a batch record: 5 rows
            flat(2, db, "user", "INSERT", rows[5:]),                    # a single-row record
            flat(3, db, "user", "UPDATE", [{**rows[1], "name": "changed"}, {**rows[2], "name": "changed"}],
                 old=[{"name": "n2"}, {"name": "n3"}]),
            flat(4, db, "user", "DELETE", [rows[3]]),
            flat(5, db, "user", "ALTER", None, sql=sql[4]),
            flat(6, db, "user", "UPDATE", [{**rows[4], "role_id": "9", "note": "after ddl"}],
                 old=[{"role_id": "2", "note": None}],
                 types={**USER_TYPES, "note": ("varchar(20)", 12)})]
    return sql, msgs


def _layout(db: str, partitions: int) -> str:
    """How canal's partitioning of the scenario places the ALTER among the rows in Sluice's
    positions ``(offset + 1, partition)``: "ordered" (every row before it is before it and every
    row after it is after it), "crossed" (the UPDATE that fills the new column is before it), or
    "mixed". canal mixes the database name into the hash, so this depends on ``db``; on three
    partitions it is seldom "ordered" (docs/kafka.md: canal's limit)."""
    counts: dict[int, int] = {}
    pos: list[tuple[int, int]] = []
    for m in _scenario(db)[1]:
        for part, _sub in sorted(canal_partition(m, partitions).items()):
            counts[part] = counts.get(part, 0) + 1
            pos.append((counts[part], part))
    ddl = len(pos) - 2  # the ALTER and the UPDATE after it are one record each, the last two
    if all(p < pos[ddl] for p in pos[:ddl]) and pos[-1] > pos[ddl]:
        return "ordered"
    return "crossed" if pos[-1] < pos[ddl] else "mixed"


@pytest.fixture()
def setup(request, tmp_path, mariadb, mariadb_target, kafka):
    """A source and a target database; ``request.param`` (indirect): "ordered" / "crossed" picks a
    database name whose three-partition layout keeps / breaks the ALTER's order (else any name)."""
    layout = getattr(request, "param", "any")
    while True:
        db = f"cnl_{uuid.uuid4().hex[:6]}"
        if layout in ("any", _layout(db, 3)):
            break
    tdb = f"{db}_copy"
    sysbench.create_database(mariadb, db)
    sysbench.create_database(mariadb_target, tdb)
    for info, name in ((mariadb, db), (mariadb_target, tdb)):
        with sysbench.connect(info, name) as c, c.cursor() as cur:
            cur.execute(DDL_T)
    yield {"db": db, "tdb": tdb, "tmp": tmp_path}
    sysbench.drop_database(mariadb, db)
    sysbench.drop_database(mariadb_target, tdb)


def _deploy(s, mariadb, mariadb_target, kafka, topic: str, partitions: int):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": kafka["bootstrap"]})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result()
    mapping = {"dataSourceKey": "defaultDS", "destination": topic, "groupId": "g1", "outerAdapterKey": "mysql1",
               "concurrent": True, "dbMapping": {"mirrorDb": True, "database": s["db"], "targetDb": s["tdb"]}}
    return adapter_config(s["tmp"], bootstrap=kafka["bootstrap"], topic=topic, group=f"g1-{topic}"[:60],
                          source=mariadb, target={**mariadb_target, "database": s["tdb"]},
                          mapping={**mapping, "groupId": f"g1-{topic}"[:60]},
                          extra={"spark": {"master": "local[2]", "partitions": 2}})


@pytest.mark.parametrize(("partitions", "setup"), [*([(1, "any")] if FULL else []), (3, "ordered")],  # CI budget
                         indirect=["setup"])
def test_canal_flat_messages_apply_to_the_same_mappings(setup, mariadb, mariadb_target, kafka, partitions):
    s = setup
    topic = f"{s['db']}_p{partitions}"
    cfg = _deploy(s, mariadb, mariadb_target, kafka, topic, partitions)
    sql, msgs = _scenario(s["db"])
    with sysbench.connect(mariadb, s["db"]) as c, c.cursor() as cur:
        for q in sql:
            cur.execute(q)
        c.commit()
    publish(kafka["bootstrap"], topic, msgs, partitions)
    group = f"g1-{topic}"[:60]
    out = json.loads(sluice("sync", "--config", str(cfg), "--group", group, "--json").stdout.splitlines()[-1])
    assert out["rows"] >= 10 and out["ddl"] == 1
    diff = diff_databases(mariadb, s["db"], mariadb_target, s["tdb"])
    assert diff == {"user": 0}, diff
    st = json.loads(sluice("store", "status", "--config", str(cfg), "--json").stdout)
    assert st["groups"][group]["pending_rows"] == 0
    again = json.loads(sluice("sync", "--config", str(cfg), "--group", group, "--json").stdout.splitlines()[-1])
    assert again["rows"] == 0  # acked: nothing pending


@pytest.mark.parametrize("setup", ["crossed"], indirect=True)
def test_rows_canal_put_before_a_ddl_stop_the_sync(setup, mariadb, mariadb_target, kafka):
    """canal's limit on several partitions (docs/kafka.md): the UPDATE that fills a new column sits
    before the ALTER in positions; the sync stops with the column named and acks nothing."""
    s = setup
    topic = f"{s['db']}_x3"
    cfg = _deploy(s, mariadb, mariadb_target, kafka, topic, 3)
    sql, msgs = _scenario(s["db"])
    with sysbench.connect(mariadb, s["db"]) as c, c.cursor() as cur:
        for q in sql:
            cur.execute(q)
        c.commit()
    publish(kafka["bootstrap"], topic, msgs, 3)
    group = f"g1-{topic}"[:60]
    bad = sluice("sync", "--config", str(cfg), "--group", group, check=False)
    assert bad.returncode != 0, bad.stdout + bad.stderr
    assert "source column note" in bad.stderr and "no batch was acked" in bad.stderr, bad.stderr[-3000:]
    st = json.loads(sluice("store", "status", "--config", str(cfg), "--json").stdout)
    assert st["groups"][group]["cursor"] == 0 and st["groups"][group]["pending_rows"] == 9


def test_poison_record_names_its_place_and_acks_nothing(setup, mariadb, mariadb_target, kafka):
    from confluent_kafka import Producer

    s = setup
    topic = f"{s['db']}_poison"
    cfg = _deploy(s, mariadb, mariadb_target, kafka, topic, 1)
    with sysbench.connect(mariadb, s["db"]) as c, c.cursor() as cur:
        cur.execute("INSERT INTO `user` VALUES (1, 'a', 1, NULL)")
        c.commit()
    good = flat(1, s["db"], "user", "INSERT", [{"id": "1", "name": "a", "role_id": "1", "c_time": None}])
    p = Producer({"bootstrap.servers": kafka["bootstrap"]})
    p.produce(topic, json.dumps(good).encode())
    p.produce(topic, b"{this is not json")
    p.produce(topic, json.dumps(good).encode())
    assert p.flush(30) == 0
    group = f"g1-{topic}"[:60]
    bad = sluice("sync", "--config", str(cfg), "--group", group, check=False)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert f"poison record: topic {topic} partition 0 offset 1" in bad.stderr, bad.stderr[-3000:]
    st = json.loads(sluice("store", "status", "--config", str(cfg), "--json").stdout)
    assert st["groups"][group]["cursor"] == 0 and st["groups"][group]["pending_rows"] == 3  # nothing acked
