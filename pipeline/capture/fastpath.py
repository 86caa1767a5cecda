"""The native read loop: ``sluice_binlog.Stream`` tuples -> capture items.

Same transaction logic, positions, skip of a split transaction's stored events, stop rule and
refusals as the library path in ``reader.py`` (``BinlogReader._items``), on the tuples of the
native stream (documented in ``native/src/lib.rs``). Rows of planned tables arrive as ready
``data``/``old`` JSON; rows of tables that need Python's value rules arrive raw and are decoded
by their :class:`TableCodec`.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType
from typing import TYPE_CHECKING

import pymysql

from pipeline.errors import SourceError

from .dml import classify_ddl
from .items import IGNORED_IN_TX, Begin, Commit, Rows, Statement, Tick, map_error, refuse_event
from .native import parse_table_map, plan_for
from .position import Position, binlog_key
from .protocol import DumpConnection
from .rowcodec import TableCodec

if TYPE_CHECKING:
    from .reader import BinlogReader

KINDS = ("INSERT", "UPDATE", "DELETE")
BATCH_ITEMS = 4096


def _set_table(reader: BinlogReader, stream: object, codecs: dict[int, TableCodec | None], table_id: int,
               packet: bytes, checksum: bool) -> None:
    ev = parse_table_map(packet, reader.flavor, checksum)
    if not reader.included(ev.schema, ev.table):
        codecs[table_id] = None
        stream.set_table(table_id, 0, f"{ev.schema}.{ev.table}")
        return
    codec = reader.codecs.for_table_map(ev)
    codecs[table_id] = codec
    plan = plan_for(codec)
    if plan is None:
        stream.set_table(table_id, 2, f"{ev.schema}.{ev.table}")
    else:
        stream.set_table(table_id, 1, f"{ev.schema}.{ev.table}", plan[0], plan[1])


def native_items(reader: BinlogReader, mod: ModuleType, stop: Position | None) -> Iterator:
    """Capture items from ``reader.start`` over a native dump connection (see module docstring)."""
    dump = DumpConnection(reader.src, reader.flavor, reader.start, mode=reader.resume_mode(),
                          follow=reader.opts.follow)
    try:
        dump.open()
    except pymysql.err.MySQLError as e:
        raise map_error(e, reader.start) from None
    stream = mod.Stream(dump.checksum)
    codecs: dict[int, TableCodec | None] = {}
    gtids = reader.gtids
    skip = reader.start.skip_events
    first_tx = True
    tx_open = explicit = False
    tx_gtid: str | None = None
    tx_events = 0
    sql = ""
    logfile = reader.start.logfile
    stop_key = binlog_key(stop.logfile, stop.logpos) if stop is not None else None
    try:
        while True:
            items = stream.items(BATCH_ITEMS)
            if not items:
                stream.feed(dump.read())
                continue
            reader.events += len(items)
            for it in items:
                code = it[0]
                if code <= 2:  # rows event
                    ts, start = (it[1], it[2]) if code == 1 else (it[3], it[4])
                    if ts:
                        reader.last_ts = ts
                    if not tx_open:
                        tx_open = explicit = True
                        tx_gtid = None
                        yield Begin(None, logfile, start, gtids.text(), ts * 1000)
                    tx_events += 1
                    if code == 1 or (first_tx and tx_events <= skip):
                        continue
                    codec = codecs.get(it[2])
                    if codec is None:
                        continue
                    if code == 0:
                        yield Rows(KINDS[it[1]], codec, None, sql, logfile, start, ts * 1000, tx_events, it[9],
                                   it[7], it[8], it[6])
                    else:
                        rows = codec.decode_rows(it[6], 0, len(it[6]), it[7], it[8])
                        yield Rows(KINDS[it[1]], codec, rows, sql, logfile, start, ts * 1000, tx_events,
                                   len(it[6]))
                elif code == 5 or code == 6:  # XID, or a query event
                    ts, start, nxt = it[1], it[2], it[3]
                    if ts:
                        reader.last_ts = ts
                    if code == 6:
                        q = it[5].decode("utf-8", "backslashreplace").strip()
                        head = q[:12].upper()
                        if head.startswith("BEGIN"):
                            if not tx_open:
                                tx_gtid = None
                                yield Begin(None, logfile, start, gtids.text(), ts * 1000)
                            tx_open = explicit = True
                            continue
                        is_end = head.startswith("COMMIT") or head == "ROLLBACK"
                        schema = it[4].decode("utf-8", "replace")
                        if explicit and not is_end:
                            if not head.startswith(IGNORED_IN_TX) and reader.included(schema, ""):
                                yield Statement("QUERY", schema, "", False, q, logfile, start, ts * 1000)
                            continue
                        if not is_end:  # DDL: a transaction of its own
                            if not tx_open:
                                tx_gtid = None
                                yield Begin(None, logfile, start, gtids.text(), ts * 1000)
                            dkind, db, table, is_ddl = classify_ddl(q, schema)
                            if reader.included(db, table) if table else reader.included(db, ""):
                                yield Statement(dkind, db, table, is_ddl, q, logfile, start, ts * 1000)
                    if tx_gtid:
                        gtids.add(tx_gtid)
                    reader.logfile, reader.logpos = logfile, nxt
                    yield Commit(logfile, nxt, gtids.text(), ts * 1000)
                    tx_open = explicit = False
                    tx_gtid, tx_events, sql, first_tx = None, 0, "", False
                    if stop_key is not None and binlog_key(logfile, nxt) >= stop_key:
                        return
                elif code == 4:  # GTID
                    ts = it[1]
                    if ts:
                        reader.last_ts = ts
                    tx_gtid = it[4]
                    tx_open = True
                    explicit = it[6] and not it[5]  # MariaDB FL_STANDALONE: no BEGIN/COMMIT
                    yield Begin(tx_gtid, logfile, it[2], gtids.text(), ts * 1000)
                elif code == 3:  # a table map with new bytes: decide its plan
                    _set_table(reader, stream, codecs, it[1], it[2], dump.checksum)
                elif code == 8:
                    sql = it[2].decode("utf-8", "replace")
                elif code == 7:  # rotate (also the artificial one at the start of the dump)
                    logfile = it[3]
                elif code == 9:
                    if it[1]:
                        reader.last_ts = it[1]
                    if not tx_open and stop_key is not None and \
                            binlog_key(logfile, reader.logpos) >= stop_key:
                        return
                    yield Tick(None)
                elif code == 10:
                    refuse_event(it[1], logfile, it[2])
                elif code == 11:  # end of the binlog (non-blocking dump)
                    return
                elif code == 12:
                    raise map_error(pymysql.err.OperationalError(it[1], it[2]), reader.start)
                else:  # pragma: no cover - a tuple kind this loop does not know
                    raise SourceError(f"unknown native stream item {it[0]}")
    finally:
        dump.close()
