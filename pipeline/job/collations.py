"""Collations between the source and MySQL/MariaDB targets, on the driver: the source's defaults
for the DDL a mirror replays, and the pre-flight check that no target key compares more coarsely
than the source.

A replayed ``CREATE TABLE`` must give its plain columns the source database's default collation and
a bare ``CHARSET x`` the source server's default collation of ``x``. The driver hands each RDB
writer a reader of those defaults; it asks the source when a CREATE or ALTER is replayed (the
answer is what the source says now), on one connection a sync keeps for its DDL. A source that
cannot be reached then fails the replay (nothing is acked; the next run replays it).

:func:`check_key_collations` compares, for every column of every unique key (and primary key) of a
mapped MySQL/MariaDB target table, the target column's collation with the source column's, each on
its own server, over :data:`PROBES` (strings that differ in case, accents, trailing spaces,
expansions, width, ...): if the target calls two of them equal that the source does not, two source
rows could be one target row, and the mapping is refused naming both columns and collations. A
finer target (NO PAD under a PAD SPACE source, a ``_bin`` under a ``_ci``) is accepted.
"""

from __future__ import annotations

import re

from adapters.rdb.charsets import SourceCharsets, read_source_charsets, target_collations, translate
from adapters.rdb.client import engine_for
from adapters.rdb.config import RdbTable
from adapters.rdb.keys import list_tables
from adapters.rdb.schema import table_info
from pipeline.mapping import DbMapping
from pipeline.source import catalog
from pipeline.source.connect import connect
from sluice_common.errors import ConfigError
from sluice_common.mysqltypes import quote_ident


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
            return read_source_charsets(cur, self.databases)

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
#: strings that tell collations apart: case, accents, trailing and leading spaces, expansions and
#: ligatures, width, kana, dotless i, final sigma, no-break space, emoji, digits
PROBES = ("a", "A", "á", "Á", "à", "ä", "å", "æ", "ae", "AE", "b", "c", "ç", "e", "é", "ê", "i", "ı", "I", "İ",
          "o", "ö", "ø", "oe", "œ", "s", "ss", "ß", "ẞ", "u", "ü", "ue", "y", "ÿ", "z", "Z", "ž", "a ", "a  ",
          " a", "", " ", "ａ", "Ａ", "ﬁ", "fi", "σ", "ς", "Σ", "α", "ά", "я", "Я", "ё", "е", "か", "カ", "が",
          "😀", "😁", "1", "１", "²", "2", "-", "_", "–", "a\t", "\u00a0", "a\u00a0", "n", "ñ", "Ñ", "ł", "l",
          "đ", "d", "ð", "þ", "th", "Ǆ", "DŽ", "ǅ")
_NAME = re.compile(r"^[A-Za-z0-9_]+$")
_equal_cache: dict[tuple, frozenset[tuple[int, int]]] = {}


def equal_pairs(cur, charset: str, collation: str) -> frozenset[tuple[int, int]]:
    """The pairs ``(i, j)``, ``i < j``, of :data:`PROBES` that ``collation`` calls equal, and
    ``(i, -1)`` for each probe ``charset`` cannot hold (``cur``: a DB-API cursor on the server)."""
    if not (_NAME.match(charset) and _NAME.match(collation)):
        raise ValueError(f"not a collation name: {charset!r} {collation!r}")
    conv = f"CONVERT(%s USING {charset})"
    cur.execute("SELECT " + ", ".join([f"CONVERT({conv} USING utf8mb4) = %s COLLATE utf8mb4_bin"] * len(PROBES)),
                tuple(x for p in PROBES for x in (p, p)))
    held = [bool(v) for v in cur.fetchone()]
    rows = " UNION ALL ".join(f"SELECT {i} AS i, {conv} COLLATE {collation} AS s" for i in range(len(PROBES)))
    cur.execute(f"SELECT a.i, b.i FROM ({rows}) a JOIN ({rows}) b ON a.s = b.s AND a.i < b.i", PROBES + PROBES)
    return frozenset({(int(i), int(j)) for i, j in cur.fetchall()} | {(i, -1) for i, h in enumerate(held) if not h})


def coarser_example(source: frozenset, target: frozenset) -> tuple[str, str] | None:
    """Two probes the target calls equal and the source does not (both held by both charsets)."""
    lost = {i for i, j in source | target if j == -1}
    for i, j in sorted(target - source):
        if j != -1 and i not in lost and j not in lost:
            return PROBES[i], PROBES[j]
    return None


def _cached(key: tuple, cur, charset: str, collation: str) -> frozenset:
    if key not in _equal_cache:
        _equal_cache[key] = equal_pairs(cur, charset, collation)
    return _equal_cache[key]


def check_key_collations(plan) -> None:
    """Pre-flight: ConfigError naming the mapping, the table, the column and both collations when a
    column of a unique key of a MySQL/MariaDB target table compares more coarsely than the source
    column it holds (rows the source keeps apart would be one row there)."""
    work = []
    for tid, (kind, target) in plan.targets.items():
        maps = [m for i, m in enumerate(plan.mappings)
                if plan.mapping_target[i] == tid and isinstance(m.spec, DbMapping)]
        if kind == "rdb" and maps and target.dialect in ("mysql", "mariadb"):
            work.append((target, maps))
    if not work:
        return
    src = connect_source(plan.config)
    try:
        with src.cursor() as scur:
            for target, maps in work:
                with engine_for(target).connect() as tconn:
                    tcur = tconn.connection.dbapi_connection.cursor()
                    for m in maps:
                        for table in _tables(scur, tconn, m):
                            _check_table(plan, scur, tcur, tconn, target, m, table)
    finally:
        src.close()


def _tables(scur, tconn, m) -> list[str]:
    spec = m.spec
    if not spec.mirrorDb:
        return [spec.table]
    there = set(list_tables(tconn, "mysql", spec.target_schema))
    return sorted(t for t in catalog.tables(scur, spec.database) if t in there)


def _source_column(route: RdbTable, column: str) -> str | None:
    fold = str.casefold if route.case_insensitive else (lambda x: x)
    if route.columns is not None:
        return next((s for s, t in route.columns if fold(t) == fold(column)), None)
    renamed = next((s for s, t in route.renames if fold(t) == fold(column)), None)
    return renamed or (None if column in route.exclude else column)


def _check_table(plan, scur, tcur, tconn, target, m, table: str) -> None:
    route = RdbTable.from_mapping(m, table)
    info = table_info(tconn, target, "mysql", route.target_schema, route.target_table)
    if info is None:
        return
    source = {r[0].casefold() if route.case_insensitive else r[0]: r
              for r in catalog.column_charsets(scur, m.spec.database, table)}
    s = plan.config.source
    for key, key_name in zip(info.unique, info.unique_names or info.unique, strict=False):
        for col in key:
            c = info.columns.get(col)
            name = _source_column(route, col) if c is not None else None
            if name is None or not c.collation or not c.charset or c.collation == "binary":
                continue
            scol, s_cs, s_coll = source.get(name.casefold() if route.case_insensitive else name) or (None,) * 3
            if not s_coll or s_cs == "binary":
                continue
            example = coarser_example(_cached((s.host, s.port, s_cs, s_coll), scur, s_cs, s_coll),
                                      _cached((target, c.charset, c.collation), tcur, c.charset, c.collation))
            if example is None:
                continue
            x, y = example
            where = f"{info.schema}.{info.name}" if info.schema else info.name
            raise ConfigError(
                m.file, "dbMapping",
                f"target column {where}.{col} ({c.collation}) of key {key_name} compares more coarsely than the "
                f"source column {m.spec.database}.{table}.{scol} ({s_coll}): it equates {x!r} and {y!r}, which the "
                "source keeps apart, so rows the source holds apart would be one row in the target",
                hint=_fix(tcur, target, info, col, s_coll))


def _fix(tcur, target, info, col: str, source_coll: str) -> str:
    """The statement that gives the target column a collation comparing like the source's."""
    same = translate(source_coll, target_collations(tcur, target))
    if same is None:
        return (f"the target server has no collation that compares like {source_coll}: map the table to a target "
                "that has one (for MySQL's *_0900_* collations, MariaDB 10.10 or later)")
    tcur.execute("SELECT COLUMN_TYPE, IS_NULLABLE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = "
                 + ("%s" if info.schema else "DATABASE()") + " AND TABLE_NAME = %s AND COLUMN_NAME = %s",
                 (*([info.schema] if info.schema else []), info.name, col))
    ctype, nullable = tcur.fetchone()
    where = ".".join(quote_ident(p) for p in (info.schema, info.name) if p)
    return (f"ALTER TABLE {where} MODIFY {quote_ident(col)} {ctype}{'' if nullable == 'YES' else ' NOT NULL'} "
            f"COLLATE {same} (restate its DEFAULT and COMMENT, if it has them), then run again")
