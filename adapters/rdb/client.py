"""One pooled SQLAlchemy engine per target per process (never per row, chunk or writer)."""

from __future__ import annotations

import threading

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine

from adapters.rdb.config import RdbTarget
from adapters.rdb.dialects import connect_args, dialect_of
from sluice_common.logs import register_secret

_engines: dict[RdbTarget, Engine] = {}
_packets: dict[RdbTarget, int] = {}
_lock = threading.Lock()


def packet_limit(target: RdbTarget) -> int | None:
    """The MySQL/MariaDB target's ``max_allowed_packet`` as its newest connection read it (None:
    not a MySQL target, or no connection yet). A statement longer than this is refused whole."""
    return _packets.get(target)


def engine_for(target: RdbTarget) -> Engine:
    """The process-wide engine of ``target`` (created on first use, session set up per connection)."""
    with _lock:
        engine = _engines.get(target)
        if engine is None:
            engine = _engines[target] = _create(target)
        return engine


def _create(target: RdbTarget) -> Engine:
    register_secret(target.password.reveal())
    kw: dict = {"pool_pre_ping": True, "connect_args": connect_args(target)}
    if target.dialect != "sqlite":
        kw.update(pool_size=target.pool_size, max_overflow=target.pool_size, pool_recycle=1800)
    engine = create_engine(target.url(), **kw)
    dialect = dialect_of(target)
    session_sql = dialect.session_sql

    @event.listens_for(engine, "connect")
    def _session(dbapi_conn, _record) -> None:
        if dialect.family == "postgresql":
            _infinities(dbapi_conn)
        if not session_sql:
            return
        cur = dbapi_conn.cursor()
        try:
            for stmt in session_sql:
                cur.execute(stmt)
            if dialect.family == "mysql":  # statements are cut to fit (adapters/rdb/chunk.py)
                cur.execute("SELECT @@max_allowed_packet")
                _packets[target] = int(cur.fetchone()[0])
        finally:
            cur.close()
        dbapi_conn.commit()

    return engine


def _infinities(dbapi_conn) -> None:
    """Read PostgreSQL's ``infinity``/``-infinity`` dates and timestamps (zero dates are written as
    ``-infinity``, docs/rdb.md) as the least and greatest Python values instead of failing the read
    ("timestamp too small"): ``sluice verify`` and ``repair`` compare such rows
    (:mod:`sluice_common.normalize` reads them as zero dates). Every other value goes to the loader
    the connection had (psycopg's C one: not a base class, so it is called, not extended)."""
    import datetime as dt

    from psycopg.adapt import Loader
    from psycopg.pq import Format

    adapters = dbapi_conn.adapters

    def loader(name, low, high):
        inner_cls = adapters.get_loader(adapters.types[name].oid, Format.TEXT)

        class Infinities(Loader):
            def __init__(self, oid, context=None):
                super().__init__(oid, context)
                self.inner = inner_cls(oid, context)

            def load(self, data):
                if data[-1:] == b"y":  # 'infinity', '-infinity'
                    return low if data[:1] == b"-" else high
                return self.inner.load(data)
        return Infinities

    utc = dt.UTC
    adapters.register_loader("date", loader("date", dt.date.min, dt.date.max))
    adapters.register_loader("timestamp", loader("timestamp", dt.datetime.min, dt.datetime.max))
    adapters.register_loader("timestamptz", loader("timestamptz", dt.datetime.min.replace(tzinfo=utc),
                                                   dt.datetime.max.replace(tzinfo=utc)))


def dispose_all() -> None:
    """Close every pooled connection of this process (tests, shutdown)."""
    with _lock:
        for engine in _engines.values():
            engine.dispose()
        _engines.clear()
