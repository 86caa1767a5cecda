"""The harness's first real tests: each database service answers and behaves as configured."""

from __future__ import annotations

import uuid

import pymysql
import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import WriteRowsEvent


def _connect(info: dict, **kw) -> pymysql.connections.Connection:
    return pymysql.connect(host=info["host"], port=info["port"], user=info["user"],
                           password=info["password"], autocommit=True, **kw)


@pytest.mark.parametrize("server", ["mariadb", "mysql"])
def test_source_row_appears_in_binlog(server, request):
    source = request.getfixturevalue(server)
    db = f"svc_{uuid.uuid4().hex[:8]}"
    conn = _connect(source)
    with conn.cursor() as cur:
        cur.execute("SHOW BINARY LOG STATUS" if server == "mysql" else "SHOW MASTER STATUS")
        logfile, pos = cur.fetchone()[:2]
        cur.execute(f"CREATE DATABASE {db}")
        cur.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, name VARCHAR(20))")
        cur.execute(f"INSERT INTO {db}.t VALUES (1, 'héllo 🚀')")
    stream = BinLogStreamReader(
        connection_settings={"host": source["host"], "port": source["port"], "user": "root",
                             "passwd": source["password"]},
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


def test_mysql_source_settings(mysql):
    """Oracle MySQL with what capture needs, GTIDs on, and MySQL's own defaults kept (a NO PAD
    default collation; cascades in the SQL layer on 9.x, so cascaded rows are in the binlog)."""
    with _connect(mysql, ssl={"ca": mysql["ssl_ca"]}).cursor() as cur:
        cur.execute("SELECT @@log_bin, @@binlog_format, @@binlog_row_image, @@binlog_row_metadata, @@gtid_mode, "
                    "@@enforce_gtid_consistency, @@log_replica_updates, @@collation_server, "
                    "@@global.time_zone, @@version_comment")
        assert cur.fetchone() == (1, "ROW", "FULL", "FULL", "ON", "ON", 1, "utf8mb4_0900_ai_ci",
                                  "America/New_York", "(Debian)")
        cur.execute("SHOW SESSION STATUS LIKE 'Ssl_version'")
        assert cur.fetchone()[1].startswith("TLS")
        cur.execute("SELECT PAD_ATTRIBUTE FROM information_schema.COLLATIONS WHERE COLLATION_NAME = "
                    "'utf8mb4_0900_ai_ci'")
        assert cur.fetchone() == ("NO PAD",)
        if mysql["version"].startswith("9."):
            cur.execute("SELECT @@innodb_native_foreign_keys")
            assert cur.fetchone() == (0,)


@pytest.mark.parametrize("server", ["mariadb_target", "mysql_target"])
def test_target_roundtrip(server, request):
    target = request.getfixturevalue(server)
    db = f"svc_{uuid.uuid4().hex[:8]}"
    with _connect(target, charset="utf8mb4").cursor() as cur:
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
