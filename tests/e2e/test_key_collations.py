"""A target key that compares more coarsely than its source column is refused at pre-flight.

Oracle MySQL's default ``utf8mb4_0900_ai_ci`` is NO PAD: ``'k'`` and ``'k '`` are two keys. A
MariaDB target table keyed under ``utf8mb4_general_ci`` (PAD SPACE) would hold them as one row, so
``sluice sync`` refuses before Spark starts (exit 2, nothing acked), naming the mapping, the target
column, the source column and both collations; the fix its hint gives (the target column under a
collation that compares like the source's: MariaDB's ``utf8mb4_uca1400_nopad_ai_ci``) makes the
next sync converge, both rows kept apart.
"""

from __future__ import annotations

import json
import uuid

from tests.support import sysbench
from tests.support.compare import table_rows
from tests.support.deploy import rdb_adapter, sluice, write_deployment


def _exec(info, db, *stmts):
    with sysbench.connect(info, db) as c, c.cursor() as cur:
        for s in stmts:
            cur.execute(s)


def test_a_target_key_coarser_than_the_source_is_refused(tmp_path, mysql, mariadb_target):
    src, tgt = f"kcs_{uuid.uuid4().hex[:6]}", f"kct_{uuid.uuid4().hex[:6]}"
    sysbench.create_database(mysql, src)
    sysbench.create_database(mariadb_target, tgt)
    try:
        _exec(mysql, src, "CREATE TABLE t (k VARCHAR(10) NOT NULL PRIMARY KEY, v INT)")
        _exec(mariadb_target, tgt, "CREATE TABLE t (k VARCHAR(10) COLLATE utf8mb4_general_ci NOT NULL PRIMARY KEY, "
                                   "v INT)")
        mapping = {"groupId": "g1", "dbMapping": {"database": src, "table": "t", "targetTable": f"{tgt}.t",
                                                  "targetPk": {"k": "k"}, "mapAll": True}}
        cfg = write_deployment(tmp_path, mysql, name=src, include=rf"{src}\..*", mappings={"t.yml": mapping},
                               groups=[{"groupId": "g1", "outerAdapters": [rdb_adapter(mariadb_target, "t", tgt)],
                                        "mappings": ["mappings/*.yml"]}])
        sluice("capture", "--config", str(cfg), "--once")
        _exec(mysql, src, "INSERT INTO t VALUES ('k', 1), ('k ', 2), ('K  ', 3)")
        sluice("capture", "--config", str(cfg), "--once")
        proc = sluice("sync", "--config", str(cfg), "--group", "g1", check=False)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
        err = proc.stderr
        assert "t.yml" in err and f"{tgt}.t.k" in err and f"{src}.t.k" in err, err[-2000:]
        assert "utf8mb4_general_ci" in err and "utf8mb4_0900_ai_ci" in err and "'a '" in err, err[-2000:]
        fix = err.split("fix: ", 1)[1].split(" (restate")[0]
        assert fix == f"ALTER TABLE `{tgt}`.`t` MODIFY `k` varchar(10) NOT NULL COLLATE utf8mb4_uca1400_nopad_ai_ci"
        status = json.loads(sluice("store", "status", "--config", str(cfg), "--json").stdout)
        assert status["groups"].get("g1", {}).get("cursor", 0) == 0
        assert table_rows(mariadb_target, tgt, "t") == []
        _exec(mariadb_target, tgt, fix)  # the hint's fix, as given
        sluice("sync", "--config", str(cfg), "--group", "g1")
        assert table_rows(mariadb_target, tgt, "t", "v") == [("k", 1), ("k ", 2), ("K  ", 3)]
    finally:
        sysbench.drop_database(mysql, src)
        sysbench.drop_database(mariadb_target, tgt)
