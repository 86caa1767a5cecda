"""Bootstrap while the source is busy: existing rows, sysbench (and PK-changing updates) writing
during the whole ``sluice bootstrap``, then ``capture --once`` + ``sync`` of every group ->
every target equals the source: a mirror DB (MariaDB target), an ES mapping and an HBase mapping.

Also: a second bootstrap of the same store is refused without ``--force``.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import happybase
import pymysql
import pytest
from elasticsearch import Elasticsearch

from adapters.hbase.verify import read_rows
from pipeline.mapping import load_mapping
from tests.support import sysbench
from tests.support.compare import diff_databases
from tests.support.deploy import REPO, rdb_adapter, write_deployment

SLUICE = Path(sys.executable).with_name("sluice")
TABLES, SIZE = 3, 4000


def sluice(*args: str, check: bool = True, timeout: float = 900) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    proc = subprocess.run([str(SLUICE), *args], cwd=REPO, env=env, text=True, capture_output=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"sluice {' '.join(args)} exited {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\n"
                             f"stderr:\n{proc.stderr[-6000:]}")
    return proc


def _last_json(stdout: str) -> dict:
    return json.loads([line for line in stdout.splitlines() if line.startswith("{")][-1])


@pytest.fixture(scope="module")
def deployment(tmp_path_factory, mariadb, mariadb_target, elasticsearch, hbase):
    tmp = tmp_path_factory.mktemp("etl_boot")
    db = f"etlb_{uuid.uuid4().hex[:6]}"
    tdb, index, htable = f"{db}_copy", f"sluice-etl-{uuid.uuid4().hex[:8]}", f"SLE_ETL_{uuid.uuid4().hex[:6].upper()}"
    sysbench.prepare(mariadb, db, tables=TABLES, table_size=SIZE)        # the data that is already there
    sysbench.create_database(mariadb_target, tdb)
    with sysbench.connect(mariadb, db) as s, s.cursor() as sc, sysbench.connect(mariadb_target, tdb) as t, \
            t.cursor() as tc:
        for i in range(1, TABLES + 1):                                     # the mirror's schema (no rows)
            sc.execute(f"SHOW CREATE TABLE sbtest{i}")
            tc.execute(sc.fetchone()[1])
    es_adapter = {"name": "es8", "key": "es1", "hosts": elasticsearch["url"].removeprefix("http://"),
                  "properties": {"mode": "rest"}}
    hb_adapter = {"name": "hbase", "key": "hb", "hosts": f"{hbase['host']}:{hbase['port']}"}
    mappings = {
        "rdb/mirror.yml": {"groupId": "rdb", "outerAdapterKey": "tgt",
                           "dbMapping": {"mirrorDb": True, "database": db, "targetDb": tdb, "commitBatch": 1000}},
        "es/sbtest1.yml": {"groupId": "es", "esMapping": {
            "_index": index, "_id": "id", "commitBatch": 1000,
            "sql": f"select a.id, a.k, a.c, a.pad from {db}.sbtest1 a"}},
        "hbase/sbtest2.yml": {"groupId": "hbase", "hbaseMapping": {
            "mode": "STRING", "database": db, "table": "sbtest2", "hbaseTable": htable, "family": "CF",
            "autoCreateTable": True, "columns": {"id": "ROWKEY"}, "commitBatch": 1000}},
    }
    cfg = write_deployment(tmp, mariadb, name=db, include=rf"{db}\..*", mappings=mappings, partitions=3,
                           batch_rows=2000, groups=[
                               {"groupId": "rdb", "outerAdapters": [rdb_adapter(mariadb_target, "tgt", tdb)],
                                "mappings": ["mappings/rdb/*.yml"]},
                               {"groupId": "es", "outerAdapters": [es_adapter], "mappings": ["mappings/es/*.yml"]},
                               {"groupId": "hbase", "outerAdapters": [hb_adapter],
                                "mappings": ["mappings/hbase/*.yml"]}])
    es = Elasticsearch(elasticsearch["url"], request_timeout=30)
    yield {"cfg": cfg, "db": db, "tdb": tdb, "index": index, "es": es, "htable": htable,
           "hmap": load_mapping(tmp / "mappings" / "hbase/sbtest2.yml")}
    sysbench.drop_database(mariadb, db)
    sysbench.drop_database(mariadb_target, tdb)
    es.indices.delete(index=index, ignore_unavailable=True)
    es.close()
    conn = happybase.Connection(hbase["host"], hbase["port"])
    if htable.encode() in conn.tables():
        conn.delete_table(htable, disable=True)
    conn.close()


class _KeyMover(threading.Thread):
    """PK-changing updates, deletes and re-inserts on every table, until stopped."""

    def __init__(self, info: dict, db: str):
        super().__init__(daemon=True)
        self.info, self.db, self.stop, self.done = info, db, threading.Event(), 0

    def run(self) -> None:
        rnd = random.Random(7)
        with sysbench.connect(self.info, self.db) as c, c.cursor() as cur:
            while not self.stop.is_set():
                t = f"sbtest{rnd.randint(1, TABLES)}"
                k = rnd.randint(1, SIZE)
                try:
                    cur.execute(f"UPDATE {t} SET id = id + 1000000 WHERE id = %s", (k,))
                    cur.execute(f"DELETE FROM {t} WHERE id = %s", (rnd.randint(1, SIZE),))
                    cur.execute(f"INSERT IGNORE INTO {t} (id, k, c, pad) VALUES (%s, %s, 'moved', 'x')",
                                (k, rnd.randint(1, 9999)))
                    self.done += 1
                except pymysql.MySQLError:
                    pass  # a deadlock with sysbench: just go on
                time.sleep(0.005)


def _es_docs(es: Elasticsearch, index: str) -> dict[str, dict]:
    es.indices.refresh(index=index)
    out, resp = {}, es.search(index=index, size=5000, scroll="1m", sort=["_doc"])
    while resp["hits"]["hits"]:
        out.update({h["_id"]: h["_source"] for h in resp["hits"]["hits"]})
        resp = es.scroll(scroll_id=resp["_scroll_id"], scroll="1m")
    es.clear_scroll(scroll_id=resp["_scroll_id"])
    return out


def _rows(info: dict, db: str, table: str) -> list[tuple]:
    with sysbench.connect(info, db) as c, c.cursor() as cur:
        cur.execute(f"SELECT id, k, c, pad FROM {table}")
        return list(cur.fetchall())


def _assert_all_equal(mariadb, mariadb_target, hbase, d) -> None:
    diff = diff_databases(mariadb, d["db"], mariadb_target, d["tdb"])
    assert len(diff) == TABLES and all(v == 0 for v in diff.values()), diff
    want_es = {str(i): {"k": k, "c": c, "pad": p} for i, k, c, p in _rows(mariadb, d["db"], "sbtest1")}
    got_es = _es_docs(d["es"], d["index"])
    assert got_es == want_es, f"{len(set(got_es) ^ set(want_es))} ids differ"
    types = {"id": "int", "k": "int", "c": "char(120)", "pad": "char(60)"}
    want_hb = {str(i): {"id": str(i), "k": str(k), "c": c, "pad": p}
               for i, k, c, p in _rows(mariadb, d["db"], "sbtest2")}
    conn = happybase.Connection(hbase["host"], hbase["port"])
    try:
        got_hb = {r["id"]: r for r in read_rows(conn, d["hmap"], types).values()}
    finally:
        conn.close()
    assert got_hb == want_hb, f"{len(set(got_hb) ^ set(want_hb))} row keys differ"


def test_bootstrap_under_load_converges(deployment, mariadb, mariadb_target, hbase):
    d = deployment
    # a steady write rate (sysbench --rate: transactions/s), so capture and sync stay quick
    bench = subprocess.Popen(sysbench.command(mariadb, d["db"], "run", tables=TABLES, table_size=SIZE, threads=2,
                                              seconds=600, extra=("--rate=150",)),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    mover = _KeyMover(mariadb, d["db"])
    mover.start()
    try:
        time.sleep(1.0)
        boot = _last_json(sluice("bootstrap", "--config", str(d["cfg"]), "--json").stdout)
        assert bench.poll() is None, "sysbench stopped before the bootstrap ended"
    finally:
        mover.stop.set()
        mover.join()
        bench.terminate()
        bench.wait(timeout=60)
    assert mover.done > 0
    assert boot["position"]["logfile"] and boot["position"]["logpos"] > 0
    loaded = {g["group"]: g["rows"] for g in boot["groups"]}
    assert loaded["rdb"] >= TABLES * SIZE * 0.9 and loaded["es"] > 0 and loaded["hbase"] > 0, loaded

    cap = _last_json(sluice("capture", "--config", str(d["cfg"]), "--once").stdout)
    assert cap["rows"] > 0, "nothing was written during the bootstrap: the test proves nothing"
    assert cap["start"]["logpos"] == boot["position"]["logpos"]
    syncs = [subprocess.Popen([str(SLUICE), "sync", "--config", str(d["cfg"]), "--group", g, "--json"], cwd=REPO,
                              env=dict(os.environ, PYSPARK_PYTHON=sys.executable), text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for g in ("rdb", "es", "hbase")]
    for g, p in zip(("rdb", "es", "hbase"), syncs, strict=True):  # one group each: they run side by side
        out, err = p.communicate(timeout=900)
        assert p.returncode == 0, f"sync {g} exited {p.returncode}\n{out[-2000:]}\n{err[-5000:]}"
    _assert_all_equal(mariadb, mariadb_target, hbase, d)


def test_second_bootstrap_needs_force(deployment):
    d = deployment
    refused = sluice("bootstrap", "--config", str(d["cfg"]), check=False)
    assert refused.returncode != 0
    assert "already has a capture position" in refused.stderr and "--force" in refused.stderr


def test_etl_reload_of_one_mapping_overwrites_stale_documents(deployment, mariadb, mariadb_target, hbase):
    d = deployment
    es = d["es"]
    some = next(iter(_es_docs(es, d["index"])))
    es.index(index=d["index"], id=some, document={"k": -1, "c": "stale", "pad": "stale"})
    es.index(index=d["index"], id="999999999", document={"k": 0, "c": "only in the index", "pad": ""})
    out = _last_json(sluice("etl", "--config", str(d["cfg"]), "--group", "es", "--mapping", "sbtest1.yml",
                            "--partitions", "2", "--json").stdout)
    n = len(_rows(mariadb, d["db"], "sbtest1"))
    assert out["rows"] == n and out["tables"][f"{d['db']}.sbtest1"]["written"] == n
    es.delete(index=d["index"], id="999999999")  # a load never deletes target rows (docs/etl.md)
    _assert_all_equal(mariadb, mariadb_target, hbase, d)
