"""A unique functional index takes part in the unique-key conflict handling like any unique key.

Oracle MySQL indexes expressions (``UNIQUE KEY uj ((CAST(doc->>'$.code' AS CHAR(20)) COLLATE
utf8mb4_bin))``); information_schema reports such a key part with no column name. A mirror that
did not see the key applied the table hash-partitioned and set-based, and a code swapped between
rows within one batch failed every run with ``1062 Duplicate entry 'c12' for key 'f.uj'``. The
seeded swaps, moves and re-inserts below, captured from MySQL and applied into a MySQL mirror with
4 partitions, must converge byte for byte.
"""

from __future__ import annotations

import json
import random
import uuid

from tests.support import sysbench
from tests.support.compare import diff_databases
from tests.support.deploy import rdb_adapter, sluice, write_deployment

DDL = ("CREATE TABLE f (id INT NOT NULL PRIMARY KEY, doc JSON, n INT, "
       "UNIQUE KEY uj ((CAST(doc->>'$.code' AS CHAR(20)) COLLATE utf8mb4_bin)))")


def _doc(code: str) -> str:
    return json.dumps({"code": code})


def _workload(cur, seed: int, steps: int) -> None:
    rng = random.Random(seed)
    for i in range(1, 31):
        cur.execute("INSERT INTO f VALUES (%s, %s, 0)", (i, _doc(f"c{i}")))
    for step in range(steps):
        a, b = rng.sample(range(1, 31), 2)
        op = rng.randrange(3)
        cur.execute("START TRANSACTION")
        if op == 0:  # swap two codes through a temporary one
            cur.execute("SELECT doc INTO @da FROM f WHERE id = %s", (a,))
            cur.execute("SELECT doc INTO @db FROM f WHERE id = %s", (b,))
            cur.execute("UPDATE f SET doc = %s WHERE id = %s", (_doc(f"t{step}"), a))
            cur.execute("UPDATE f SET doc = @da, n = n + 1 WHERE id = %s", (b,))
            cur.execute("UPDATE f SET doc = @db WHERE id = %s", (a,))
        elif op == 1:  # a row is deleted and another takes its code
            cur.execute("SELECT doc INTO @da FROM f WHERE id = %s", (a,))
            cur.execute("DELETE FROM f WHERE id = %s", (a,))
            cur.execute("UPDATE f SET doc = @da WHERE id = %s", (b,))
            cur.execute("INSERT INTO f VALUES (%s, %s, %s)", (a, _doc(f"n{step}"), step))
        else:  # the code moves to a new key
            cur.execute("UPDATE f SET id = %s WHERE id = %s", (1000 + step, a))
            cur.execute("UPDATE f SET id = %s WHERE id = %s", (a, 1000 + step))
        cur.execute("COMMIT")


def test_a_unique_functional_index_converges(tmp_path, mysql, mysql_target):
    db = f"fn_{uuid.uuid4().hex[:6]}"
    tdb = f"{db}_y"
    sysbench.create_database(mysql_target, tdb)
    mapping = {"groupId": "g1", "outerAdapterKey": "y", "dbMapping": {"mirrorDb": True, "database": db,
                                                                      "targetDb": tdb}}
    cfg = write_deployment(tmp_path, mysql, name=db, include=rf"{db}\..*", mappings={"m.yml": mapping},
                           groups=[{"groupId": "g1", "outerAdapters": [rdb_adapter(mysql_target, "y", tdb)],
                                    "mappings": ["mappings/*.yml"]}], partitions=4)
    try:
        sluice("capture", "--config", str(cfg), "--once")
        with sysbench.connect(mysql) as c, c.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{db}`")
            cur.execute(f"USE `{db}`")
            cur.execute(DDL)
        sluice("capture", "--config", str(cfg), "--once")
        sluice("sync", "--config", str(cfg), "--group", "g1", "--partitions", "4")  # the table, empty
        with sysbench.connect(mysql, db) as c, c.cursor() as cur:
            _workload(cur, seed=36, steps=120)
        sluice("capture", "--config", str(cfg), "--once")
        sluice("sync", "--config", str(cfg), "--group", "g1", "--partitions", "4")
        assert diff_databases(mysql, db, mysql_target, tdb) == {"f": 0}
    finally:
        sysbench.drop_database(mysql, db)
        sysbench.drop_database(mysql_target, tdb)
