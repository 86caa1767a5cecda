"""The RDB adapter's face for ``sluice verify`` and ``sluice repair``: the chunked compare.

A relational target holds copies of the source tables, so it is compared completely, chunk by
chunk (pt-table-checksum style), over plain DB-API connections: the source's (pymysql, the caller
opens it) and the target's from the adapter's own pool (client.py).

1. **Chunks.** The source table's primary key is walked in key order
   (``SELECT pk ... WHERE pk > last ORDER BY pk LIMIT 1 OFFSET n-1``) to find chunk upper
   bounds; the first chunk is open below and the last open above, so target rows outside the
   source's key range are still compared.
2. **Checksums.** On a MySQL/MariaDB target each chunk is summed with the same SQL on both
   sides: ``COUNT(*)`` and ``BIT_XOR`` of the first 64 bits of ``SHA2(CONCAT_WS('#', cols...,
   CONCAT(ISNULL(col)...)), 256)`` (pt-table-checksum's expression with a 64-bit hash instead of
   CRC32; :mod:`sluice_common.chunksql`), both sessions at ``time_zone='+00:00'``. Other targets
   (PostgreSQL, SQLite) print values differently, so their chunks are read as rows and normalized
   in Python (:mod:`sluice_common.normalize`) and compared by a hash of the normalized rows.
3. **Drill-down.** A chunk whose checksums differ is read from both sides; rows are matched by
   primary key after normalization and listed as *missing* (in the source only), *extra* (in
   the target only) or *changed*. Missing and extra keys of all chunks are matched up at the
   end, so a key that a different collation put into another chunk is not reported twice.

Tables without a primary key are compared as one chunk, as multisets of normalized rows. Which
source table goes with which target table and columns (:class:`adapters.base.TablePair`) the
caller resolves from the mapping and the source's catalog (pipeline/ops/verify_source.py).
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from sqlalchemy import inspect

from adapters.base import TablePair, Verifier
from adapters.rdb.client import engine_for
from adapters.rdb.config import RdbTarget
from adapters.rdb.dialects import dialect_of
from sluice_common.chunksql import Side, boundaries, checksum_sql, keyed, point_row, range_clause, select_list
from sluice_common.normalize import normalize_row, normalizer


def read_connection(target: RdbTarget) -> Any:
    """A DB-API connection to ``target`` from its pool (the caller closes it); its dialect is
    ``target.dialect``."""
    return engine_for(target).raw_connection()


class RdbVerifier(Verifier):
    """``compare == "checksums"``: every row, chunk by chunk (factory.make_verifier)."""

    def preflight(self) -> None:
        from adapters.rdb.writer import RdbWriter

        RdbWriter(self.target, self.mappings).check()

    def read_connection(self) -> Any:
        return read_connection(self.target)

    def absent(self, pairs: list[TablePair]) -> list[TablePair]:
        """MySQL/MariaDB: no table or view of the name in its schema, in any letter case (a server with
        ``lower_case_table_names`` lists ``Orders`` as ``orders``); others: none the writer's
        reflection would find (PostgreSQL: on the search path when no schema is named)."""
        if not pairs:
            return []
        with engine_for(self.target).connect() as conn:
            if dialect_of(self.target).family != "mysql":
                seen = inspect(conn)
                return [p for p in pairs if not seen.has_table(p.target_table, schema=p.target_schema)]
            there: dict[str | None, set[str]] = {}
            for schema in {p.target_schema for p in pairs}:
                db = "%s" if schema is not None else "DATABASE()"
                rows = conn.exec_driver_sql("SELECT TABLE_NAME FROM information_schema.TABLES WHERE "
                                            f"TABLE_SCHEMA = {db}", (schema,) if schema is not None else ()).fetchall()
                there[schema] = {r[0].casefold() for r in rows}
        return [p for p in pairs if p.target_table.casefold() not in there[p.target_schema]]

    def compare(self, source: Any, target_conn: Any, pair: TablePair, diff: Any, chunk: int) -> Any:
        return compare_table(Side(source, "mysql"), Side(target_conn, self.target.dialect), pair, diff, chunk)


def compare_table(src: Side, tgt: Side, pair: TablePair, diff: Any, chunk: int = 1000) -> Any:
    """Compare one table pair chunk by chunk, filling ``diff`` (the caller's report record: its
    ``source_rows``, ``target_rows``, ``method``, ``chunks``, ``differing_chunks``, ``missing``,
    ``extra``, ``changed``, ``changed_columns`` and ``seconds`` are set)."""
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
    diff.method = "checksum (SHA2-64 BIT_XOR per chunk)" if same_sql else "rows (normalized per chunk)"
    skeys, tkeys = scols[: pair.nkey], tcols[: pair.nkey]
    bounds = boundaries(src, st, skeys, chunk)
    ranges = list(zip([None, *bounds], [*bounds, None], strict=True))
    tbounds = (mysql_target_order(src, tgt, bounds, pair, skeys, tkeys) if same_sql
               else in_target_order(tgt, bounds, pair.target_schema, pair.target_table, tkeys))
    tranges = list(zip([None, *tbounds], [*tbounds, None], strict=True))
    diff.chunks = len(ranges)
    missing: dict[tuple, tuple] = {}
    extra: dict[tuple, tuple] = {}
    changed: list[tuple] = []
    compared: set[tuple] = set()   # keys met on both sides in a chunk
    raw: dict[tuple, tuple] = {}   # a missing or extra key as its side read it (for the lookups below)

    def note_change(k: tuple, a: tuple, b: tuple) -> None:
        changed.append(k)
        diff.changed_columns.update(tcols[i] for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y)

    for (lo, hi), (tlo, thi) in zip(ranges, tranges, strict=True):
        swhere, sparams = range_clause(src, skeys, lo, hi)
        twhere, tparams = range_clause(tgt, tkeys, tlo, thi)
        if same_sql:
            a = src.rows(checksum_sql(src, st, scols, swhere), sparams)[0]
            b = tgt.rows(checksum_sql(tgt, tt, tcols, twhere), tparams)[0]
            if tuple(a) == tuple(b):
                continue
        srows, sraw = keyed(src.rows(f"SELECT {select_list(src, scols, floats)} FROM {st} WHERE {swhere}", sparams),
                             funcs, pair.nkey)
        trows, traw = keyed(tgt.rows(f"SELECT {select_list(tgt, tcols, floats)} FROM {tt} WHERE {twhere}", tparams),
                             funcs, pair.nkey)
        if srows == trows:
            continue
        diff.differing_chunks += 1
        for k, h in srows.items():
            other = trows.get(k)
            if other is None:
                missing[k], raw[k] = h, sraw[k]
                continue
            compared.add(k)
            if other != h:
                note_change(k, h, other)
        for k, h in trows.items():
            if k not in srows:
                extra[k] = h
                raw.setdefault(k, traw[k])
    for k in [k for k in missing if k in extra]:  # a key another collation put into another chunk
        a, b = missing.pop(k), extra.pop(k)
        compared.add(k)
        if a != b:
            note_change(k, a, b)
    # what is left may be a key the two sides' ranges did not meet in one chunk (bounds in an order
    # the target does not share: other key types, a fallback): asked of the other side by key
    for k in [k for k in extra if k in compared]:  # a target row that ranges overlapping took twice
        del extra[k]
    for left, side, table, keys, cols, ours in ((extra, src, st, skeys, scols, False),
                                                (missing, tgt, tt, tkeys, tcols, True)):
        for k in list(left):
            found = point_row(side, table, keys, select_list(side, cols, floats), funcs, raw[k])
            if found is not None:
                a, b = (left.pop(k), found) if ours else (found, left.pop(k))  # (source's, target's)
                if a != b:
                    note_change(k, a, b)
    diff.missing, diff.extra, diff.changed = sorted(missing, key=repr), sorted(extra, key=repr), changed
    diff.seconds = time.monotonic() - t0
    return diff



def in_target_order(tgt: Side, bounds: list[tuple], schema: str | None, table: str, keys: list[str]) -> list[tuple]:
    """The source's chunk bounds in the order a PostgreSQL target sorts its key columns (each by its
    own collation), so that its ranges partition the target's rows: a ``_ci`` text key sorts ``a``
    before ``B`` on the source and after it under ``C`` (a new user's probe: bounds out of the
    target's order made ranges that overlapped and left gaps, and verify listed equal rows as extra
    and missing, for good). A row in another chunk than the source's is paired up by key at the end.
    Other targets, and keys of other types than text and integers, keep the source's order."""
    if tgt.dialect != "postgresql" or len(bounds) < 2 or not any(isinstance(v, str) for v in bounds[0]):
        return bounds
    casts = []
    for j in range(len(keys)):
        kinds = {type(b[j]) for b in bounds}
        if kinds <= {str}:
            casts.append("text[]")
        elif kinds <= {int}:
            casts.append("numeric[]")
        else:
            return bounds
    found = dict(tgt.rows("SELECT column_name, collation_name FROM information_schema.columns WHERE table_schema = "
                          f"COALESCE({tgt.ph}, current_schema()) AND table_name = {tgt.ph}", [schema, table]))
    order = ", ".join(f"c{j}" + (f' COLLATE "{found[k]}"' if found.get(k) and '"' not in found[k] else "")
                      for j, k in enumerate(keys))
    cols = ", ".join(f"c{j}" for j in range(len(keys)))
    arrays = ", ".join(f"{tgt.ph}::{c}" for c in casts)
    rows = tgt.rows(f"SELECT i FROM unnest({tgt.ph}::int[], {arrays}) AS v(i, {cols}) ORDER BY {order}",
                    [list(range(len(bounds))), *([b[j] for b in bounds] for j in range(len(keys)))])
    return [bounds[r[0]] for r in rows]


#: the largest statement that sorts bounds on a MySQL/MariaDB target (bytes, well under the 4 MB
#: ``max_allowed_packet`` of MySQL 5.7; more bounds keep the source's order, and the keys its ranges
#: do not meet in one chunk are looked up by key)
MAX_SORT_BYTES = 1 << 20


def mysql_target_order(src: Side, tgt: Side, bounds: list[tuple], pair: TablePair, skeys: list[str],
                       tkeys: list[str]) -> list[tuple]:
    """:func:`in_target_order` for a MySQL/MariaDB target: the bounds in its key columns' collations
    when one of them is not the source column's (``_bin`` under ``_ci``, which the key-collation
    check accepts as finer); else, the same order, the source's. Its chunks then hold other rows
    than the source's and are read row by row, paired up by key at the end."""
    if len(bounds) < 2 or not any(isinstance(v, str) for v in bounds[0]):
        return bounds
    sql = ("SELECT COLUMN_NAME, CHARACTER_SET_NAME, COLLATION_NAME FROM information_schema.COLUMNS WHERE "
           "TABLE_SCHEMA = {db} AND TABLE_NAME = %s")
    theirs = {r[0].casefold(): (r[1], r[2]) for r in src.rows(sql.format(db="%s"), [pair.source_db, pair.source_table])}
    db = "%s" if pair.target_schema else "DATABASE()"
    ours = {r[0].casefold(): (r[1], r[2]) for r in tgt.rows(sql.format(db=db), [x for x in (pair.target_schema,
                                                                                          pair.target_table) if x])}
    if all(theirs.get(s.casefold(), (None, None))[1] == ours.get(t.casefold(), (None, None))[1]
           for s, t in zip(skeys, tkeys, strict=True)):
        return bounds
    exprs = []
    for j, t in enumerate(tkeys):
        charset, collation = ours.get(t.casefold(), (None, None))
        if all(isinstance(b[j], str) for b in bounds) and charset and collation and \
                charset.isidentifier() and collation.isidentifier():
            exprs.append(f"CAST(%s AS CHAR CHARACTER SET {charset}) COLLATE {collation} AS c{j}")
        elif all(isinstance(b[j], int) for b in bounds):
            exprs.append(f"CAST(%s AS DECIMAL(65,0)) AS c{j}")
        else:
            return bounds
    rows = " UNION ALL ".join(f"SELECT {i} AS i, " + ", ".join(exprs) for i in range(len(bounds)))
    if len(rows) + sum(len(str(v)) * 4 + 4 for b in bounds for v in b) > MAX_SORT_BYTES:
        return bounds
    order = ", ".join(f"c{j}" for j in range(len(tkeys)))
    got = tgt.rows(f"SELECT i FROM ({rows}) AS v ORDER BY {order}", [v for b in bounds for v in b])
    return [bounds[r[0]] for r in got]
