"""Chunked comparison of a source table with its RDB target table (pt-table-checksum style).

1. **Chunks.** The source table's primary key is walked in key order
   (``SELECT pk ... WHERE pk > last ORDER BY pk LIMIT 1 OFFSET n-1``) to find chunk upper
   bounds; the first chunk is open below and the last open above, so target rows outside the
   source's key range are still compared.
2. **Checksums.** On a MySQL/MariaDB target each chunk is summed with the same SQL on both
   sides: ``COUNT(*)`` and ``BIT_XOR`` of the first 64 bits of ``MD5(CONCAT_WS('#', cols...,
   CONCAT(ISNULL(col)...)))`` (pt-table-checksum's expression with a 64-bit hash instead of
   CRC32), both sessions at ``time_zone='+00:00'``. Other targets (PostgreSQL, SQLite) print
   values differently, so their chunks are read as rows and normalized in Python
   (:mod:`pipeline.ops.normalize`) and compared by a hash of the normalized rows.
3. **Drill-down.** A chunk whose checksums differ is read from both sides; rows are matched by
   primary key after normalization and listed as *missing* (in the source only), *extra* (in
   the target only) or *changed*. Missing and extra keys of all chunks are matched up at the
   end, so a key that a different collation put into another chunk is not reported twice.

Tables without a primary key are compared as one chunk, as multisets of normalized rows.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pymysql

from pipeline.source import catalog
from sluice_common.mysqltypes import quote_ident

from .normalize import normalize_row, normalizer


@dataclass
class Column:
    source: str
    target: str
    data_type: str
    column_type: str


@dataclass
class TablePair:
    """One source table and its target table, with the compared columns and the key."""

    source_db: str
    source_table: str
    target_schema: str | None
    target_table: str
    columns: list[Column]             # every compared column, key columns first
    nkey: int                         # how many of ``columns`` form the key (0: no key)


@dataclass
class TableDiff:
    """What ``sluice verify`` found for one table."""

    mapping: str
    kind: str
    source: str
    target: str
    method: str = ""
    source_rows: int = 0
    target_rows: int = 0
    chunks: int = 0
    differing_chunks: int = 0
    missing: list = field(default_factory=list)   # keys in the source only
    extra: list = field(default_factory=list)     # keys in the target only
    changed: list = field(default_factory=list)   # keys whose values differ
    changed_columns: Counter = field(default_factory=Counter)  # target column -> changed rows
    sampled: int | None = None
    #: why the table could not be compared (then nothing else is meaningful)
    error: str | None = None
    #: the error is a config/mapping problem (exit 2), not a failure to reach or read (exit 1)
    config_error: bool = False
    #: a remark on a difference, e.g. counts differ while the sample matched
    note: str | None = None
    seconds: float = 0.0
    #: the group whose mapping this is (the repair command names it)
    group: str = ""

    @property
    def differing(self) -> int:
        return len(self.missing) + len(self.extra) + len(self.changed)

    @property
    def ok(self) -> bool:
        """Compared, and equal (also in row counts)."""
        return self.error is None and self.differing == 0 and self.source_rows == self.target_rows

    def as_dict(self, max_keys: int = 50) -> dict[str, Any]:
        return {"mapping": self.mapping, "kind": self.kind, "source": self.source, "target": self.target,
                "method": self.method, "ok": self.ok, "source_rows": self.source_rows,
                "target_rows": self.target_rows, "chunks": self.chunks, "differing_chunks": self.differing_chunks,
                "differing_rows": self.differing, "missing": len(self.missing), "extra": len(self.extra),
                "changed": len(self.changed), "changed_columns": dict(self.changed_columns),
                "sampled": self.sampled,
                "keys": {"missing": [_key(k) for k in self.missing[:max_keys]],
                         "extra": [_key(k) for k in self.extra[:max_keys]],
                         "changed": [_key(k) for k in self.changed[:max_keys]]},
                "error": self.error, "config_error": self.config_error, "note": self.note,
                "seconds": round(self.seconds, 3), "group": self.group}

    def repair_args(self) -> list[str]:
        """The arguments of the ``sluice repair`` that brings this table back (after ``--config``);
        empty when it is equal or could not be compared."""
        if self.ok or self.error or not self.group:
            return []
        what = ["--table", self.source] if self.kind == "rdb" else ["--mapping", self.mapping]
        return ["--group", self.group, *what]


def _key(k: Any) -> Any:
    if isinstance(k, tuple) and len(k) == 1:
        k = k[0]
    if isinstance(k, bytes):
        return k.decode("latin-1")
    if isinstance(k, tuple):
        return [x.decode("latin-1") if isinstance(x, bytes) else x for x in k]
    return k


# -- SQL helpers -------------------------------------------------------------------------------
class Side:
    """One end of the comparison: a DBAPI connection, its quoting and placeholder."""

    def __init__(self, conn: Any, dialect: str):
        self.conn, self.dialect = conn, dialect
        self.ph = "?" if dialect == "sqlite" else "%s"

    def q(self, name: str) -> str:
        if self.dialect in ("mysql", "mariadb"):
            return quote_ident(name)
        return '"' + name.replace('"', '""') + '"'

    def table(self, schema: str | None, name: str) -> str:
        return f"{self.q(schema)}.{self.q(name)}" if schema else self.q(name)

    def rows(self, sql: str, params: list) -> list[tuple]:
        cur = self.conn.cursor()
        try:
            cur.execute(sql, params) if params else cur.execute(sql)
            return list(cur.fetchall())
        finally:
            cur.close()


def range_clause(side: Side, cols: list[str], lo: tuple | None, hi: tuple | None) -> tuple[str, list]:
    """``lo < key <= hi`` as expanded comparisons (row constructors are not indexed everywhere)."""
    parts, params = [], []
    qc = [side.q(c) for c in cols]
    for bound, op_last, inclusive in ((lo, ">", False), (hi, "<", True)):
        if bound is None:
            continue
        ors = []
        for i in range(len(cols)):
            eqs = [f"{qc[j]} = {side.ph}" for j in range(i)]
            ors.append("(" + " AND ".join([*eqs, f"{qc[i]} {op_last} {side.ph}"]) + ")")
            params.extend([*bound[:i], bound[i]])
        if inclusive:
            ors.append("(" + " AND ".join(f"{c} = {side.ph}" for c in qc) + ")")
            params.extend(bound)
        parts.append("(" + " OR ".join(ors) + ")")
    return (" AND ".join(parts) or "1=1"), params


def boundaries(src: Side, table: str, keys: list[str], chunk: int) -> list[tuple]:
    """Upper bounds of successive chunks of ``chunk`` rows in key order (on the source)."""
    kc = ", ".join(src.q(k) for k in keys)
    out: list[tuple] = []
    last: tuple | None = None
    while True:
        where, params = range_clause(src, keys, last, None)
        rows = src.rows(f"SELECT {kc} FROM {table} WHERE {where} ORDER BY {kc} LIMIT 1 OFFSET {chunk - 1}", params)
        if not rows:
            return out
        last = tuple(rows[0])
        out.append(last)


def checksum_sql(side: Side, table: str, cols: list[str], where: str) -> str:
    qc = [side.q(c) for c in cols]
    nulls = "CONCAT(" + ", ".join(f"ISNULL({c})" for c in qc) + ")"
    row = f"CONCAT_WS('#', {', '.join(qc)}, {nulls})"
    return (f"SELECT COUNT(*), COALESCE(BIT_XOR(CAST(CONV(SUBSTRING(MD5({row}), 1, 16), 16, 10) AS UNSIGNED)), 0) "
            f"FROM {table} WHERE {where}")


# -- the comparison ----------------------------------------------------------------------------
def compare_table(src: Side, tgt: Side, pair: TablePair, diff: TableDiff, chunk: int = 1000) -> TableDiff:
    """Compare one table pair chunk by chunk, filling ``diff``."""
    t0 = time.monotonic()
    st = src.table(pair.source_db, pair.source_table)
    tt = tgt.table(pair.target_schema, pair.target_table)
    scols = [c.source for c in pair.columns]
    tcols = [c.target for c in pair.columns]
    floats = [c.data_type == "float" for c in pair.columns]
    funcs = [normalizer(c.data_type, c.column_type) for c in pair.columns]
    diff.source_rows = int(src.rows(f"SELECT COUNT(*) FROM {st}", [])[0][0])
    diff.target_rows = int(tgt.rows(f"SELECT COUNT(*) FROM {tt}", [])[0][0])
    if pair.nkey == 0:
        diff.method = "rows (no primary key: one chunk, rows as a multiset)"
        diff.chunks = 1
        a = Counter(normalize_row(tuple(r), funcs)
                    for r in src.rows(f"SELECT {select_list(src, scols, floats)} FROM {st}", []))
        b = Counter(normalize_row(tuple(r), funcs)
                    for r in tgt.rows(f"SELECT {select_list(tgt, tcols, floats)} FROM {tt}", []))
        diff.missing = [r for r, n in (a - b).items() for _ in range(n)]
        diff.extra = [r for r, n in (b - a).items() for _ in range(n)]
        diff.differing_chunks = int(bool(diff.missing or diff.extra))
        diff.seconds = time.monotonic() - t0
        return diff
    same_sql = tgt.dialect in ("mysql", "mariadb")
    diff.method = "checksum (MD5-64 BIT_XOR per chunk)" if same_sql else "rows (normalized per chunk)"
    skeys, tkeys = scols[: pair.nkey], tcols[: pair.nkey]
    bounds = boundaries(src, st, skeys, chunk)
    ranges = list(zip([None, *bounds], [*bounds, None], strict=True))
    diff.chunks = len(ranges)
    missing: dict[tuple, tuple] = {}
    extra: dict[tuple, tuple] = {}
    changed: list[tuple] = []

    def note_change(k: tuple, a: tuple, b: tuple) -> None:
        changed.append(k)
        diff.changed_columns.update(tcols[i] for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y)

    for lo, hi in ranges:
        swhere, sparams = range_clause(src, skeys, lo, hi)
        twhere, tparams = range_clause(tgt, tkeys, lo, hi)
        srows = trows = None
        if same_sql:
            a = src.rows(checksum_sql(src, st, scols, swhere), sparams)[0]
            b = tgt.rows(checksum_sql(tgt, tt, tcols, twhere), tparams)[0]
            if tuple(a) == tuple(b):
                continue
        srows = _keyed(src.rows(f"SELECT {select_list(src, scols, floats)} FROM {st} WHERE {swhere}", sparams), funcs,
                       pair.nkey)
        trows = _keyed(tgt.rows(f"SELECT {select_list(tgt, tcols, floats)} FROM {tt} WHERE {twhere}", tparams), funcs,
                       pair.nkey)
        if srows == trows:
            continue
        diff.differing_chunks += 1
        for k, h in srows.items():
            other = trows.get(k)
            if other is None:
                missing[k] = h
            elif other != h:
                note_change(k, h, other)
        for k, h in trows.items():
            if k not in srows:
                extra[k] = h
    for k in [k for k in missing if k in extra]:  # a key another collation put into another chunk
        a, b = missing.pop(k), extra.pop(k)
        if a != b:
            note_change(k, a, b)
    diff.missing, diff.extra, diff.changed = sorted(missing, key=repr), sorted(extra, key=repr), changed
    diff.seconds = time.monotonic() - t0
    return diff


def select_list(side: Side, cols: list[str], floats: list[bool] | None = None) -> str:
    """The select list; a MySQL/MariaDB side reads FLOAT columns as ``CAST(col AS DOUBLE)``: their
    text has 6 significant digits, which is not the stored float32 that capture and the full load
    copy (docs/capture.md, "Value encoding")."""
    mysql = side.dialect in ("mysql", "mariadb")
    return ", ".join(f"CAST({side.q(c)} AS DOUBLE)" if mysql and floats and floats[i] else side.q(c)
                     for i, c in enumerate(cols))


def _keyed(rows: list, funcs: list, nkey: int) -> dict[tuple, tuple]:
    out = {}
    for r in rows:
        n = normalize_row(tuple(r), funcs)
        out[n[:nkey]] = n
    return out


# -- resolving a dbMapping into table pairs ----------------------------------------------------
def source_columns(cur: Any, db: str, table: str) -> tuple[list[tuple[str, str, str]], list[str]]:
    """``[(name, DATA_TYPE, COLUMN_TYPE)]`` (MariaDB's JSON columns with the DATA_TYPE ``json``)
    and the primary key columns in key order."""
    cols = catalog.columns(cur, db, table)
    json_cols = catalog.json_checked_columns(cur, db, table)
    return ([(c.name, "json" if c.name in json_cols else c.data_type, c.column_type) for c in cols],
            catalog.primary_key(cur, db, table))


def pairs_for(cur: Any, mapping: Any) -> list[TablePair]:
    """The table pairs of a ``dbMapping`` (every table of the database for mirrorDb)."""
    spec = mapping.spec
    tables = catalog.tables(cur, spec.database) if spec.mirrorDb else [spec.table]
    out = []
    for t in tables:
        cols, pk = source_columns(cur, spec.database, t)
        types = {c[0]: c for c in cols}
        mapped = spec.column_mapping([c[0] for c in cols])
        if spec.mirrorDb or not spec.primary_key:
            key_src = [c for c in pk if c in mapped]
        else:
            key_src = [s for _, s in spec.primary_key]
        order = key_src + [c for c in mapped if c not in key_src]
        columns = [Column(s, mapped.get(s) or _target_pk(spec, s), types[s][1], types[s][2]) for s in order
                   if s in types]
        schema, name = spec.target(t)
        out.append(TablePair(spec.database, t, schema, name, columns, len(key_src)))
    return out


def _target_pk(spec: Any, source: str) -> str:
    for t, s in spec.primary_key:
        if s == source:
            return t
    return source


def connect_source(cfg: Any) -> pymysql.connections.Connection:
    """A source connection with the session time zone at UTC (TIMESTAMPs as stored instants)."""
    from pipeline.source.connect import connect
    from sluice_common.mysqlconn import UTC_SESSION

    return connect(cfg.source, session=(UTC_SESSION,))
