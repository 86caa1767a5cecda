"""What the transaction framer yields, and which events stop capture.

Capture items, in binlog order: ``Begin`` (a transaction starts), ``Rows`` (one rows event of
an included table), ``Statement`` (DDL or another statement), ``Savepoint``/``RollbackTo`` (inside
a transaction), ``Commit`` (a transaction is complete; carries the resume position), ``Advance`` (the
resume position moved past a rotate and the next file's header, no transaction among them) and ``Tick``
(heartbeat; nothing new). ``Begin`` and ``Commit`` also carry the prepared XA transactions held at
that point (:mod:`xa`), which every stored position records. :func:`refuse_event` is the one list
of event types capture ignores or refuses; :func:`map_error`/:func:`server_error` turn server
errors into PositionError/SourceError/TransientError.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pymysql

from pipeline.source.connect import BINLOG_TRANSIENT_CODES
from sluice_common.errors import PositionError, SourceError, TransientError

from .position import Position
from .rowcodec import TableCodec
from .statusvars import NONE as NO_SESSION
from .statusvars import Session

#: event types that carry nothing capture stores (statement-format context, file headers,
#: checkpoints, GTID bookkeeping, the file data of a LOAD DATA whose statement is refused by name)
IGNORED_TYPES = frozenset({
    3,    # STOP
    5,    # INTVAR (statement format: LAST_INSERT_ID, INSERT_ID)
    7,    # SLAVE
    13,   # RAND (statement format)
    14,   # USER_VAR (statement format)
    9,    # APPEND_BLOCK (more LOAD DATA file data, after BEGIN_LOAD_QUERY)
    17,   # BEGIN_LOAD_QUERY (LOAD DATA file data; its EXECUTE_LOAD_QUERY statement is a query)
    28,   # IGNORABLE
    34,   # MySQL ANONYMOUS_GTID
    35,   # MySQL PREVIOUS_GTIDS
    36,   # MySQL TRANSACTION_CONTEXT (group replication)
    37,   # MySQL VIEW_CHANGE (group replication)
    42,   # MySQL GTID_TAGGED_LOG_EVENT: delimits a transaction as BEGIN/XID do
    161,  # MariaDB BINLOG_CHECKPOINT
    163,  # MariaDB GTID_LIST
    164,  # MariaDB START_ENCRYPTION (the dump sends decrypted events)
})
#: the events of a binlog file's header after its format description: outside any transaction,
#: a position after them is a position to resume from (:class:`Advance`)
HEADER_TYPES = frozenset({35, 161, 163, 164})
#: event types that may carry changes capture cannot read: stop, naming them
REFUSED_TYPES = {
    6: "LOAD (pre-5.0 LOAD DATA)", 8: "CREATE_FILE (pre-5.0 LOAD DATA)",
    10: "EXEC_LOAD (pre-5.0 LOAD DATA)", 11: "DELETE_FILE (pre-5.0 LOAD DATA)", 12: "NEW_LOAD (pre-5.0 LOAD DATA)",
    20: "pre-GA WRITE_ROWS", 21: "pre-GA UPDATE_ROWS", 22: "pre-GA DELETE_ROWS",
    26: "INCIDENT (the server logged that changes are missing from the binlog here)",
}


#: the savepoint every transaction starts with (a whole-transaction ROLLBACK rolls back to it)
WHOLE = "\0transaction"


@dataclass(slots=True)
class Begin:
    gtid: str | None
    logfile: str
    logpos: int
    gtid_before: str | None
    ts: int
    xa: tuple = ()       # prepared XA transactions held when it starts (XaBook.held())


class Rows:
    """One rows event of an included table. The rows are either decoded by Python (``rows``:
    dicts, or (before, after) pairs for UPDATE) or, on the native path, ready canal JSON
    (``data_json``, ``old_json``; ``rows`` then decodes them on demand)."""

    __slots__ = ("kind", "codec", "_rows", "sql", "logfile", "logpos", "ts", "event_no", "size",
                 "data_json", "old_json", "nrows", "partial", "fk_off")

    def __init__(self, kind: str, codec: TableCodec, rows: list[Any] | None, sql: str, logfile: str, logpos: int,
                 ts: int, event_no: int, size: int, data_json: bytes | None = None, old_json: bytes | None = None,
                 nrows: int | None = None, partial: tuple[list[str], ...] | None = None,
                 fk_off: bool = False):
        self.kind, self.codec, self._rows, self.sql = kind, codec, rows, sql
        self.logfile, self.logpos, self.ts = logfile, logpos, ts
        self.event_no = event_no    # 1-based rows-event number within the transaction (all tables)
        self.size = size            # row-image bytes (for the batch byte estimate)
        self.data_json, self.old_json = data_json, old_json
        self.nrows = len(rows) if rows is not None else (nrows or 0)
        #: a row image without every column (a session's binlog_row_image MINIMAL/NOBLOB): the
        #: columns the before and the after image carry; None for whole images
        self.partial = partial
        #: the rows event's NO_FOREIGN_KEY_CHECKS flag: the source applied these rows without foreign
        #: key checks (MySQL 9 logs cascaded child rows so, before their parent's): ``fkChecks: false``
        self.fk_off = fk_off

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
    table: str           # "" with ``dml``: some table of the database, which one unknown
    is_ddl: bool
    sql: str
    logfile: str
    logpos: int
    ts: int
    dml: bool = False    # a statement-format write (its groups refuse it)
    #: DDL: the session's time zone and start microseconds, when the event says (statusvars.py)
    session: Session = NO_SESSION


@dataclass(slots=True)
class Commit:
    logfile: str
    logpos: int          # just after the commit event
    gtid: str | None     # GTID state after the transaction
    ts: int
    xa: tuple = ()       # prepared XA transactions held after it


@dataclass(slots=True)
class Savepoint:
    """``SAVEPOINT name`` inside a transaction (``stored``: set before the part of a split
    transaction that is stored already, so a ROLLBACK TO it cannot be undone any more)."""

    name: str
    logfile: str
    logpos: int
    stored: bool = False


@dataclass(slots=True)
class RollbackTo:
    """``ROLLBACK TO name``: the rows events since that savepoint are undone."""

    name: str
    logfile: str
    logpos: int


@dataclass(slots=True)
class Tick:
    ts: int | None


@dataclass(slots=True)
class Advance:
    """The stream moved past events that belong to no transaction -- a rotate and the next file's
    header (format description, GTID list, binlog checkpoint, previous GTIDs; MariaDB also writes a
    binlog checkpoint in the middle of a file) -- and nothing came after them: the resume position
    is now after them, with the GTID state of the last commit."""

    logfile: str
    logpos: int
    gtid: str | None
    xa: tuple = ()


Item = Begin | Rows | Statement | Savepoint | RollbackTo | Commit | Tick | Advance


def partial_update(before: dict, after: dict) -> tuple[dict, dict]:
    """(data, old) of one UPDATE row whose images lack columns, as the Dml record carries them:
    ``data`` is the after image plus the before image's columns the after image lacks (MINIMAL:
    the key, unchanged); ``old`` holds the changes the images show, and every column only the
    after image has, with null: the statement set it, from a value the binlog does not give (the
    record's ``partial`` member says which columns each image had)."""
    data = {**{k: v for k, v in before.items() if k not in after}, **after}
    old = {k: (before[k] if k in before else None) for k, v in after.items() if k not in before or before[k] != v}
    return data, old


def refuse_event(event_type: int, logfile: str, pos: int) -> None:
    """Ignore an event type that carries nothing capture stores; stop on any other the framer does
    not handle (naming it): an event capture does not understand may carry changes."""
    if event_type in IGNORED_TYPES:
        return
    what = REFUSED_TYPES.get(event_type, f"event of type {event_type}, which capture does not know")
    raise SourceError(f"{logfile}:{pos}: the binlog holds a {what}; capture stops here rather than skip changes "
                      "it cannot read",
                      hint="nothing after this event was stored; if the server logged it for tables no mapping "
                      "covers, move capture's start past it only after checking that (docs/capture.md)")


def server_error(code: int, message: str, start: Position) -> Exception:
    """An error packet in the dump stream as PositionError/SourceError/TransientError."""
    return map_error(pymysql.err.OperationalError(code, message), start)


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
