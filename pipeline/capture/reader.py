"""The binlog reader: the native stream or python-mysql-replication behind typed items.

``BinlogReader`` yields, in binlog order: ``Begin`` (a transaction starts), ``Rows``
(one rows event of an included table, values decoded), ``Statement`` (DDL or another
statement), ``Commit`` (a transaction is complete; carries the resume position) and
``Tick`` (heartbeat; nothing new). It resumes from a :class:`Position` by MariaDB GTID,
MySQL GTID set, or file/pos; skips the ``skipEvents`` rows events of a split
transaction that are already stored; stops at ``stop_at`` (``--once``); and turns
server refusals into PositionError/SourceError. It never reconnects silently: a lost
connection is a TransientError, so the caller resumes from the last *stored* position.

The native stream (``fastpath.py``) runs when the extension is built; else the library loop
here. The item types are in ``items.py`` (imported here for the callers that know them so).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import (
    GtidEvent,
    HeartbeatLogEvent,
    MariadbAnnotateRowsEvent,
    MariadbGtidEvent,
    NotImplementedEvent,
    QueryEvent,
    RotateEvent,
    RowsQueryLogEvent,
    XAPrepareEvent,
    XidEvent,
)
from pymysqlreplication.row_event import (
    DeleteRowsEvent,
    PartialUpdateRowsEvent,
    TableMapEvent,
    UpdateRowsEvent,
    WriteRowsEvent,
)

from pipeline.config import SourceConfig, TableFilter
from pipeline.errors import PositionError, TransientError
from pipeline.source.connect import settings as source_settings

from .dml import classify_ddl
from .fastpath import native_items
from .items import IGNORED_IN_TX, Begin, Commit, Item, Rows, Statement, Tick, map_error, refuse_event
from .native import load
from .position import GtidState, Position, binlog_key
from .rowcodec import CodecCache, TableCodec

_ROWS_KIND = {WriteRowsEvent: "INSERT", UpdateRowsEvent: "UPDATE", DeleteRowsEvent: "DELETE"}


@dataclass(frozen=True)
class ReaderOptions:
    follow: bool = False
    stop_at: Position | None = None
    resume_by: str = "auto"          # auto | gtid | file
    filter: TableFilter = TableFilter()


class BinlogReader:
    """Iterate typed capture items from ``start`` (see module docstring)."""

    def __init__(self, src: SourceConfig, flavor: str, start: Position, opts: ReaderOptions,
                 codecs: CodecCache | None = None):
        self.src, self.flavor, self.start, self.opts = src, flavor, start, opts
        self.codecs = codecs or CodecCache()
        self.gtids = GtidState(flavor, start.gtid)
        self.logfile, self.logpos = start.logfile, start.logpos
        self.last_ts: int | None = None
        self.events = 0
        self._connects = 0
        self._included: dict[tuple[str, str], bool] = {}
        self._by_table_id: dict[int, TableCodec | None] = {}
        self.stream: BinLogStreamReader | None = None

    # ---- connection -------------------------------------------------------------

    def _connect(self, **kw: Any) -> pymysql.connections.Connection:
        self._connects += 1
        if self._connects > 2:  # the library reconnects on its own; we never resume silently
            raise TransientError("the binlog connection to the source was lost",
                                 hint="capture resumes from the last stored position")
        return pymysql.connect(**kw)

    def resume_mode(self) -> str:
        """``gtid`` or ``file``: how this reader asks the server for the start."""
        mode = self.opts.resume_by
        if mode == "auto":  # file/pos: MariaDB resets GTID-mode dumps of slow readers (docs/capture.md)
            mode = "file" if self.start.logfile else "gtid"
        if mode == "gtid" and not self.start.gtid:
            raise PositionError(f"cannot resume by GTID: the start position {self.start.text()} has no GTID",
                                hint="set source.resumeBy: file, or set a start position with a GTID")
        return mode

    def _open(self) -> BinLogStreamReader:
        s = self.src
        settings = source_settings(s)
        if self.opts.follow:
            settings["read_timeout"] = max(30.0, s.heartbeatSeconds * 4)
        kw: dict[str, Any] = {}
        if self.resume_mode() == "gtid":
            kw.update(auto_position=self.start.gtid, is_mariadb=self.flavor == "mariadb",
                      annotate_rows_event=True)
        else:
            kw.update(log_file=self.start.logfile, log_pos=self.start.logpos, resume_stream=True)
        return BinLogStreamReader(
            connection_settings=settings, server_id=s.serverId, blocking=self.opts.follow,
            only_events=[QueryEvent, XidEvent, GtidEvent, TableMapEvent, MariadbGtidEvent, WriteRowsEvent,
                         UpdateRowsEvent, DeleteRowsEvent, PartialUpdateRowsEvent, RotateEvent, HeartbeatLogEvent,
                         MariadbAnnotateRowsEvent, RowsQueryLogEvent, NotImplementedEvent, XAPrepareEvent],
            filter_non_implemented_events=False, freeze_schema=False, enable_logging=False,
            slave_heartbeat=s.heartbeatSeconds if self.opts.follow else None,
            pymysql_wrapper=self._connect, **kw)

    def included(self, database: str, table: str) -> bool:
        key = (database, table)
        hit = self._included.get(key)
        if hit is None:
            hit = self._included[key] = self.opts.filter.matches(database, table)
        return hit

    # ---- iteration ----------------------------------------------------------------

    def __iter__(self) -> Iterator[Item]:
        stop = self.opts.stop_at
        if stop is not None and not self.start.skip_events and \
                binlog_key(self.start.logfile, self.start.logpos) >= binlog_key(stop.logfile, stop.logpos):
            return
        native = load()
        if native is not None:
            yield from native_items(self, native, stop)
            return
        self.stream = stream = self._open()
        try:
            yield from self._items(stream, stop)
        except pymysql.err.MySQLError as e:
            raise map_error(e, self.start) from None
        finally:
            stream.close()

    def _items(self, stream: BinLogStreamReader, stop: Position | None) -> Iterator[Item]:
        skip = self.start.skip_events
        first_tx = True
        tx_open = explicit = False
        tx_gtid: str | None = None
        tx_events = 0
        sql = ""
        stop_key = binlog_key(stop.logfile, stop.logpos) if stop is not None else None
        for ev in stream:
            self.events += 1
            w = ev.packet
            cls = type(ev)
            ts = ev.timestamp
            if ts:
                self.last_ts = ts
            logfile = stream.log_file or self.logfile
            start_pos = w.log_pos - w.event_size if w.log_pos else 0
            kind = _ROWS_KIND.get(cls)
            if kind is not None:
                if not tx_open:
                    tx_open = explicit = True
                    tx_gtid = None
                    yield Begin(None, logfile, start_pos, self.gtids.text(), ts * 1000)
                tx_events += 1
                if first_tx and tx_events <= skip:
                    continue
                codec = self._by_table_id.get(ev.table_id)
                if codec is None:
                    continue
                pk = w.packet
                buf, pos = pk._data, pk._position
                end = pos + ev.event_size - w.read_bytes
                if kind == "UPDATE":
                    rows = codec.decode_rows(buf, pos, end, ev.columns_present_bitmap, ev.columns_present_bitmap2)
                else:
                    rows = codec.decode_rows(buf, pos, end, ev.columns_present_bitmap)
                yield Rows(kind, codec, rows, sql, logfile, start_pos, ts * 1000, tx_events, end - pos)
            elif cls is TableMapEvent:
                self._by_table_id[ev.table_id] = (self.codecs.for_table_map(ev)
                                                  if self.included(ev.schema, ev.table) else None)
            elif cls is XidEvent:
                yield from self._commit(tx_gtid, logfile, w.log_pos, ts)
                tx_open = explicit = False
                tx_gtid, tx_events, sql, first_tx = None, 0, "", False
                if stop_key is not None and binlog_key(logfile, w.log_pos) >= stop_key:
                    return
            elif cls is QueryEvent:
                q = ev.query.strip()
                head = q[:12].upper()
                if head.startswith("BEGIN"):
                    if not tx_open:
                        tx_gtid = None
                        yield Begin(None, logfile, start_pos, self.gtids.text(), ts * 1000)
                    tx_open = explicit = True
                    continue
                if explicit and not (head.startswith("COMMIT") or head == "ROLLBACK"):
                    schema = ev.schema.decode() if isinstance(ev.schema, bytes) else ev.schema
                    if not head.startswith(IGNORED_IN_TX) and self.included(schema, ""):
                        yield Statement("QUERY", schema, "", False, q, logfile, start_pos, ts * 1000)
                    continue
                if not (head.startswith("COMMIT") or head == "ROLLBACK"):  # DDL: a transaction of its own
                    if not tx_open:
                        tx_gtid = None
                        yield Begin(None, logfile, start_pos, self.gtids.text(), ts * 1000)
                    schema = ev.schema.decode() if isinstance(ev.schema, bytes) else ev.schema
                    dkind, db, table, is_ddl = classify_ddl(q, schema)
                    if self.included(db, table) if table else self.included(db, ""):
                        yield Statement(dkind, db, table, is_ddl, q, logfile, start_pos, ts * 1000)
                    if dkind in ("ALTER", "ERASE", "RENAME", "CREATE", "TRUNCATE"):
                        self._by_table_id.clear()
                yield from self._commit(tx_gtid, logfile, w.log_pos, ts)
                tx_open = explicit = False
                tx_gtid, tx_events, sql, first_tx = None, 0, "", False
                if stop_key is not None and binlog_key(logfile, w.log_pos) >= stop_key:
                    return
            elif cls is MariadbGtidEvent or cls is GtidEvent:
                tx_gtid = ev.gtid
                tx_open = True
                explicit = cls is MariadbGtidEvent and not (ev.flags & 1)  # FL_STANDALONE: no BEGIN/COMMIT
                yield Begin(tx_gtid, logfile, start_pos, self.gtids.text(), ts * 1000)
            elif cls is MariadbAnnotateRowsEvent:
                sql = ev.sql_statement.decode("utf-8", "replace")
            elif cls is RowsQueryLogEvent:
                sql = ev.query if isinstance(ev.query, str) else ev.query.decode("utf-8", "replace")
            elif cls is HeartbeatLogEvent:
                if not tx_open and stop_key is not None and binlog_key(logfile, self.logpos) >= stop_key:
                    return
                yield Tick(None)
            elif cls is NotImplementedEvent or cls is PartialUpdateRowsEvent or cls is XAPrepareEvent:
                refuse_event(ev.event_type, logfile, start_pos)

    def _commit(self, gtid: str | None, logfile: str, next_pos: int, ts: int) -> Iterator[Item]:
        if gtid:
            self.gtids.add(gtid)
        self.logfile, self.logpos = logfile, next_pos
        yield Commit(logfile, next_pos, self.gtids.text(), ts * 1000)
