"""Repairing one key range of an RDB target table (executor side).

:meth:`RdbChunks.differs` is ``sluice verify``'s chunk compare (adapters/rdb/verify.py) without a
lock (SHA2-64 BIT_XOR checksums both sides compute on a MySQL/MariaDB target, the SQL of
:mod:`sluice_common.chunksql`; normalized rows elsewhere): most chunks are equal and cost one
checksum each. :meth:`RdbChunks.repair` runs under the group's apply lock
(:class:`pipeline.repair.guard.ChunkGuard`), in one target transaction:

1. the chunk's rows are read from the source snapshot and from the target (same transaction
   as the writes), normalized and matched by key;
2. a target key the source chunk lacks is looked up in the snapshot by that key (a key a
   different collation put into another chunk is the source's row, not an extra one): absent,
   the row is deleted; present, it is written;
3. target rows that hold a secondary unique value one of the rows to write needs (a unique value
   moved between rows) are handled the same way (their own source row written, or deleted);
4. the rows to write go through the adapter's writer as ``UPSERT`` changes (the full load's
   values and statements), the deletes by the target's own key values; commit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import inspect as sa_inspect

from adapters.base import Change
from pipeline.etl.values import row_decoder
from sluice_common.chunksql import Side, checksum_sql, keyed, point_row, range_clause, select_list
from sluice_common.mysqltypes import quote_ident as qi
from sluice_common.normalize import normalize_row, normalizer

MAX_CONFLICT_ROUNDS = 5


@dataclass
class ChunkCounts:
    """What one chunk's repair did (or, in a dry run, would do)."""

    missing: int = 0
    changed: int = 0
    extra: int = 0
    upserted: int = 0
    deleted: int = 0
    keys: list | None = None  # a few differing keys, for the report


class RdbChunks:
    """One (mapping, table) pair on one executor: compare and repair its key ranges."""

    def __init__(self, table: Any, target: Any, src_conn: Any):
        self.t = table
        self.pair = table.pair
        self.target = target
        self.src = Side(src_conn, "mysql")
        self.tgt = Side(None, target.dialect)
        meta = table.meta
        self.st = self.src.table(meta.database, meta.table)
        self.tt = self.tgt.table(self.pair.target_schema, self.pair.target_table)
        names = [c.name for c in meta.columns]
        self.src_idx = [names.index(c.source) for c in self.pair.columns]
        self.funcs = [normalizer(c.data_type, c.column_type) for c in self.pair.columns]
        self.nkey = self.pair.nkey
        self.skeys = [c.source for c in self.pair.columns[: self.nkey]]
        self.tkeys = [c.target for c in self.pair.columns[: self.nkey]]
        self.tcols = [c.target for c in self.pair.columns]
        self.floats = [c.data_type == "float" for c in self.pair.columns]
        self.decode = row_decoder(meta.columns)
        self.types = meta.mysql_types()
        # typed reads of the source: FLOAT as CAST(.. AS DOUBLE), the stored float32 (its text is 6 digits)
        self.all_cols = ", ".join(c.select_expr(qi(c.name)) if c.data_type == "float" else qi(c.name)
                                  for c in meta.columns)
        self.raw_cols = ", ".join(c.select_expr(qi(c.name)) for c in meta.columns)
        self.order = ", ".join(qi(k) for k in meta.pk)
        self._read = None     # a reading connection to the target (unlocked compares)
        self._uniques: list[list[int]] | None = None

    # -- unlocked compare ---------------------------------------------------------------------
    def _reader(self) -> Side:
        if self._read is None:
            from adapters.registry import make_verifier

            reader = make_verifier(self.t.kind, self.target, ()).read_connection()
            self._read = Side(reader, self.target.dialect)
        return self._read

    def differs(self, lo: tuple | None, hi: tuple | None) -> bool:
        """Does the chunk ``lo < key <= hi`` differ now (no lock: a candidate for :meth:`repair`)?"""
        tgt = self._reader()
        swhere, sparams = range_clause(self.src, self.skeys, lo, hi)
        twhere, tparams = range_clause(tgt, self.tkeys, lo, hi)
        scols = [c.source for c in self.pair.columns]
        try:  # the target first: a source read after it is newer than all it had applied (docs/repair.md)
            if self.target.dialect in ("mysql", "mariadb"):
                b = tgt.rows(checksum_sql(tgt, self.tt, self.tcols, twhere), tparams)[0]
                a = self.src.rows(checksum_sql(self.src, self.st, scols, swhere), sparams)[0]
                return tuple(a) != tuple(b)
            b = self._keyed(tgt.rows(f"SELECT {self._tgt_sel(tgt)} FROM {self.tt} WHERE {twhere}", tparams))
            a = self._keyed(self.src.rows(f"SELECT {self._src_sel()} FROM {self.st} WHERE {swhere}", sparams))
            return a != b
        finally:
            _end_read(tgt.conn)

    def _src_sel(self) -> str:
        return select_list(self.src, [c.source for c in self.pair.columns], self.floats)

    def _tgt_sel(self, side: Side) -> str:
        return select_list(side, self.tcols, self.floats)

    def _keyed(self, rows: list) -> dict[tuple, tuple]:
        return keyed(rows, self.funcs, self.nkey)[0]
    def diff(self, lo: tuple | None, hi: tuple | None) -> ChunkCounts:
        """What the chunk differs in now, unlocked (``--dry-run``)."""
        tgt = self._reader()
        swhere, sparams = range_clause(self.src, self.skeys, lo, hi)
        twhere, tparams = range_clause(tgt, self.tkeys, lo, hi)
        try:
            trows = tgt.rows(f"SELECT {self._tgt_sel(tgt)} FROM {self.tt} WHERE {twhere}", tparams)
            srows = self.src.rows(f"SELECT {self._src_sel()} FROM {self.st} WHERE {swhere}", sparams)
            (got, graw), (src, sraw) = keyed(trows, self.funcs, self.nkey), keyed(srows, self.funcs, self.nkey)
            out = ChunkCounts(keys=[])
            for k, row in src.items():
                other = got.get(k)
                if other is None:  # in another of the target's ranges (another collation's order)?
                    other = point_row(tgt, self.tt, self.tkeys, self._tgt_sel(tgt), self.funcs, sraw[k])
                    if other is None:
                        out.missing += 1
                        out.keys.append(k)
                        continue
                if other != row:
                    out.changed += 1
                    out.keys.append(k)
            for k in got:
                if k not in src and point_row(self.src, self.st, self.skeys, self._src_sel(), self.funcs,
                                              graw[k]) is None:
                    out.extra += 1
                    out.keys.append(k)
        finally:
            _end_read(tgt.conn)
        return out

    # -- locked repair ------------------------------------------------------------------------
    def repair(self, snap: Any, writer: Any, mapping: Any, lo: tuple | None, hi: tuple | None) -> ChunkCounts:
        """Make the target's range equal to the snapshot's (see the module docstring); the
        caller holds the lock and commits ``writer``."""
        swhere, sparams = range_clause(self.src, self.skeys, lo, hi)
        twhere, tparams = range_clause(self.tgt, self.tkeys, lo, hi)
        typed = snap.rows(f"SELECT {self.all_cols} FROM {self.st} WHERE {swhere} ORDER BY {self.order}", sparams)
        src = {}
        for i, r in enumerate(typed):
            n = self._norm(r)
            src[n[: self.nkey]] = (i, n, r)
        tsel = self._tgt_sel(self.tgt)
        trows = list(writer.exec(f"SELECT {tsel} FROM {self.tt} WHERE {twhere}", tuple(tparams)).fetchall())
        got = {}
        raw_keys = {}
        for r in trows:
            n = normalize_row(tuple(r), self.funcs)
            got[n[: self.nkey]] = n
            raw_keys[n[: self.nkey]] = tuple(r[: self.nkey])
        out = ChunkCounts(keys=[])
        write_idx: list[int] = []
        changed: list[tuple] = []
        where = " AND ".join(f"{self.tgt.q(c)} = {self.tgt.ph}" for c in self.tkeys)
        for k, (i, n, r) in src.items():
            other = got.get(k)
            if other is None:  # in another of the target's ranges (another collation's order)?
                key = self._src_key(r)
                found = writer.exec(f"SELECT {tsel} FROM {self.tt} WHERE {where}", tuple(key)).fetchall()
                if len(found) == 1:
                    other, raw_keys[k] = normalize_row(tuple(found[0]), self.funcs), tuple(found[0][: self.nkey])
            if other is None:
                out.missing += 1
            elif other != n:
                out.changed += 1
                changed.append(raw_keys[k])
            else:
                continue
            write_idx.append(i)
            out.keys.append(k)
        extra = [k for k in got if k not in src]
        writes: list[tuple] = []   # typed source rows to write, beyond this chunk's own
        deletes: list[tuple] = []  # raw target keys to delete
        for k in extra:
            found = self._point(snap, raw_keys[k])
            if found is None:
                out.extra += 1
                out.keys.append(k)
                deletes.append(raw_keys[k])
            elif self._norm(found) != got[k]:
                writes.append(found)
        raw = []
        if write_idx:
            raw_rows = snap.rows(f"SELECT {self.raw_cols} FROM {self.st} WHERE {swhere} ORDER BY {self.order}",
                                 sparams, raw=True)
            if len(raw_rows) != len(typed):  # same snapshot, same query: cannot happen
                raise RuntimeError(f"{self.t.label}: the snapshot returned {len(typed)} and {len(raw_rows)} rows")
            raw = [raw_rows[i] for i in write_idx]
        typed_writes = [typed[i] for i in write_idx] + writes
        raw += [self._point(snap, self._src_key(r), raw=True) for r in writes]
        more_w, more_d = self._conflicts(snap, writer, typed_writes)
        raw += [self._point(snap, self._src_key(r), raw=True) for r in more_w]
        if self._uniques and self.target.dialect not in ("mysql", "mariadb"):
            # ON CONFLICT (key) checks other unique keys row by row: two rows swapping a value
            # would collide, so the rows being rewritten go first (MySQL's upsert deletes them itself)
            more_d = more_d + changed
        self._delete(writer, deletes + more_d)
        if raw:
            changes = [Change("UPSERT", self.t.meta.database, self.t.meta.table, self.decode(r), None,
                              self.t.meta.pk, self.types) for r in raw]
            writer.apply(mapping, changes)
        out.upserted, out.deleted = len(raw), len(deletes) + max(0, len(more_d) - len(more_w) - len(changed))
        return out

    def _norm(self, row: tuple) -> tuple:
        return normalize_row(tuple(row[i] for i in self.src_idx), self.funcs)

    def _src_key(self, row: tuple) -> tuple:
        return tuple(row[i] for i in self.src_idx[: self.nkey])

    def _point(self, snap: Any, key: tuple, raw: bool = False) -> tuple | None:
        """The source row with this key (values bound as read: the source's own collation decides)."""
        where = " AND ".join(f"{qi(k)} = %s" for k in self.skeys)
        cols = self.raw_cols if raw else self.all_cols
        rows = snap.rows(f"SELECT {cols} FROM {self.st} WHERE {where}", list(key), raw=raw)
        return rows[0] if rows else None

    def _delete(self, writer: Any, keys: list[tuple]) -> None:
        if not keys:
            return
        where = " AND ".join(f"{self.tgt.q(k)} = {self.tgt.ph}" for k in self.tkeys)
        mysql = self.target.dialect in ("mysql", "mariadb")
        if mysql:  # as the full load's upsert deletes: no cascade to the target's children
            writer.exec("SET SESSION foreign_key_checks = 0", ())
        try:
            for k in dict.fromkeys(keys):
                writer.exec(f"DELETE FROM {self.tt} WHERE {where}", tuple(k))
        finally:
            if mysql:
                writer.exec("SET SESSION foreign_key_checks = 1", ())

    # -- unique values moving between rows ------------------------------------------------------
    def _unique_columns(self, writer: Any) -> list[list[int]]:
        """Secondary unique keys of the target table, as positions in the compared columns."""
        if self._uniques is None:
            insp = sa_inspect(writer.conn)
            schema, name = self.pair.target_schema, self.pair.target_table
            found = [ix["column_names"] for ix in insp.get_indexes(name, schema=schema) if ix.get("unique")]
            found += [uc["column_names"] for uc in insp.get_unique_constraints(name, schema=schema)]
            pos = {c.lower(): i for i, c in enumerate(self.tcols)}
            keys = sorted(c.lower() for c in self.tkeys)
            out = []
            for cols in found:
                if sorted(c.lower() for c in cols) == keys or not all(c and c.lower() in pos for c in cols):
                    continue
                idx = [pos[c.lower()] for c in cols]
                if idx not in out:
                    out.append(idx)
            self._uniques = out
        return self._uniques

    def _conflicts(self, snap: Any, writer: Any, rows: list[tuple]) -> tuple[list[tuple], list[tuple]]:
        """Target rows, not among ``rows``, that hold a unique value one of ``rows`` needs: their
        source rows to write too (typed), or their target keys to delete."""
        uniques = self._unique_columns(writer) if rows else []
        if not uniques:
            return [], []
        writes: list[tuple] = []
        deletes: list[tuple] = []
        seen = {self._norm(r)[: self.nkey] for r in rows}
        todo = list(rows)
        for _ in range(MAX_CONFLICT_ROUNDS):
            found: dict[tuple, tuple] = {}
            for idx in uniques:
                for raw_key, norm_key in self._holders(writer, idx, todo):
                    if norm_key not in seen:
                        found[norm_key] = raw_key
            todo = []
            for norm_key, raw_key in found.items():
                seen.add(norm_key)
                row = self._point(snap, raw_key)
                deletes.append(raw_key)  # away first, so the rows to write find their unique values free
                if row is not None:
                    writes.append(row)
                    todo.append(row)
            if not todo:
                break
        return writes, deletes

    def _holders(self, writer: Any, idx: list[int], rows: list[tuple]) -> list[tuple[tuple, tuple]]:
        """(raw key, normalized key) of target rows whose columns ``idx`` equal one of ``rows``'."""
        out = []
        cols = [self.tcols[i] for i in idx]
        one = "(" + " AND ".join(f"{self.tgt.q(c)} = {self.tgt.ph}" for c in cols) + ")"
        ksel = ", ".join(self.tgt.q(k) for k in self.tkeys)
        vals = [tuple(r[self.src_idx[i]] for i in idx) for r in rows]
        vals = [v for v in vals if all(x is not None for x in v)]  # NULLs never conflict
        for a in range(0, len(vals), 200):
            part = vals[a:a + 200]
            params = [x for v in part for x in v]
            for r in writer.exec(f"SELECT {ksel} FROM {self.tt} WHERE {' OR '.join([one] * len(part))}",
                                 tuple(params)).fetchall():
                out.append((tuple(r), normalize_row(tuple(r), self.funcs[: self.nkey])))
        return out

    def close(self) -> None:
        if self._read is not None:
            try:
                self._read.conn.close()
            except Exception:  # noqa: BLE001 - already broken
                pass
            self._read = None


def _end_read(conn: Any) -> None:
    try:
        conn.rollback()  # end the read transaction (PostgreSQL would keep its snapshot)
    except Exception:  # noqa: BLE001 - a broken connection: the next statement says so
        pass
