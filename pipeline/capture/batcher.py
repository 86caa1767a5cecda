"""Transaction-aligned batching into the change log (its capture role, ``CaptureLog``).

A batch holds whole transactions, up to ``store.batch.maxRows`` rows and about
``maxBytes`` bytes (estimated from event sizes), or what arrived within ``maxSeconds``.
Its ``end`` is the position after its last complete transaction. A transaction larger
than the limits is split: each full part is stored as its own batch marked
``split=True`` whose end is the transaction's *start* plus ``skipEvents`` (the number of
its rows events already stored), so a restart skips exactly those and loses nothing.
A ``ROLLBACK TO`` savepoint drops what the open transaction collected since that savepoint. A
transaction that ends in ``ROLLBACK`` (the binlog keeps one that wrote non-transactional tables)
keeps none of its rows: each table they wrote gets a refusal record instead, since which of the rows
the source kept (those of non-transactional tables) the binlog does not say.
"""

from __future__ import annotations

import json
import time
from typing import Any

from pipeline.config import BatchLimits
from pipeline.state.waivers import ROLLED_BACK
from pipeline.store import CaptureLog
from sluice_common.errors import SourceError
from sluice_common.logs import get_logger

from .dml import LineEncoder, partial_json, rows_json
from .items import WHOLE, Advance, Begin, Commit, Item, RollbackTo, Rows, Savepoint, Statement, Tick
from .position import Position

log = get_logger("capture")
EMPTY_BATCH_FACTOR = 10  # an empty (position-only) batch at most every maxSeconds * this


def _nothing() -> None:
    pass


def _same(p: Position) -> Position:
    return p


class Batcher:
    """Feed reader items in order; batches are appended to ``store`` as they fill up."""

    def __init__(self, store: CaptureLog, limits: BatchLimits, start: Position, clock: Any = time.monotonic,
                 sink: Any = None, idle: Any = None, stamp: Any = None):
        """``sink(lines, rows=, ddl=, start=, end=, split=)`` stores a batch; by default
        ``store.append_lines`` (synchronously; the runner passes an ``AsyncAppender``).
        ``idle()``: called on a heartbeat when nothing is pending (default ``store.keep_alive``:
        the Kafka store restates its position before retention can delete its newest record).
        ``stamp(position)``: what every stored ``end`` becomes (the runner adds the server and the
        file's creation time, :mod:`identity`); called once per batch."""
        self.store, self.limits, self.clock = store, limits, clock
        self.sink = sink or store.append_lines
        # with a sink of its own (another thread), the store is not called from this one
        self.idle = idle or (store.keep_alive if sink is None else _nothing)
        self.stamp = stamp or _same
        self.enc = LineEncoder()
        self.last_end = start
        self.next_id = start.next_id
        self.batch: list[bytes] = []
        self.batch_ddl: list[int] = []
        self.batch_rows = self.batch_bytes = self.batch_store_rows = 0
        self.batch_end: Position | None = None
        self.batch_since = self.last_append = clock()
        self.tx: list[bytes] = []
        self.tx_ddl: list[int] = []
        self.tx_rows = self.tx_bytes = self.tx_store_rows = 0
        self.tx_begin: Begin | None = None
        self.tx_event_no = 0
        self.marks: dict[str, tuple | None] = {}  # savepoints of the open transaction (None: stored already)
        self.resumed_split = start.skip_events > 0  # the first transaction is a split one resumed
        # totals
        self.batches = self.rows = self.transactions = 0

    # ---- feeding ---------------------------------------------------------------------

    def feed(self, item: Item) -> None:
        cls = type(item)
        if cls is Rows:
            self._rows(item)  # type: ignore[arg-type]
        elif cls is Commit:
            self._commit(item)  # type: ignore[arg-type]
        elif cls is Begin:
            self.tx_begin = item  # type: ignore[assignment]
            self.tx_event_no = 0
            # the transaction's start, as a savepoint (None: a split transaction resumed, its start is stored)
            self.marks = {WHOLE: None if self.resumed_split else (0, 0, 0, 0, 0, self.next_id)}
        elif cls is Statement:
            s: Statement = item  # type: ignore[assignment]
            line = self.enc.statement(s.kind, s.database, s.table, s.is_ddl, s.sql, s.ts, _now_ms(),
                                      self.tx_begin.gtid if self.tx_begin else None, s.logfile, s.logpos,
                                      self.next_id, s.session)
            self.next_id += 1
            if s.is_ddl or s.dml:  # a barrier (the job reads these records on the driver)
                self.tx_ddl.append(len(self.tx))
                self.tx_store_rows += 1
            self.tx.append(line)
            self.tx_rows += 1
            self.tx_bytes += len(line)
        elif cls is Tick:
            self._on_idle()
        elif cls is Advance:
            a: Advance = item  # type: ignore[assignment]
            if not self.tx and self.tx_begin is None:  # between transactions only (the framer's promise)
                self.batch_end = Position(a.logfile, a.logpos, a.gtid, self.next_id, xa=a.xa)
        elif cls is Savepoint:
            self.marks[item.name] = None if item.stored else (  # type: ignore[union-attr]
                len(self.tx), len(self.tx_ddl), self.tx_rows, self.tx_bytes, self.tx_store_rows, self.next_id)
        elif cls is RollbackTo:
            self._rollback_to(item)  # type: ignore[arg-type]

    def _rollback_to(self, r: RollbackTo) -> None:
        tables = self._tx_tables() if r.name == WHOLE else []
        mark = self.marks.get(r.name, False)
        if mark is False:
            raise SourceError(f"{r.logfile}:{r.logpos}: ROLLBACK TO savepoint `{r.name}`, which the transaction "
                              "did not set (capture started inside it?)",
                              hint="capture cannot tell which rows the rollback undid; report this binlog")
        if mark is None:
            raise SourceError(f"{r.logfile}:{r.logpos}: ROLLBACK TO savepoint `{r.name}` undoes rows of a transaction "
                              "larger than store.batch.maxRows/maxBytes that capture already stored as a split batch",
                              hint="raise store.batch.maxRows and maxBytes above this transaction's size, then run "
                              "sluice store recapture --from the split batch")
        n_tx, n_ddl, rows, nbytes, store_rows, next_id = mark
        del self.tx[n_tx:]
        del self.tx_ddl[n_ddl:]
        self.tx_rows, self.tx_bytes, self.tx_store_rows, self.next_id = rows, nbytes, store_rows, next_id
        later = list(self.marks)[list(self.marks).index(r.name) + 1:]
        for name in later:  # savepoints set after this one are gone
            del self.marks[name]
        for db, table in tables:  # a refusal of each table the rolled-back transaction's rows wrote
            self.feed(Statement("QUERY", db, table, False, ROLLED_BACK, r.logfile, r.logpos,
                                self.tx_begin.ts if self.tx_begin else 0, dml=True))

    def _tx_tables(self) -> list[tuple[str, str]]:
        """The tables the open transaction wrote, by rows or by statements (a rare path: its lines are
        parsed)."""
        out: dict[tuple[str, str], None] = {}
        for line in self.tx:
            rec = json.loads(line + b"}")  # lines are open: the store adds batchId and seq
            if not rec.get("isDdl"):  # rows, and statement-format writes (refusals themselves)
                out[(rec.get("database") or "", rec.get("table") or "")] = None
        return list(out)

    def _rows(self, r: Rows) -> None:
        codec = r.codec
        n = r.nrows
        data, old = r.data_json, r.old_json
        if data is None:
            data, old = rows_json(r.kind, r.rows)
        line = self.enc.rows(r.kind, codec, data, old, r.sql, r.ts, _now_ms(),
                             self.tx_begin.gtid if self.tx_begin else None, r.logfile, r.logpos, self.next_id)
        if r.fk_off:  # the source applied these rows without foreign key checks: so does the target
            line += b',"fkChecks":false'
        if r.partial is not None:  # the driver checks each group's use of it (pipeline/job/refusals.py)
            line += partial_json(*r.partial)
            self.tx_ddl.append(len(self.tx))
        self.next_id += 1
        self.tx.append(line)
        self.tx_event_no = r.event_no
        self.tx_rows += n
        self.tx_store_rows += n
        self.tx_bytes += len(line)
        lim = self.limits
        if self.batch_rows + self.tx_rows >= lim.maxRows or self.batch_bytes + self.tx_bytes >= lim.maxBytes:
            if self.batch:
                self._flush()
            if self.tx_rows >= lim.maxRows or self.tx_bytes >= lim.maxBytes:
                self._flush_split()

    def _commit(self, c: Commit) -> None:
        if self.tx:
            base = len(self.batch)
            self.batch_ddl.extend(base + i for i in self.tx_ddl)
            self.batch.extend(self.tx)
            self.batch_rows += self.tx_rows
            self.batch_bytes += self.tx_bytes
            self.batch_store_rows += self.tx_store_rows
            self._clear_tx()
        self.transactions += 1
        self.tx_begin = None
        self.resumed_split = False
        self.batch_end = Position(c.logfile, c.logpos, c.gtid, self.next_id, xa=c.xa)
        self.marks = {}
        lim = self.limits
        now = self.clock()
        if self.batch_rows >= lim.maxRows or self.batch_bytes >= lim.maxBytes:
            self._flush()
        elif now - self.batch_since >= lim.maxSeconds:
            if self.batch or now - self.last_append >= lim.maxSeconds * EMPTY_BATCH_FACTOR:
                self._flush()

    def _on_idle(self) -> None:
        now = self.clock()
        if self.tx or self.tx_begin is not None:
            return
        if self.batch_end is None:  # nothing since the last batch: the source is idle
            self.idle()
            return
        if self.batch and now - self.batch_since >= self.limits.maxSeconds:
            self._flush()
        elif not self.batch and now - self.last_append >= self.limits.maxSeconds * EMPTY_BATCH_FACTOR:
            self._flush()

    def finish(self) -> None:
        """Store what is complete (end of ``--once``); an open transaction stays unstored."""
        if self.batch_end is not None and (self.batch or self.stamp(self.batch_end) != self.last_end):
            self._flush()

    # ---- writing ---------------------------------------------------------------------

    def _clear_tx(self) -> None:
        self.tx = []
        self.tx_ddl = []
        self.tx_rows = self.tx_bytes = self.tx_store_rows = 0

    def _append(self, lines: list[bytes], rows: int, store_rows: int, ddl: list[int], end: Position,
                split: bool) -> None:
        end = self.stamp(end)
        self.sink(lines, rows=store_rows, ddl=tuple(ddl), start=self.last_end.to_dict(), end=end.to_dict(),
                  split=split)
        self.last_end = end
        self.batches += 1
        self.rows += rows
        self.last_append = self.clock()
        log.debug("batch handed to the store", records=len(lines), rows=rows, split=split, end=end.text())

    def _flush(self) -> None:
        """Append the complete transactions collected so far as one batch."""
        if self.batch_end is None:
            return
        self._append(self.batch, self.batch_rows, self.batch_store_rows, self.batch_ddl, self.batch_end,
                     split=False)
        self.batch = []
        self.batch_ddl = []
        self.batch_rows = self.batch_bytes = self.batch_store_rows = 0
        self.batch_end = None
        self.batch_since = self.clock()

    def _flush_split(self) -> None:
        """Append the stored-so-far part of the open (too large) transaction, marked split."""
        b = self.tx_begin
        if b is None or not self.tx:
            return
        end = Position(b.logfile, b.logpos, b.gtid_before, self.next_id, skip_events=self.tx_event_no,
                       split_gtid=b.gtid, xa=b.xa)
        self._append(self.tx, self.tx_rows, self.tx_store_rows, self.tx_ddl, end, split=True)
        self._clear_tx()
        self.marks = dict.fromkeys(self.marks)  # what they mark is stored: a ROLLBACK TO them is refused
        self.batch_since = self.clock()


def _now_ms() -> int:
    return int(time.time() * 1000)
