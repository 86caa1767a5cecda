"""The harness's first real tests: each database service answers and behaves as configured."""

from __future__ import annotations

import uuid

import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import WriteRowsEvent


def _connect(info: dict, **kw) -> pymysql.connections.Connection:
    return pymysql.connect(host=info["host"], port=info["port"], user=info["user"],
                           password=info["password"], autocommit=True, **kw)


def test_source_row_appears_in_binlog(mariadb):
    db = f"svc_{uuid.uuid4().hex[:8]}"
    conn = _connect(mariadb)
    with conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        logfile, pos = cur.fetchone()[:2]
        cur.execute(f"CREATE DATABASE {db}")
        cur.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, name VARCHAR(20))")
        cur.execute(f"INSERT INTO {db}.t VALUES (1, 'héllo 🚀')")
    stream = BinLogStreamReader(
        connection_settings={"host": mariadb["host"], "port": mariadb["port"], "user": "root",
                             "passwd": mariadb["password"]},
        server_id=4242, log_file=logfile, log_pos=pos, resume_stream=True, blocking=False,
        only_events=[WriteRowsEvent], only_schemas=[db])
    try:
        rows = [r["values"] for ev in stream for r in ev.rows]
    finally:
        stream.close()
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE {db}")
    assert rows == [{"id": 1, "name": "héllo 🚀"}]


def test_source_binlog_settings(mariadb):
    with _connect(mariadb).cursor() as cur:
        cur.execute("SELECT @@log_bin, @@binlog_format, @@binlog_row_image, @@binlog_row_metadata, "
                    "@@global.time_zone, @@system_time_zone")
        log_bin, fmt, image, meta, tz, sys_tz = cur.fetchone()
    assert (log_bin, fmt, image, meta) == (1, "ROW", "FULL", "FULL")
    assert tz not in ("SYSTEM", "+00:00", "UTC") and sys_tz not in ("UTC",)


def test_mariadb_target_roundtrip(mariadb_target):
    db = f"svc_{uuid.uuid4().hex[:8]}"
    with _connect(mariadb_target, charset="utf8mb4").cursor() as cur:
        cur.execute(f"CREATE DATABASE {db}")
        try:
            cur.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(10))")
            cur.execute(f"INSERT INTO {db}.t VALUES (1, %s)", ("ü🚀",))
            cur.execute(f"SELECT v FROM {db}.t")
            assert cur.fetchone() == ("ü🚀",)
        finally:
            cur.execute(f"DROP DATABASE {db}")


def test_postgres_roundtrip(postgres):
    import psycopg

    with psycopg.connect(host=postgres["host"], port=postgres["port"], user=postgres["user"],
                         password=postgres["password"], dbname=postgres["database"], autocommit=True) as c:
        c.execute("CREATE TEMP TABLE t (id int primary key, v text)")
        c.execute("INSERT INTO t VALUES (1, %s)", ("ü🚀",))
        assert c.execute("SELECT v FROM t").fetchone() == ("ü🚀",)
