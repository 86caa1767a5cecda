"""The binlog reader: one dump connection, a decoder, and the transaction framer.

``BinlogReader`` yields capture items (:mod:`items`), in binlog order, from a :class:`Position`:
it opens the dump connection (:mod:`protocol`: by file/pos, MariaDB GTID or a MySQL GTID set),
decodes its bytes into :mod:`events` with the native decoder (``sluice_binlog.Stream``) or the
pure-Python one (:mod:`decoder`), decides each new table map (which tables are stored, and how
their rows are decoded), and runs the one transaction framer (:mod:`framer`) over the events.
Prepared XA transactions that the start position holds are read again from their PREPARE groups
first. It never reconnects silently: a lost connection is a TransientError, so the caller
resumes from the last *stored* position.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pymysql

from pipeline.config import SourceConfig, TableFilter
from sluice_common.errors import PositionError, SourceError

from .decoder import DecodeError, PyStream
from .dml import json_text
from .events import EVENT_CLASSES, NO_FOREIGN_KEY_CHECKS_F, RawRowsEv, TableMapEv, xid_text
from .framer import Framer
from .identity import check_file
from .items import Item, Rows, map_error, partial_update
from .native import load, parse_table_map, plan_for, table_map_names
from .position import GtidState, Position, binlog_key
from .protocol import DumpConnection
from .rowcodec import UNKNOWN, CodecCache, TableCodec
from .xa import XaBook, held_origins

BATCH_EVENTS = 4096


@dataclass(frozen=True)
class ReaderOptions:
    follow: bool = False
    stop_at: Position | None = None
    resume_by: str = "auto"          # auto | gtid | file
    filter: TableFilter = TableFilter()
    config_file: str = "sluice.yml"  # named in the fix of a refusal


class BinlogReader:
    """Iterate capture items from ``start`` (see module docstring)."""

    #: what serves the binlog's bytes (tests read a binlog file through the same decoders instead)
    dump_class: type = DumpConnection

    def __init__(self, src: SourceConfig, flavor: str, start: Position, opts: ReaderOptions,
                 codecs: CodecCache | None = None, xa: XaBook | None = None):
        self.src, self.flavor, self.start, self.opts = src, flavor, start, opts
        self.codecs = codecs or CodecCache()
        self.xa = xa
        self.gtids = GtidState(flavor, start.gtid)
        self.gtids.gtid_partial = start.gtid_partial
        self.logfile, self.logpos = start.logfile, start.logpos
        self.last_ts: int | None = None
        self.events = 0
        self.codecs_by_id: dict[int, TableCodec | None] = {}
        self.formats: dict[str, int] = {}   # binlog file -> its format description's timestamp
        self._included: dict[tuple[str, str], bool] = {}
        self._stream: Any = None
        self._native = self._checksum = False

    def resume_mode(self) -> str:
        """``gtid`` or ``file``: how this reader asks the server for the start."""
        mode = self.opts.resume_by
        if mode == "auto":  # file/pos: MariaDB resets GTID-mode dumps of slow readers (docs/capture.md)
            mode = "file" if self.start.logfile else "gtid"
        if mode == "gtid" and not self.start.gtid:
            raise PositionError(f"cannot resume by GTID: the start position {self.start.text()} has no GTID",
                                hint="set source.resumeBy: file, or set a start position with a GTID")
        return mode

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
        if self.xa is None:
            self.xa = self.prepared_book()
        yield from self._read(Framer(self, self.xa))

    def _read(self, framer: Framer) -> Iterator[Item]:
        dump = self.dump_class(self.src, self.flavor, self.start, mode=self.resume_mode(), follow=self.opts.follow)
        try:
            dump.open()
        except pymysql.err.MySQLError as e:
            raise map_error(e, self.start) from None
        mod = load()
        self._native, self._checksum = mod is not None, dump.checksum
        self._stream = stream = mod.Stream(dump.checksum, EVENT_CLASSES) if mod else PyStream(dump.checksum)

        def batches() -> Iterator[list]:
            while True:
                try:
                    events = stream.items(BATCH_EVENTS)
                except (ValueError, DecodeError) as e:
                    raise SourceError(f"{self.logfile}: the binlog stream cannot be decoded after "
                                      f"{self.logfile}:{self.logpos}: {e}") from None
                if events:
                    yield events
                else:
                    stream.feed(dump.read())
        try:
            yield from framer.run(batches())
        finally:
            dump.close()

    # ---- what the framer asks of the reader ------------------------------------------

    def table_map(self, ev: TableMapEv) -> None:
        """Decide a table map whose bytes are new for its table id."""
        try:
            tm = parse_table_map(ev.packet, self.flavor, self._checksum)
        except (ValueError, KeyError, IndexError, TypeError, struct.error) as e:  # a type the library does not know
            schema, table = table_map_names(ev.packet)
            if not self.included(schema, table):
                self.codecs_by_id[ev.table_id] = None
                self._stream.set_table(ev.table_id, 0, f"{schema}.{table}")
                return
            raise SourceError(f"{self.logfile}: table {schema}.{table}: capture cannot read its layout in the binlog "
                              f"({type(e).__name__}: {e}; a column type it does not know, such as MySQL 9's "
                              "VECTOR)", hint=f"leave {schema}.{table} out of capture (source.filter.exclude; a "
                              "mirrorDb mapping of its database then maps its other tables one by one), or "
                              "drop or convert that column at the source") from None
        name = f"{tm.schema}.{tm.table}"
        if not self.included(tm.schema, tm.table):
            self.codecs_by_id[ev.table_id] = None
            self._stream.set_table(ev.table_id, 0, name)
            return
        codec = self.codecs.for_table_map(tm)
        self.codecs_by_id[ev.table_id] = codec
        plan = plan_for(codec) if self._native else None
        if plan is None:
            self._stream.set_table(ev.table_id, 2, name)
        else:
            self._stream.set_table(ev.table_id, 1, name, plan[0], plan[1])

    def rows_item(self, ev: Any, codec: TableCodec, kind: str, sql: str, logfile: str, event_no: int) -> Rows:
        """The capture item of one rows event of a stored table."""
        fk_off = bool(ev.flags & NO_FOREIGN_KEY_CHECKS_F)
        if type(ev) is not RawRowsEv:
            return Rows(kind, codec, None, sql, logfile, ev.start, ev.ts * 1000, event_no, ev.size, ev.data, ev.old,
                        ev.nrows, fk_off=fk_off)
        rows = codec.decode_rows(ev.rows, 0, len(ev.rows), ev.present, ev.present2, ev.partial_json,
                                 where=f"{logfile}:{ev.start}")
        if codec.whole(ev.present) and (ev.present2 is None or codec.whole(ev.present2)):
            return Rows(kind, codec, rows, sql, logfile, ev.start, ev.ts * 1000, event_no, len(ev.rows),
                        fk_off=fk_off)
        partial = (codec.present_names(ev.present), codec.present_names(ev.present2 or ev.present))
        if ev.present2 is None:
            return Rows(kind, codec, rows, sql, logfile, ev.start, ev.ts * 1000, event_no, len(ev.rows),
                        partial=partial, fk_off=fk_off)
        unknown = sorted({k for _, after in rows for k, v in after.items() if v is UNKNOWN})
        if unknown:  # JSON diffs without their before documents: stored without them, refused by the group
            rows = [(before, {k: v for k, v in after.items() if v is not UNKNOWN}) for before, after in rows]
            partial = (partial[0], [n for n in partial[1] if n not in unknown], unknown)
        pairs = [partial_update(before, after) for before, after in rows]
        data, old = json_text([d for d, _ in pairs]), json_text([o for _, o in pairs])
        return Rows(kind, codec, None, sql, logfile, ev.start, ev.ts * 1000, event_no, len(ev.rows), data, old,
                    len(pairs), partial=partial, fk_off=fk_off)

    def on_format(self, ev: Any, logfile: str) -> None:
        """A binlog file's format description (its timestamp identifies the file). Resuming by file
        and offset, the start file's must be the stored file's (:func:`identity.check_file`): the
        check runs here, before anything of that file is handed on."""
        first = logfile not in self.formats
        if ev.start == 4 or not self.formats.get(logfile):
            self.formats[logfile] = ev.ts
        if first and self.resume_mode() == "file":
            check_file(self.start, logfile, ev.ts, self.opts.config_file)

    # ---- prepared XA transactions ---------------------------------------------------

    def prepared_book(self) -> XaBook:
        """The prepared XA transactions the start position holds, read again from the binlog."""
        book = XaBook()
        for xid, origin in held_origins(self.start.xa):
            book.prepared[xid] = self._reread(xid, origin)
        book._refresh()
        return book

    def _reread(self, xid: bytes, origin: dict[str, Any]):
        start = Position(origin["logfile"], origin["logpos"], origin.get("gtid"))
        sub = type(self)(self.src, self.flavor, start,
                           ReaderOptions(follow=False, resume_by="file", filter=self.opts.filter),
                           self.codecs, XaBook())
        items = sub._read(Framer(sub, sub.xa))
        try:
            for _item in items:
                if xid in sub.xa.prepared:
                    return sub.xa.prepared[xid]
                if binlog_key(sub.logfile, sub.logpos) > binlog_key(start.logfile, start.logpos):
                    break  # a whole transaction went by: the PREPARE group is not where the position says
        finally:
            items.close()
        raise PositionError(f"the stored position holds prepared XA transaction {xid_text(xid)} from "
                            f"{start.logfile}:{start.logpos}, but its XA PREPARE is not there",
                            hint="the binlog there was purged or replaced; take a new snapshot")
