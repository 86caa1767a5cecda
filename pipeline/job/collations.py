"""Collations between the source and MySQL/MariaDB targets, on the driver: the source's defaults
for the DDL a mirror replays, and the pre-flight check that no target key compares more coarsely
than the source.

A replayed ``CREATE TABLE`` must give its plain columns the source database's default collation and
a bare ``CHARSET x`` the source server's default collation of ``x``. The driver hands each RDB
writer a reader of those defaults; it asks the source when a CREATE or ALTER is replayed (the
answer is what the source says now), on one connection a sync keeps for its DDL. A source that
cannot be reached then fails the replay (nothing is acked; the next run replays it).

:func:`check_key_collations` asks every target whose adapter checks key collations
(``Capabilities.key_collations``: the RDB adapter, for MySQL/MariaDB targets,
adapters/rdb/keycollations.py) whether a column of a unique key (or primary key) of a mapped table
compares more coarsely than the source column it holds, over
:data:`sluice_common.collations.PROBES`; this module answers the source's side of it
(:class:`SourceCollations`: the source's tables, its columns' collations, what they equate).
"""

from __future__ import annotations

from adapters.registry import capabilities, make_writer
from pipeline.mapping import DbMapping
from pipeline.source import catalog
from pipeline.source.connect import connect
from sluice_common.collations import SourceCharsets, cached_equal_pairs


def connect_source(cfg):
    """A source connection for these reads (SourceError naming the keys to fix)."""
    return connect(cfg.source, hint=f"check source.host/port/user/password in {cfg.file} and that the server "
                   "is running")


class SourceCharsetsReader:
    """Reads the defaults of the group's mirrored databases from the source, each time it is
    called (the answer is what the source says now), on one connection kept for the sync: a run of
    a thousand CREATE TABLEs would otherwise open a thousand connections (a login and a TLS
    context each, most of a replayed DDL's cost). A connection that fails is dropped and the read
    tried once on a new one; :meth:`close` ends it."""

    def __init__(self, plan):
        self.plan = plan
        self.databases = {m.spec.database for m in plan.mappings
                          if isinstance(m.spec, DbMapping) and m.spec.mirrorDb}
        self.conn = None

    def __call__(self) -> SourceCharsets:
        if self.conn is not None:
            try:
                return self._read()
            except Exception:  # noqa: BLE001 - lost since the last DDL (a source restart): a new one
                self.close()
        self.conn = connect_source(self.plan.config)
        try:
            return self._read()
        except BaseException:
            self.close()
            raise

    def _read(self) -> SourceCharsets:
        with self.conn.cursor() as cur:
            return catalog.charset_defaults(cur, self.databases)

    def close(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - a connection already lost
                pass


def source_charsets_reader(plan) -> SourceCharsetsReader:
    """A reader of the defaults of the group's mirrored databases on the source (close it after use)."""
    return SourceCharsetsReader(plan)


# -- pre-flight: no target key compares more coarsely than its source column ----------------------
class SourceCollations:
    """The source's side of the key-collation check (:class:`adapters.base.SourceCollations`): its
    tables, its columns' collations and what its collations equate, on one connection opened when
    first asked (a group whose targets check nothing never connects); :meth:`close` ends it."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.conn = None
        self.cur = None

    def _cursor(self):
        if self.cur is None:
            self.conn = connect_source(self.cfg)
            self.cur = self.conn.cursor()
        return self.cur

    def tables(self, database: str) -> list[str]:
        return catalog.tables(self._cursor(), database)

    def column_collations(self, database: str, table: str) -> list[tuple[str, str | None, str | None]]:
        return catalog.column_charsets(self._cursor(), database, table)

    def equal_pairs(self, charset: str, collation: str) -> frozenset[tuple[int, int]]:
        s = self.cfg.source
        return cached_equal_pairs((s.host, s.port, charset, collation), self._cursor(), charset, collation)

    def close(self) -> None:
        cur, conn, self.cur, self.conn = self.cur, self.conn, None, None
        try:
            if cur is not None:
                cur.close()
        finally:
            if conn is not None:
                conn.close()


def check_key_collations(plan) -> None:
    """Pre-flight: ConfigError naming the mapping, the table, the column and both collations when a
    column of a unique key of a target table compares more coarsely than the source column it holds
    (rows the source keeps apart would be one row there). Asked of each target whose adapter says
    ``Capabilities.key_collations`` (the RDB adapter: MySQL/MariaDB targets), with the source's side
    from :class:`SourceCollations`."""
    source = SourceCollations(plan.config)
    try:
        for tid, (kind, target) in plan.targets.items():
            maps = tuple(m for i, m in enumerate(plan.mappings)
                         if plan.mapping_target[i] == tid and isinstance(m.spec, DbMapping))
            if maps and capabilities(kind).key_collations:
                make_writer(kind, target, maps).check_key_collations(source)
    finally:
        source.close()
