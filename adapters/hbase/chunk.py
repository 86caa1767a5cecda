"""The HBase chunk apply: a chunk's folded rows (plan.py) -> happybase batches over Thrift1.

:meth:`ChunkApply.send` sends, per table,

1. rows deleted and then written again in this chunk: their row deletes first;
2. everything else in one pass: puts, cell deletes (NULLs) and plain row deletes.

Each pass is one happybase ``Batch`` sent explicitly, split every ``batch_mutations``
mutations. Two passes are needed because Thrift ``mutateRows`` applies a row's puts before
its deletes; and a pass with puts waits until the last delete is 2 ms old (client.py).
The connection is taken from the pool (client.py) at the first send and kept until the
writer closes; one that is broken or idle too long is replaced before use.
"""

from __future__ import annotations

import time

from adapters.hbase import client as pool
from adapters.hbase.config import HbaseTarget
from adapters.hbase.errors import classify, is_transport
from adapters.hbase.plan import Fold, RowOps
from sluice_common.errors import TargetError, TransientError

Mutations = list[tuple[bytes, dict[bytes, bytes], list[bytes]]]  # (row, puts, deleted columns/families)


class ChunkApply:
    """Sends the folded chunks of one writer to one HBase Thrift1 gateway."""

    def __init__(self, target: HbaseTarget):
        self.target = target
        self.pc: pool.PooledConnection | None = None
        self.opened = False  # set by the writer's open(); sending before it is a bug
        self._families: dict[str, list[bytes]] = {}

    def send(self, pending: list[Fold | str]) -> None:
        """Send a chunk's steps in order: a :class:`Fold`, or the name of a table to truncate."""
        for step in pending:
            if isinstance(step, Fold):
                self._send_fold(step)
            else:
                self._truncate(step)

    def release(self) -> None:
        """Give the connection back to the pool (the writer closes)."""
        if self.pc is not None:
            pool.release(self.pc)
            self.pc = None
        self.opened = False

    def _connect(self) -> None:
        try:
            self.pc = pool.acquire(self.target)
        except Exception as e:  # noqa: BLE001 - classified below
            raise classify(e, where=self.target.label, action="connect") from None

    def _conn(self) -> pool.PooledConnection:
        if not self.opened:
            raise TargetError(f"HBase writer for {self.target.label} used before open()")
        pc = self.pc
        if pc is not None and (pc.broken or time.monotonic() - pc.last_used >= self.target.idle_seconds):
            pc.broken = True
            pool.release(pc)
            self.pc = pc = None
        if pc is None:
            self._connect()
            pc = self.pc
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
                if not is_transport(e) or self.pc is None:
                    raise
                self.pc.broken = True
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
        if self.pc is not None and is_transport(e):
            self.pc.broken = True
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
