"""The real pipeline into HBase: MariaDB source -> ``sluice capture --once`` -> ``sluice sync``.

Two source tables, one per mode (STRING with a composite row key, NATIVE with a
``ROWKEY`` column), with inserts, updates (to NULL too), a primary-key change and deletes.
After sync the HBase rows read back equal to the source rows; a full replay (cursor set
back to 0) changes nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import happybase
import pymysql
import pytest

from adapters.hbase.verify import read_rows
from pipeline.mapping import load_mapping
from tests.support.deploy import REPO, write_deployment

SLUICE = Path(sys.executable).with_name("sluice")


def sluice(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """The ``sluice`` console script of this venv (``python -m pipeline.cli`` registers the
    commands on a second copy of the app, see the report)."""
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    proc = subprocess.run([str(SLUICE), *args], cwd=REPO, env=env, text=True, capture_output=True, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(f"sluice {' '.join(args)} exited {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\n"
                             f"stderr:\n{proc.stderr[-5000:]}")
    return proc


def _connect(info: dict, db: str | None = None):
    return pymysql.connect(host=info["host"], port=info["port"], user=info["user"], password=info["password"],
                           database=db, autocommit=True, charset="utf8mb4")


def _source(info: dict, db: str, table: str) -> tuple[dict[str, str], list[dict]]:
    """Column types as the Dml carries them, and the rows as Dml strings."""
    with _connect(info, db) as c, c.cursor() as cur:
        cur.execute("SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA=%s "
                    "AND TABLE_NAME=%s ORDER BY ORDINAL_POSITION", (db, table))
        types = {n: t for n, t in cur.fetchall()}
        cols = [f"CAST(`{n}`+0 AS CHAR)" if t.startswith("bit") else f"`{n}`" if "binary" in t
                else f"CAST(`{n}` AS CHAR)" for n, t in types.items()]
        cur.execute(f"SELECT {', '.join(cols)} FROM `{table}`")
        rows = [{n: _dml_text(types[n], v) for n, v in zip(types, r, strict=True)} for r in cur.fetchall()]
    return types, rows


def _dml_text(mysql_type: str, v):
    """The capture's text for a value read with CAST(... AS CHAR) (DOUBLE: Python repr)."""
    if isinstance(v, bytes):
        return v.decode("latin-1")
    if v is not None and mysql_type.startswith("double"):
        return repr(float(v))
    return v


@pytest.fixture(scope="module")
def deployment(tmp_path_factory, mariadb, hbase):
    tmp = tmp_path_factory.mktemp("hbase_e2e")
    db = f"hbe_{uuid.uuid4().hex[:6]}"
    suffix = uuid.uuid4().hex[:6].upper()
    mappings = {
        "hbase/orders.yml": {"dataSourceKey": "defaultDS", "destination": db, "groupId": "g1", "hbaseMapping": {
            "mode": "STRING", "database": db, "table": "orders", "hbaseTable": f"SLE_ORDERS_{suffix}",
            "family": "CF", "autoCreateTable": True, "rowKey": "region,order_no", "commitBatch": 100,
            "columns": {"note": "X:NOTE", "amount": "AMOUNT"}}},
        "hbase/people.yml": {"dataSourceKey": "defaultDS", "destination": db, "groupId": "g1", "hbaseMapping": {
            "mode": "NATIVE", "database": db, "table": "people", "hbaseTable": f"SLE_PEOPLE_{suffix}",
            "autoCreateTable": True, "commitBatch": 100, "columns": {"id": "ROWKEY", "name": "NAME"},
            "excludeColumns": ["secret"]}},
    }
    adapter = {"name": "hbase", "key": "hb", "hosts": f"{hbase['host']}:{hbase['port']}"}
    cfg = write_deployment(tmp, mariadb, name=db, include=rf"{db}\..*",
                           groups=[{"groupId": "g1", "outerAdapters": [adapter], "mappings": ["mappings/hbase/*.yml"]}],
                           mappings=mappings, partitions=3, batch_rows=500)
    sluice("capture", "--config", str(cfg), "--once")  # the store starts here
    with _connect(mariadb) as c, c.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{db}`")
        cur.execute(f"CREATE TABLE `{db}`.orders (region VARCHAR(8) NOT NULL, order_no INT NOT NULL, "
                    "amount DECIMAL(12,2), note VARCHAR(40), PRIMARY KEY (region, order_no))")
        cur.execute(f"CREATE TABLE `{db}`.people (id BIGINT PRIMARY KEY, name VARCHAR(40) CHARACTER SET utf8mb4, "
                    "score INT UNSIGNED, ratio DOUBLE, born DATETIME(6), flag TINYINT(1), bits BIT(10), "
                    "raw VARBINARY(8), secret VARCHAR(10))")
    yield {"cfg": cfg, "db": db, "tmp": tmp,
           "mappings": {k.split("/")[1][:-4]: load_mapping(tmp / "mappings" / k) for k in mappings}}
    with _connect(mariadb) as c, c.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{db}`")
    conn = happybase.Connection(hbase["host"], hbase["port"])
    for m in (f"SLE_ORDERS_{suffix}", f"SLE_PEOPLE_{suffix}"):
        if m.encode() in conn.tables():
            conn.delete_table(m, disable=True)


def _workload(info: dict, db: str) -> None:
    with _connect(info, db) as c, c.cursor() as cur:
        cur.executemany("INSERT INTO orders VALUES (%s, %s, %s, %s)",
                        [(r, n, f"{n}.25", f"note {n}") for r in ("eu", "us") for n in range(1, 151)])
        cur.executemany("INSERT INTO people VALUES (%s, %s, %s, %s, %s, %s, %s, %s, 'pw')",
                        [(i, f"person {i} ü🚀", 4000000000 + i, i / 3, f"2024-03-10 02:30:00.{i:06d}", i % 3,
                          i % 1024, bytes([0, i % 256, 255])) for i in range(1, 301)])
        cur.execute("UPDATE orders SET note = NULL, amount = amount + 1 WHERE order_no % 5 = 0")
        cur.execute("UPDATE orders SET order_no = order_no + 1000 WHERE region = 'us' AND order_no % 7 = 0")
        cur.execute("UPDATE people SET name = NULL, ratio = 0.5 WHERE id % 9 = 0")
        cur.execute("UPDATE people SET id = id + 10000 WHERE id % 13 = 0")
        cur.execute("DELETE FROM orders WHERE order_no % 11 = 0")
        cur.execute("DELETE FROM people WHERE id % 17 = 0")
        cur.execute("START TRANSACTION")  # a key swap through a temporary key
        cur.execute("UPDATE people SET id = 99999 WHERE id = 1")
        cur.execute("UPDATE people SET id = 1 WHERE id = 2")
        cur.execute("UPDATE people SET id = 2 WHERE id = 99999")
        cur.execute("COMMIT")


def _assert_equal(mariadb, hbase, d) -> None:
    conn = happybase.Connection(hbase["host"], hbase["port"])
    for table, key in (("orders", ("region", "order_no")), ("people", ("id",))):
        types, rows = _source(mariadb, d["db"], table)
        m = d["mappings"][table]
        got = sorted(read_rows(conn, m, types).values(), key=lambda r: tuple(str(r[k]) for k in key))
        want = sorted(({k: v for k, v in r.items() if k not in m.spec.excludeColumns} for r in rows),
                      key=lambda r: tuple(str(r[k]) for k in key))
        assert len(got) == len(want) and got == want, table
    conn.close()


def _sync(cfg: Path) -> dict:
    out = sluice("sync", "--config", str(cfg), "--group", "g1", "--json").stdout
    return json.loads(out.strip().splitlines()[-1])


def test_capture_and_sync_into_hbase(deployment, mariadb, hbase):
    d = deployment
    _workload(mariadb, d["db"])
    sluice("capture", "--config", str(d["cfg"]), "--once")
    summary = _sync(d["cfg"])
    assert summary["rows"] > 0 and summary["cursor"] > 0
    _assert_equal(mariadb, hbase, d)


def test_replay_everything_changes_nothing(deployment, mariadb, hbase):
    d = deployment
    sluice("store", "set-cursor", "--config", str(d["cfg"]), "--group", "g1", "--to", "0")
    summary = _sync(d["cfg"])
    assert summary["rows"] > 0
    _assert_equal(mariadb, hbase, d)
