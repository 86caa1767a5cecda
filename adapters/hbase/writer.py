"""The HBase :class:`Writer`: canal hbaseMapping changes -> happybase batches over Thrift1.

``apply`` only folds a chunk's changes per row (rows.py); ``commit`` sends them:

1. rows deleted and then written again in this chunk: their row deletes first;
2. everything else in one pass: puts, cell deletes (NULLs) and plain row deletes.

Each pass is one happybase ``Batch`` sent explicitly, split every ``batch_mutations``
mutations. Two passes are needed because Thrift ``mutateRows`` applies a row's puts before
its deletes; and a pass with puts waits until the last delete is 2 ms old (connection.py).

HBase has no transactions: a chunk that fails half-way stays half-applied. The job then
retries the chunk or, after the retries, fails the partition without acking the batch;
the next run replays it. Replays converge because every mutation is idempotent and keyed
by row key (a put of the same value, a delete of the same cell or row), and the changes of
one row are replayed in source order, so the last change of each cell wins again.
"""

from __future__ import annotations

import time
from typing import Any

from adapters.base import ApplyStats, Change, Writer
from adapters.hbase import connection as pool
from adapters.hbase.config import HbaseTarget
from adapters.hbase.errors import classify, is_transport, short_message
from adapters.hbase.rows import Fold, MappingPlan, RowOps
from pipeline.errors import TargetError, TargetMismatchError, TransientError

Mutations = list[tuple[bytes, dict[bytes, bytes], list[bytes]]]  # (row, puts, deleted columns/families)


class HbaseWriter(Writer):
    """Writes the changes of its hbaseMappings to one HBase Thrift1 gateway."""

    def __init__(self, target: HbaseTarget, mappings: tuple[Any, ...]):
        super().__init__(target, mappings)
        self.target: HbaseTarget = target
        self._pc: pool.PooledConnection | None = None
        self._plans: dict[int, tuple[Any, MappingPlan]] = {}
        self._pending: list[Fold | str] = []  # a Fold, or the name of a table to truncate
        self._pending_stats = ApplyStats()
        self._families: dict[str, list[bytes]] = {}
        self._opened = False

    # -- life cycle ---------------------------------------------------------------------------
    def check(self) -> None:
        """Thrift answers; every mapping's table exists (or is created) with its families."""
        plans = [self._plan(m) for m in self.mappings]  # PHOENIX is refused before connecting
        try:
            pc = pool.connect(self.target)
            tables = {t.decode() for t in pc.conn.tables()}
        except Exception as e:  # noqa: BLE001 - any failure here means "cannot reach"
            raise TargetError(f"HBase Thrift server {self.target.label} is not reachable: {short_message(e)}",
                              hint="start the gateway ('hbase thrift start -p <port>') or fix hosts / thrift.host "
                                   "/ thrift.port of the hbase outerAdapter") from None
        try:
            for plan in plans:
                self._ensure_table(pc, plan, tables)
        finally:
            pc.close()

    def _ensure_table(self, pc: pool.PooledConnection, plan: MappingPlan, tables: set[str]) -> None:
        spec, name = plan.spec, plan.table
        if name not in tables:
            if not spec.autoCreateTable:
                fams = ", ".join(f"'{f}'" for f in spec.families)
                raise TargetMismatchError(f"HBase table {name} (mapping {plan.file}, hbaseMapping.hbaseTable) does "
                                          f"not exist on {self.target.label}",
                                          hint=f"create it in the HBase shell: create '{name}', {fams} - or set "
                                          "autoCreateTable: true in the mapping")
            try:
                pc.conn.create_table(name, {f: {"max_versions": 1} for f in spec.families})
            except Exception as e:  # noqa: BLE001 - AlreadyExists: someone else created it
                if type(e).__name__ != "AlreadyExists":
                    raise classify(e, where=self.target.label, action="create the table", table=name) from None
            tables.add(name)
        try:
            have = {f.decode().rstrip(":") for f in pc.conn.table(name).families()}
        except Exception as e:  # noqa: BLE001
            raise classify(e, where=self.target.label, action="read the column families", table=name) from None
        missing = [f for f in spec.families if f not in have]
        if missing:
            alters = "; ".join(f"alter '{name}', NAME => '{f}'" for f in missing)
            raise TargetMismatchError(f"HBase table {name} (mapping {plan.file}, hbaseMapping.columns) has no column "
                                      f"famil{'y' if len(missing) == 1 else 'ies'} {', '.join(missing)} "
                                      f"(it has: {', '.join(sorted(have)) or 'none'})",
                                      hint=f"in the HBase shell: {alters} (Thrift1 cannot alter tables)")

    def open(self) -> None:
        """Begin. The pooled connection is taken at the first send, inside ``commit``: a gateway
        that is down then fails the chunk with a TransientError the job retries with backoff."""
        self._opened = True

    def _connect(self) -> None:
        try:
            self._pc = pool.acquire(self.target)
        except Exception as e:  # noqa: BLE001 - classified below
            raise classify(e, where=self.target.label, action="connect") from None

    def close(self) -> None:
        if self._pc is not None:
            pool.release(self._pc)
            self._pc = None
        self._opened = False

    # -- applying -----------------------------------------------------------------------------
    def _plan(self, mapping: Any) -> MappingPlan:
        hit = self._plans.get(id(mapping))
        if hit is None or hit[0] is not mapping:
            hit = self._plans[id(mapping)] = (mapping, MappingPlan(mapping))
        return hit[1]

    def apply(self, mapping: Any, changes: list[Change]) -> None:
        plan = self._plan(mapping)
        for change in changes:
            if change.kind == "TRUNCATE":
                self._pending.append(plan.table)
                continue
            if not self._pending or not isinstance(self._pending[-1], Fold):
                self._pending.append(Fold())
            plan.fold(self._pending[-1], change, self._pending_stats)  # type: ignore[arg-type]

    def commit(self) -> None:
        for step in self._pending:
            if isinstance(step, Fold):
                self._send_fold(step)
            else:
                self._truncate(step)
        self._pending.clear()
        self.stats.add(self._pending_stats)
        self._pending_stats = ApplyStats()

    def rollback(self) -> None:
        """Forget the unsent chunk (what was already sent stays: HBase has no transactions)."""
        self._pending.clear()
        self._pending_stats = ApplyStats()

    # -- sending ------------------------------------------------------------------------------
    def _conn(self) -> pool.PooledConnection:
        if not self._opened:
            raise TargetError(f"HBase writer for {self.target.label} used before open()")
        pc = self._pc
        if pc is not None and (pc.broken or time.monotonic() - pc.last_used >= self.target.idle_seconds):
            pc.broken = True
            pool.release(pc)
            self._pc = pc = None
        if pc is None:
            self._connect()
            pc = self._pc
            assert pc is not None
        return pc

    def _send_fold(self, fold: Fold) -> None:
        by_table: dict[str, list[tuple[bytes, RowOps]]] = {}
        for (table, row), ops in fold.rows.items():
            by_table.setdefault(table, []).append((row, ops))
        for table, rows in by_table.items():
            fams = None
            first: Mutations = []
            rest: Mutations = []
            for row, ops in rows:
                cells = ops.cells
                has_null = None in cells.values()
                puts = {c: v for c, v in cells.items() if v is not None} if has_null else cells
                if ops.reset:
                    fams = fams if fams is not None else self._table_families(table)
                    (first if puts else rest).append((row, {}, fams))
                    if puts:
                        rest.append((row, puts, []))
                else:
                    rest.append((row, puts, [c for c, v in cells.items() if v is None] if has_null else []))
            if first:
                self._send(table, first)
            self._send(table, rest)

    def _send(self, table: str, mutations: Mutations) -> None:
        if not mutations:
            return
        has_puts = any(p for _, p, _ in mutations)
        has_deletes = any(d for _, _, d in mutations)
        if has_puts:
            pool.settle(self.target)
        try:
            try:
                self._send_once(table, mutations)
            except Exception as e:  # noqa: BLE001 - a socket the server dropped: one fresh try
                if not is_transport(e) or self._pc is None:
                    raise
                self._pc.broken = True
                self._send_once(table, mutations)  # idempotent: same puts/deletes again
        except Exception as e:  # noqa: BLE001 - classified below
            raise self._failure(e, table, f"write {len(mutations)} rows", mutations[0][0]) from None
        finally:
            if has_deletes:
                pool.note_delete(self.target)

    def _send_once(self, table: str, mutations: Mutations) -> None:
        limit = self.target.batch_mutations
        pc = self._conn()
        batch, count = pc.conn.table(table).batch(), 0
        try:
            for row, puts, deletes in mutations:
                if puts:
                    batch.put(row, puts)
                if deletes:
                    batch.delete(row, deletes)
                count += len(puts) + len(deletes)
                if count >= limit:
                    batch.send()
                    count = 0
            batch.send()
        finally:
            pc.touch()

    def _table_families(self, table: str) -> list[bytes]:
        fams = self._families.get(table)
        if fams is None:
            try:
                names = self._conn().conn.table(table).families()
            except Exception as e:  # noqa: BLE001
                raise self._failure(e, table, "read the column families", None) from None
            fams = self._families[table] = [f.rstrip(b":") if isinstance(f, bytes) else f.encode() for f in names]
        return fams

    def _truncate(self, table: str) -> None:
        """TRUNCATE of the source table: delete every row of the HBase table (the table,
        its families and settings stay)."""
        fams = self._table_families(table)
        pc = self._conn()
        try:
            keys = [k for k, _ in pc.conn.table(table).scan(filter=b"FirstKeyOnlyFilter() AND KeyOnlyFilter()",
                                                            batch_size=1000)]
        except Exception as e:  # noqa: BLE001
            raise self._failure(e, table, "list rows to truncate", None) from None
        pc.touch()
        self._send(table, [(k, {}, fams) for k in keys])

    def _failure(self, e: Exception, table: str, action: str, row: bytes | None) -> Exception:
        if self._pc is not None and is_transport(e):
            self._pc.broken = True
        err = classify(e, where=self.target.label, action=action, table=table, row=row)
        if isinstance(err, TransientError) and not is_transport(e) and self._table_missing(table):
            return TargetError(f"HBase table {table} does not exist on {self.target.label} (dropped while "
                               "syncing?)", hint="recreate it with the mapping's families, or set autoCreateTable: "
                                                 "true and run sync again")
        return err

    def _table_missing(self, table: str) -> bool:
        try:
            return table.encode() not in self._conn().conn.tables()
        except Exception:  # noqa: BLE001 - cannot tell: keep the original error
            return False
