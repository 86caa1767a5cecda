"""``sluice repair`` where unique values moved between rows: two target rows hold each other's unique
value, and a row missing on the target needs a value another target row holds (MariaDB and PostgreSQL
targets, a secondary UNIQUE key). The rows holding the values are rewritten from the same snapshot
(or deleted) in the chunk's transaction, so the upserts never collide; the targets end equal."""

from __future__ import annotations

import uuid

import psycopg
import pymysql
import pytest
import yaml

from pipeline.config import SparkConfig, load_config
from pipeline.job.group import load_group
from pipeline.job.session import get_spark
from pipeline.ops.verify import verify
from pipeline.repair.driver import run_repair
from tests.support.deploy import rdb_adapter

DDL = "CREATE TABLE u (id INT PRIMARY KEY, email VARCHAR(20) NOT NULL, n INT, UNIQUE KEY email (email))"
PG_DDL = 'CREATE TABLE "{t}" (id integer PRIMARY KEY, email varchar(20) NOT NULL UNIQUE, n integer)'
ROWS = [(i, f"e{i}@x", i * 10) for i in range(1, 201)]


def _my(info: dict, db: str | None = None):
    return pymysql.connect(host=info["host"], port=info["port"], user=info["user"], password=info["password"],
                           database=db, autocommit=True)


@pytest.fixture
def dep(tmp_path, mariadb, mariadb_target, postgres):
    db = f"repu_{uuid.uuid4().hex[:6]}"
    tdb, pgt = f"{db}_copy", f"{db}_u"
    for info, name in ((mariadb, db), (mariadb_target, tdb)):
        with _my(info) as c, c.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{name}`")
            cur.execute(f"USE `{name}`")
            cur.execute(DDL)
            cur.executemany("INSERT INTO u VALUES (%s, %s, %s)", ROWS)
    pg = psycopg.connect(host=postgres["host"], port=postgres["port"], user=postgres["user"],
                         password=postgres["password"], dbname=postgres["database"], autocommit=True)
    pg.execute(PG_DDL.format(t=pgt))
    with pg.cursor() as cur:
        cur.executemany(f'INSERT INTO "{pgt}" VALUES (%s, %s, %s)', ROWS)
    (tmp_path / "mappings").mkdir()
    (tmp_path / "mappings" / "my.yml").write_text(yaml.safe_dump({"groupId": "gmy", "dbMapping": {
        "database": db, "table": "u", "targetTable": f"{tdb}.u", "targetPk": {"id": "id"}, "mapAll": True}}))
    (tmp_path / "mappings" / "pg.yml").write_text(yaml.safe_dump({"groupId": "gpg", "dbMapping": {
        "database": db, "table": "u", "targetTable": pgt, "targetPk": {"id": "id"}, "mapAll": True}}))
    path = tmp_path / "sluice.yml"
    path.write_text(yaml.safe_dump({
        "source": {"name": db, "host": mariadb["host"], "port": mariadb["port"], "user": mariadb["user"],
                   "password": mariadb["password"]},
        "store": {"path": str(tmp_path / "store")},
        "groups": [{"groupId": "gmy", "outerAdapters": [rdb_adapter(mariadb_target, "my", tdb)],
                    "mappings": ["mappings/my.yml"]},
                   {"groupId": "gpg", "outerAdapters": [rdb_adapter(postgres, "pg", postgres["database"],
                                                                    "postgresql")],
                    "mappings": ["mappings/pg.yml"]}]}))
    yield {"cfg": load_config(path), "db": db, "tdb": tdb, "pg": pg, "pgt": pgt}
    for info, name in ((mariadb, db), (mariadb_target, tdb)):
        with _my(info) as c, c.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
    pg.execute(f'DROP TABLE IF EXISTS "{pgt}"')
    pg.close()


def test_unique_values_moved_between_rows_are_repaired(dep, mariadb, mariadb_target):
    # the source moves values around: 1 and 2 swap; 5 takes 180's value (180, in a later chunk, takes a
    # new one: repaired in key order, 5's chunk meets 180's old value on the target); 500, a row the
    # targets lack, takes 150's value after 150 takes 3's and 3 a new one
    with _my(mariadb, dep["db"]) as c, c.cursor() as cur:
        cur.execute("UPDATE u SET email = 'tmp' WHERE id = 1")
        cur.execute("UPDATE u SET email = 'e1@x' WHERE id = 2")
        cur.execute("UPDATE u SET email = 'e2@x' WHERE id = 1")
        cur.execute("UPDATE u SET email = 'new180@x' WHERE id = 180")
        cur.execute("UPDATE u SET email = 'e180@x' WHERE id = 5")
        cur.execute("UPDATE u SET email = 'new3@x' WHERE id = 3")
        cur.execute("UPDATE u SET email = 'e3@x' WHERE id = 150")
        cur.execute("INSERT INTO u VALUES (500, 'e150@x', 5)")
    # the targets missed all of it (as if they were restored from before it)
    cfg = dep["cfg"]
    spark = get_spark(SparkConfig(master="local[2]", partitions=2), "sluice-repair-unique")
    before = {r.group: r.differing for r in verify(cfg, chunk=50)}
    assert before == {"gmy": 7, "gpg": 7}, before
    for g in ("gmy", "gpg"):
        summary = run_repair(cfg, load_group(cfg, g), spark, chunk=50, partitions=1)  # chunks in key order
        t = summary.tables[f"{dep['db']}.u"]
        assert t.upserted >= 7 and t.failed == 0, t
    after = [r.as_dict() for r in verify(cfg, chunk=50) if not r.ok]
    assert after == [], after
    with _my(mariadb_target, dep["tdb"]) as c, c.cursor() as cur:
        cur.execute("SELECT id, email FROM u WHERE id IN (1, 2, 3, 5, 150, 180, 500) ORDER BY id")
        assert cur.fetchall() == ((1, "e2@x"), (2, "e1@x"), (3, "new3@x"), (5, "e180@x"), (150, "e3@x"),
                                  (180, "new180@x"), (500, "e150@x"))
