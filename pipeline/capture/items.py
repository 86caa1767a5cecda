"""What the binlog readers yield, and the rules both read paths share.

Capture items, in binlog order: ``Begin`` (a transaction starts), ``Rows`` (one rows event of
an included table), ``Statement`` (DDL or another statement), ``Commit`` (a transaction is
complete; carries the resume position) and ``Tick`` (heartbeat; nothing new). Shared by the
library path (``reader.py``) and the native one (``fastpath.py``): the events capture refuses,
and how server errors become PositionError/SourceError/TransientError.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pymysql

from pipeline.errors import PositionError, SourceError, TransientError
from pipeline.source.connect import BINLOG_TRANSIENT_CODES

from .position import Position
from .rowcodec import TableCodec

COMPRESSED_TYPES = {40: "MySQL transaction payload (binlog_transaction_compression)",
                     165: "MariaDB compressed query", 166: "MariaDB compressed rows", 167: "MariaDB compressed rows",
                     168: "MariaDB compressed rows", 169: "MariaDB compressed rows",
                     170: "MariaDB compressed rows", 171: "MariaDB compressed rows"}
IGNORED_IN_TX = ("SAVEPOINT", "RELEASE", "ROLLBACK TO", "XA ")


@dataclass(slots=True)
class Begin:
    gtid: str | None
    logfile: str
    logpos: int
    gtid_before: str | None
    ts: int


class Rows:
    """One rows event of an included table. The rows are either decoded by Python (``rows``:
    dicts, or (before, after) pairs for UPDATE) or, on the native path, ready canal JSON
    (``data_json``, ``old_json``; ``rows`` then decodes them on demand)."""

    __slots__ = ("kind", "codec", "_rows", "sql", "logfile", "logpos", "ts", "event_no", "size",
                 "data_json", "old_json", "nrows")

    def __init__(self, kind: str, codec: TableCodec, rows: list[Any] | None, sql: str, logfile: str, logpos: int,
                 ts: int, event_no: int, size: int, data_json: bytes | None = None, old_json: bytes | None = None,
                 nrows: int | None = None):
        self.kind, self.codec, self._rows, self.sql = kind, codec, rows, sql
        self.logfile, self.logpos, self.ts = logfile, logpos, ts
        self.event_no = event_no    # 1-based rows-event number within the transaction (all tables)
        self.size = size            # row-image bytes (for the batch byte estimate)
        self.data_json, self.old_json = data_json, old_json
        self.nrows = len(rows) if rows is not None else (nrows or 0)

    @property
    def rows(self) -> list[Any]:
        if self._rows is None:
            data = json.loads(self.data_json or b"[]")
            if self.kind == "UPDATE":
                old = json.loads(self.old_json or b"[]")
                self._rows = [({**after, **changed}, after) for after, changed in zip(data, old, strict=True)]
            else:
                self._rows = data
        return self._rows


@dataclass(slots=True)
class Statement:
    kind: str
    database: str
    table: str
    is_ddl: bool
    sql: str
    logfile: str
    logpos: int
    ts: int


@dataclass(slots=True)
class Commit:
    logfile: str
    logpos: int          # just after the commit event
    gtid: str | None     # GTID state after the transaction
    ts: int


@dataclass(slots=True)
class Tick:
    ts: int | None


Item = Begin | Rows | Statement | Commit | Tick


def refuse_event(event_type: int, logfile: str, pos: int) -> None:
    """Stop on events that would carry rows we cannot read; ignore other unknown events."""
    what = COMPRESSED_TYPES.get(event_type) or {
        38: "XA PREPARE (XA transactions are not supported)",
        39: "MySQL partial JSON update (binlog_row_value_options=PARTIAL_JSON)"}.get(event_type)
    if what is not None:
        raise SourceError(f"{logfile}:{pos}: the binlog holds a {what} event, which capture cannot read",
                          hint="turn the setting off on the source and take a new snapshot")


def map_error(e: pymysql.err.MySQLError, start: Position) -> Exception:
    code = e.args[0] if e.args else None
    msg = str(e.args[-1]) if e.args else str(e)
    if code == 1236:
        return PositionError(
            f"the source cannot serve the stored start position {start.text()}: {msg}",
            hint="the binlog there was purged or never existed; take a new snapshot (re-bootstrap the "
            "targets) and set a new start position; capture never jumps to 'now' by itself")
    if code in (1045, 1227, 1044):
        return SourceError(f"the source refused the binlog connection: {msg}",
                           hint="the capture user needs REPLICATION SLAVE, REPLICATION CLIENT and SELECT")
    if code in BINLOG_TRANSIENT_CODES:
        return TransientError(f"the binlog connection to the source failed: {msg}",
                              hint="capture resumes from the last stored position")
    return SourceError(f"binlog stream error {code}: {msg}")
