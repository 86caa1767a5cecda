"""MySQL's default authentication, ``caching_sha2_password``, on every kind of connection Sluice
opens to a real MySQL: the source connection (pipeline/source/connect.py), capture's binlog dump
connection (pipeline/capture/protocol.py) and the RDB target's pooled SQLAlchemy/PyMySQL engine.

Without TLS means a server that offers none (PyMySQL uses TLS whenever the server offers it, unless
told not to, which the source settings cannot say): the suite's MySQL has its TLS switched off for
those cases (``tls_version=''``, ``ALTER INSTANCE RELOAD TLS``) and back on after; the target also
says ``sslMode=DISABLED``.

The server caches a user's password hash after its first full authentication (``FLUSH PRIVILEGES``
empties the cache, as a server restart does). Cold, the client must send the password in full:
over TLS as is, without TLS encrypted with the server's RSA key, which PyMySQL can only do with the
``cryptography`` package (without it: ``RuntimeError: 'cryptography' package is required``, and
every restart of a MySQL source or target broke the pipeline). Warm, a scramble suffices. Each kind
of connection is opened cold and then warm, with and without TLS; without TLS the cold one must have
fetched the server's public key (the full path ran) and the warm one must not (the fast path ran).
"""

from __future__ import annotations

import pymysql
import pytest
from sqlalchemy import text

from adapters.rdb.client import dispose_all, engine_for
from adapters.rdb.config import RdbTarget
from pipeline.capture.position import Position
from pipeline.capture.protocol import DumpConnection
from pipeline.capture.server_check import current_position
from pipeline.config import SourceConfig
from pipeline.source.connect import connect
from sluice_common.secrets import Secret
from tests.support import sysbench

USER, PASSWORD = "sluice_sha2", "sha2-pw-2468"


@pytest.fixture(scope="module")
def sha2_user(mysql):
    with sysbench.connect(mysql) as c, c.cursor() as cur:
        cur.execute(f"DROP USER IF EXISTS '{USER}'@'127.0.0.1'")
        cur.execute(f"CREATE USER '{USER}'@'127.0.0.1' IDENTIFIED WITH caching_sha2_password BY '{PASSWORD}'")
        cur.execute(f"GRANT ALL ON *.* TO '{USER}'@'127.0.0.1'")
    yield dict(mysql, user=USER, password=PASSWORD, admin=mysql)
    with sysbench.connect(mysql) as c, c.cursor() as cur:
        cur.execute(f"DROP USER IF EXISTS '{USER}'@'127.0.0.1'")


@pytest.fixture(params=[False, True], ids=["plain", "tls"])
def tls(request, mysql):
    """True: the server offers TLS and every connection asks for it; False: the server offers none."""
    if request.param:
        yield True
        return
    _admin(mysql, "SET GLOBAL tls_version = ''", "ALTER INSTANCE RELOAD TLS NO ROLLBACK ON ERROR")
    try:
        yield False
    finally:
        _admin(mysql, "SET GLOBAL tls_version = DEFAULT", "ALTER INSTANCE RELOAD TLS")


def _admin(mysql, *stmts: str) -> None:
    """As root over the server's socket (secure without TLS: whatever this test did to TLS or to the
    password cache, this connection works)."""
    with pymysql.connect(unix_socket=f"{mysql['home']}/mysqld.sock", user="root", password=mysql["password"],
                         autocommit=True) as c, c.cursor() as cur:
        for s in stmts:
            cur.execute(s)


def _forget_cached_passwords(mysql) -> None:
    _admin(mysql, "FLUSH PRIVILEGES")


def _source(info: dict, tls: bool) -> SourceConfig:
    return SourceConfig(host=info["host"], port=info["port"], user=info["user"], password=Secret(info["password"]),
                        serverId=7777, ssl={"ca": info["ssl_ca"]} if tls else None)


def _open_source(info: dict, tls: bool):
    conn = connect(_source(info, tls))
    with conn.cursor() as cur:
        cur.execute("SELECT CURRENT_USER()")
        assert cur.fetchone()[0] == f"{USER}@127.0.0.1"
    return conn, lambda: conn.close()


def _open_dump(info: dict, tls: bool):
    src = _source(info, tls)
    with pymysql.connect(unix_socket=f"{info['home']}/mysqld.sock", user="root", password=info["admin"]["password"]
                         ) as c:  # as root: the user's own login would warm the cache
        at = current_position(c, "mysql")
    dump = DumpConnection(src, "mysql", Position(logfile=at.logfile, logpos=4), mode="file", follow=False)
    dump.open()
    assert dump.read()  # the server streams the file's events
    return dump.conn, dump.close


def _open_target(info: dict, tls: bool):
    mode = "REQUIRED" if tls else "DISABLED"
    target = RdbTarget.from_jdbc(f"jdbc:mysql://{info['host']}:{info['port']}/mysql?sslMode={mode}",
                                 username=info["user"], password=Secret(info["password"]))
    raw = engine_for(target).raw_connection()
    with engine_for(target).connect() as c:
        assert c.execute(text("SELECT 1")).scalar() == 1

    def close():
        raw.close()
        dispose_all()
    return raw.driver_connection, close


@pytest.mark.parametrize("opener", [_open_source, _open_dump, _open_target], ids=["source", "binlog", "target"])
def test_cold_and_warm_password_cache(opener, tls, sha2_user, mysql):
    _forget_cached_passwords(mysql)
    for cache in ("cold", "warm"):
        conn, close = opener(sha2_user, tls)
        try:
            assert bool(conn._secure) is tls
            if not tls:  # the full authentication fetched the server's RSA key; the fast one did not
                assert bool(conn.server_public_key) is (cache == "cold"), cache
        finally:
            close()
