"""The one transaction framer: decoder events in, capture items out.

Both decoders (:mod:`events`) feed this; everything about transactions lives here and only here:

* **Groups.** A GTID event or ``BEGIN`` opens a transaction; an XID, ``COMMIT``, the ``ROLLBACK``
  written for non-transactional changes, or an XA PREPARE closes it; a DDL statement outside one
  is a transaction of its own (MariaDB's standalone GTID flag, or a GTID with no ``BEGIN`` on MySQL).
* **Statements.** A write the binlog carries as SQL text (a session with
  ``binlog_format=STATEMENT``, ``LOAD DATA``, ...) becomes one ``QUERY`` record per stored table it
  may write (:mod:`statements`), listed with the batch's barriers: the groups that map such a
  table stop there by name (``pipeline/job/refusals.py``); statements that write no rows are dropped.
* **Savepoints.** ``SAVEPOINT x`` and ``ROLLBACK TO x`` inside a transaction become
  :class:`~.items.Savepoint`/:class:`~.items.RollbackTo` items: the batcher drops the rows events
  after the savepoint (MariaDB logs the rows a transaction rolled back to a savepoint, followed by
  the ``ROLLBACK TO``, when the transaction also wrote a non-transactional table).
* **XA.** A prepared XA transaction's rows are held (:mod:`xa`) until its ``XA COMMIT`` (then
  they are emitted as one transaction there, in commit order) or ``XA ROLLBACK`` (dropped); what is
  held is part of every position, so a restart between PREPARE and COMMIT re-reads it.
  ``XA ... ONE PHASE`` is an ordinary transaction.
* **Refusals.** Events that may carry changes capture cannot read stop capture by name
  (:func:`~.items.refuse_event`); events of no consequence (INTVAR, RAND, USER_VAR, checkpoints,
  previous-GTID lists, ...) are ignored.
* **Resume and stop.** The first ``skip`` rows events of the first transaction are already
  stored (a split transaction); ``stop`` (``--once``) ends the stream at the first transaction
  boundary at or after it. Past a rotate, the next file's header (format description, GTID list,
  checkpoint) is no transaction: when nothing follows it before a heartbeat or the end of a
  ``--once`` stream, an :class:`~.items.Advance` moves the resume position past it, so an idle
  source whose binlog just rotated is not reported as not captured.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from sluice_common.errors import SourceError

from .dml import classify_ddl
from .events import (
    FL_COMPLETED_XA,
    FL_PREPARED_XA,
    FL_STANDALONE,
    ROW_KINDS,
    AnnotateEv,
    EndEv,
    FormatEv,
    GtidEv,
    HeartbeatEv,
    OtherEv,
    QueryEv,
    RawRowsEv,
    RotateEv,
    RowsEv,
    ServerErrorEv,
    SkippedRowsEv,
    TableMapEv,
    XaPrepareEv,
    XidEv,
    xid_text,
)
from .items import (
    HEADER_TYPES,
    WHOLE,
    Advance,
    Begin,
    Commit,
    RollbackTo,
    Rows,
    Savepoint,
    Statement,
    Tick,
    refuse_event,
    server_error,
)
from .position import binlog_key
from .statements import statement_writes
from .statusvars import session_of
from .xa import XaBook, parse_xa_statement, savepoint_name

if TYPE_CHECKING:
    from .reader import BinlogReader

TAGGED_GTID = 42  # MySQL 8.3+ GTID_TAGGED_LOG_EVENT (items.IGNORED_TYPES)
_START_TX = re.compile(r"\s+START\s+TRANSACTION\s*$", re.I)
_TEMPORARY = re.compile(r"^\s*(?:CREATE|DROP)\s+(?:OR\s+REPLACE\s+)?TEMPORARY\b", re.I)


class Framer:
    """Turns one dump stream's events into capture items (see the module docstring)."""

    def __init__(self, reader: BinlogReader, xa: XaBook):
        self.r = reader
        self.xa = xa
        self.logfile = reader.start.logfile
        self.skip = reader.start.skip_events
        stop = reader.opts.stop_at
        self.stop_key = binlog_key(stop.logfile, stop.logpos) if stop is not None else None
        self.server_version = ""

    def run(self, batches: Iterable[list]) -> Iterator:
        """Items from batches of events, in order (the loop is one function: it is the hot path)."""
        r, xa, gtids = self.r, self.xa, self.r.gtids
        codecs = r.codecs_by_id
        first_tx = True
        tx_open = explicit = False
        tx_gtid: str | None = None
        tx_events = 0
        hold: list | None = None   # the items of an XA transaction being prepared (held, not emitted)
        origin: dict = {}          # where the open transaction's group starts (for a held XA transaction)
        sql = ""
        stop_key = self.stop_key
        header = 0  # > 0: the stream is past a rotate and the next file's header, up to here (nothing after)
        for events in batches:
            r.events += len(events)
            for ev in events:
                cls = type(ev)
                if cls is RowsEv or cls is RawRowsEv or cls is SkippedRowsEv:
                    ts, start = ev.ts, ev.start
                    if ts:
                        r.last_ts = ts
                    if not tx_open:
                        tx_open = explicit = True
                        tx_gtid = None
                        yield Begin(None, self.logfile, start, gtids.text(), ts * 1000, xa.held())
                    tx_events += 1
                    if cls is SkippedRowsEv or (first_tx and tx_events <= self.skip):
                        continue
                    codec = codecs.get(ev.table_id)
                    if codec is None:
                        continue
                    item = r.rows_item(ev, codec, ROW_KINDS[ev.kind], sql, self.logfile, tx_events)
                    if hold is not None:
                        hold.append(item)
                    else:
                        yield item
                elif cls is XidEv or cls is QueryEv or cls is XaPrepareEv:
                    ts, start, nxt = ev.ts, ev.start, ev.next
                    if ts:
                        r.last_ts = ts
                    if cls is XaPrepareEv:  # the end of an XA transaction's PREPARE group
                        if not ev.one_phase:
                            if hold is None:
                                raise SourceError(f"{self.logfile}:{start}: XA PREPARE of {xid_text(ev.xid)} ends "
                                                  "a transaction that did not start as an XA transaction",
                                                  hint="this binlog is not one capture understands; report it")
                            xa.prepare(ev.xid, hold, origin)
                        elif hold:  # XA COMMIT ... ONE PHASE: commit what was collected
                            yield from hold
                    elif cls is QueryEv:
                        q = ev.query.decode("utf-8", "backslashreplace").strip()
                        head = q[:12].upper()
                        if head.startswith("BEGIN") or head.startswith("XA START") or head.startswith("XA BEGIN"):
                            if not tx_open:
                                tx_gtid = None
                                origin = self._origin(start)
                                yield Begin(None, self.logfile, start, gtids.text(), ts * 1000, xa.held())
                            tx_open = explicit = True
                            if head[0] == "X":  # MySQL: an XA transaction being prepared
                                hold = []
                            continue
                        is_end = head.startswith("COMMIT") or head == "ROLLBACK"
                        if head == "ROLLBACK" and hold is None:  # kept for its non-transactional rows
                            yield RollbackTo(WHOLE, self.logfile, start)
                        schema = ev.schema.decode("utf-8", "replace")
                        if explicit and not is_end:
                            found = self._in_tx(q, head, schema, start, ts, first_tx and tx_events < self.skip,
                                                ev.status)
                            if hold is not None:
                                hold.extend(found)
                            else:
                                yield from found
                            continue
                        if not is_end:  # DDL, or an XA COMMIT/ROLLBACK: a transaction of its own
                            if not tx_open:
                                tx_gtid = None
                                yield Begin(None, self.logfile, start, gtids.text(), ts * 1000, xa.held())
                            decided = parse_xa_statement(q)
                            if decided is None:
                                yield from self._statement(q, schema, start, ts, ev.status)
                            elif decided[0] == "COMMIT":
                                yield from self._committed(xa.decide(decided[1], f"{self.logfile}:{start}", q),
                                                           start, self.skip if first_tx else 0)
                            else:  # its rows are dropped (a ROLLBACK of one prepared before the start: none)
                                xa.drop(decided[1])
                    if tx_gtid:
                        gtids.add(tx_gtid)
                    r.logfile, r.logpos, header = self.logfile, nxt, 0
                    yield Commit(self.logfile, nxt, gtids.text(), ts * 1000, xa.held())
                    tx_open = explicit = False
                    hold = None
                    tx_gtid, tx_events, sql, first_tx = None, 0, "", False
                    if stop_key is not None and binlog_key(self.logfile, nxt) >= stop_key:
                        return
                elif cls is GtidEv:
                    ts = ev.ts
                    if ts:
                        r.last_ts = ts
                    tx_gtid = ev.gtid
                    tx_open = True
                    origin = self._origin(ev.start)
                    explicit = ev.mariadb and not ev.flags & FL_STANDALONE
                    if ev.flags & FL_PREPARED_XA:
                        hold = []
                    elif ev.flags & FL_COMPLETED_XA:
                        explicit = False  # the XA COMMIT/ROLLBACK statement follows
                    yield Begin(tx_gtid, self.logfile, ev.start, gtids.text(), ts * 1000, xa.held())
                elif cls is TableMapEv:
                    r.table_map(ev)
                elif cls is AnnotateEv:
                    sql = ev.sql.decode("utf-8", "replace")
                elif cls is RotateEv:
                    self.logfile = ev.file
                    header = 0
                elif cls is HeartbeatEv:
                    if ev.ts:
                        r.last_ts = ev.ts
                    if not tx_open:
                        if header:
                            yield self._advance(header, gtids.text())
                            header = 0
                        if stop_key is not None and binlog_key(r.logfile, r.logpos) >= stop_key:
                            return
                    yield Tick(None)
                elif cls is FormatEv:
                    self.server_version = ev.server_version
                    r.on_format(ev, self.logfile)
                    if not tx_open:
                        header = self._past(ev.next, header)
                elif cls is OtherEv:
                    refuse_event(ev.type_code, self.logfile, ev.start)
                    if ev.type_code == TAGGED_GTID:  # framed by its BEGIN/XID; its GTID is not kept
                        gtids.gtid_partial = True
                    if not tx_open and ev.type_code in HEADER_TYPES:
                        header = self._past(ev.next, header)
                elif cls is EndEv:
                    if header and not tx_open:
                        yield self._advance(header, gtids.text())
                    return
                elif cls is ServerErrorEv:
                    raise server_error(ev.code, ev.message, r.start)
                else:  # pragma: no cover - an event class this loop does not know
                    raise SourceError(f"unknown decoder event {cls.__name__}")

    def _past(self, nxt: int, header: int) -> int:
        """``header`` moved to ``nxt`` (the offset after a header event of the current file), when
        that is past the resume position (an artificial format description at a dump's start is not)."""
        r = self.r
        if nxt > header and binlog_key(self.logfile, nxt) > binlog_key(r.logfile, r.logpos):
            return nxt
        return header

    def _advance(self, header: int, gtid: str | None) -> Advance:
        """The resume position moves past a rotate and the next file's header (nothing after them):
        stored, ``status`` does not count those bytes as not captured (issue 38 point 4)."""
        r = self.r
        r.logfile, r.logpos = self.logfile, header
        return Advance(self.logfile, header, gtid, self.xa.held())

    def _committed(self, held: list, start: int, skip: int) -> Iterator:
        """A prepared XA transaction's items at its XA COMMIT (at ``start``): that is where the source
        made its rows visible, so they carry the COMMIT's position (a waiver up to a position must not
        cover rows committed after it). Rows events are numbered again as one transaction; ``skip``:
        the first rows events are stored already (a split resumed), and so is what came among them."""
        n = 0
        for item in held:
            cls = type(item)
            if cls is Rows:
                n += 1
                item.event_no = n
                if n <= skip:
                    continue
            elif n < skip:  # among the stored rows events: already applied (a savepoint: cannot be undone)
                if cls is Savepoint:
                    item.stored = True
                    yield item
                continue
            if cls is Rows or cls is Statement:
                item.logfile, item.logpos = self.logfile, start
            yield item

    def _in_tx(self, q: str, head: str, schema: str, start: int, ts: int, skipping: bool, status: bytes) -> list:
        """The items for a statement inside a transaction (``skipping``: inside the part of a split
        transaction that is stored already: a savepoint there cannot be undone any more, a ROLLBACK TO
        or a statement there was dealt with when that part was stored)."""
        if head.startswith("SAVEPOINT"):
            return [Savepoint(savepoint_name(q[len("SAVEPOINT"):]), self.logfile, start, skipping)]
        if skipping:
            return []
        if head.startswith("ROLLBACK TO"):
            return [RollbackTo(savepoint_name(q), self.logfile, start)]
        ddl = self._ddl_in_tx(q, schema, start, ts, status)
        if ddl is not None:
            return ddl
        return self._dml_statements(q, schema, start, ts)

    def _ddl_in_tx(self, q: str, schema: str, start: int, ts: int, status: bytes) -> list | None:
        """DDL logged inside a transaction: MySQL 8.0.21+ logs ``CREATE TABLE ... SELECT`` (atomic
        DDL) as ``CREATE TABLE ... START TRANSACTION`` followed by the rows; MariaDB logs it ahead of
        its rows in one group. The table's DDL, stored as such (the statement without the trailing
        ``START TRANSACTION``); None when ``q`` is not table DDL (temporary tables are session state)."""
        if _TEMPORARY.match(q):
            return None
        dkind, db, table, is_ddl = classify_ddl(q, schema)
        if not is_ddl or dkind == "QUERY":
            return None
        if not (self.r.included(db, table) if table else self.r.included(db, "")):
            return []
        return [Statement(dkind, db, table, True, _START_TX.sub("", q), self.logfile, start, ts * 1000,
                          session=session_of(status))]

    def _dml_statements(self, q: str, schema: str, start: int, ts: int) -> list:
        """A statement-format write: one record per stored table it may write (its groups refuse it)."""
        return [Statement("QUERY", db, table, False, q, self.logfile, start, ts * 1000, dml=True)
                for db, table in statement_writes(q, schema) if not table or self.r.included(db, table)]

    def _statement(self, q: str, schema: str, start: int, ts: int, status: bytes) -> Iterator:
        """A statement that is a transaction of its own: DDL, or a statement-format write."""
        dkind, db, table, is_ddl = classify_ddl(q, schema)
        if not is_ddl:
            yield from self._dml_statements(q, schema, start, ts)
        elif self.r.included(db, table) if table else self.r.included(db, ""):
            yield Statement(dkind, db, table, is_ddl, q, self.logfile, start, ts * 1000, session=session_of(status))

    def _origin(self, start: int) -> dict:
        """Where a transaction's group starts: a restart reads a held XA transaction from there."""
        return {"logfile": self.logfile, "logpos": start, "gtid": self.r.gtids.text()}
