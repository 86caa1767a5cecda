"""The binlog event model: what a decoder makes of the dump stream, before any transaction logic.

Both decoders emit these, in stream order: the native one (``sluice_binlog.Stream``, Rust,
``native/src/events.rs``) and the pure-Python one (:mod:`pipeline.capture.decoder`). The Rust
decoder builds the same classes (they are handed to ``Stream(checksum, EVENT_CLASSES)``), so
every field below is the one contract between them; ``tests/unit/test_capture_binlog_files.py`` feeds
both the same bytes and requires equal events. Events are named tuples: the decoders make one
per binlog event at C speed and the framer (:mod:`pipeline.capture.framer`) reads fields by name.

Positions: ``start`` is the event's offset in its binlog file, ``next`` the offset after it
(the ``log_pos`` of its header). Events unpacked from a MySQL transaction payload
(``binlog_transaction_compression``) carry the payload event's ``start``/``next``: a payload is
one transaction, and the position after its commit is the position after the payload. MariaDB's
compressed events (``log_bin_compress``) arrive decompressed, as the events they stand for.
"""

from __future__ import annotations

from typing import NamedTuple

INSERT, UPDATE, DELETE = 0, 1, 2
ROW_KINDS = ("INSERT", "UPDATE", "DELETE")

# rows-event flags (both servers)
STMT_END_F, NO_FOREIGN_KEY_CHECKS_F, RELAXED_UNIQUE_CHECKS_F, COMPLETE_ROWS_F = 1, 2, 4, 8
# MariaDB GTID event flags2
FL_STANDALONE, FL_PREPARED_XA, FL_COMPLETED_XA = 0x01, 0x40, 0x80


class RowsEv(NamedTuple):
    """A rows event of a table decoded natively: ``data``/``old`` are canal's JSON arrays."""

    kind: int              # INSERT, UPDATE, DELETE
    table_id: int
    ts: int
    start: int
    next: int
    nrows: int
    data: bytes
    old: bytes | None
    size: int              # row-image bytes
    flags: int             # rows-event flags (NO_FOREIGN_KEY_CHECKS_F, ...)
    present: bytes         # columns-present bitmap (before image for UPDATE/DELETE)
    present2: bytes | None  # UPDATE: the after image's bitmap


class RawRowsEv(NamedTuple):
    """A rows event whose table Python decodes (``TableCodec.decode_rows`` over ``rows``)."""

    kind: int
    table_id: int
    ts: int
    start: int
    next: int
    rows: bytes
    present: bytes
    present2: bytes | None
    flags: int
    partial_json: bool     # MySQL PARTIAL_UPDATE_ROWS_EVENT: after images start with value options


class SkippedRowsEv(NamedTuple):
    """A rows event of a table capture does not store (filtered out, or no table map)."""

    ts: int
    start: int
    next: int


class TableMapEv(NamedTuple):
    """A table map whose bytes are new for its table id (``packet``: OK byte + event)."""

    table_id: int
    packet: bytes
    ts: int
    start: int
    next: int


class GtidEv(NamedTuple):
    """A GTID event: MariaDB ``domain-server-seq`` or MySQL ``uuid:gno``."""

    ts: int
    start: int
    next: int
    gtid: str
    flags: int             # MariaDB flags2 (FL_STANDALONE, FL_PREPARED_XA, FL_COMPLETED_XA); MySQL 0
    mariadb: bool
    xid: bytes | None      # MariaDB XA: the XID (formatID, gtrid, bqual) as ``xid_key`` builds it


class XidEv(NamedTuple):
    """The commit of a transactional group."""

    ts: int
    start: int
    next: int


class QueryEv(NamedTuple):
    """A query event: BEGIN/COMMIT, DDL, XA statements, statement-format DML, ..."""

    ts: int
    start: int
    next: int
    schema: bytes
    query: bytes
    #: the status-variable block (the session's time zone, the start microseconds: statusvars.py)
    status: bytes = b""


class XaPrepareEv(NamedTuple):
    """The end of an XA transaction's PREPARE group (or of an ``XA COMMIT ... ONE PHASE``)."""

    ts: int
    start: int
    next: int
    one_phase: bool
    xid: bytes


class RotateEv(NamedTuple):
    """A rotate (also the artificial one at the start of a dump)."""

    ts: int
    pos: int
    file: str


class AnnotateEv(NamedTuple):
    """MariaDB annotate-rows or MySQL rows-query: the SQL behind the next rows events."""

    ts: int
    sql: bytes


class HeartbeatEv(NamedTuple):
    ts: int
    next: int


class FormatEv(NamedTuple):
    """The format description event at the start of a binlog file."""

    ts: int
    start: int
    next: int
    server_version: str


class OtherEv(NamedTuple):
    """Any other event type: the framer decides whether it may be ignored."""

    type_code: int
    ts: int
    start: int
    next: int


class EndEv(NamedTuple):
    """End of the binlog (a non-blocking dump's EOF packet)."""


class ServerErrorEv(NamedTuple):
    """An error packet from the server."""

    code: int
    message: str


Event = (RowsEv | RawRowsEv | SkippedRowsEv | TableMapEv | GtidEv | XidEv | QueryEv | XaPrepareEv | RotateEv
         | AnnotateEv | HeartbeatEv | FormatEv | OtherEv | EndEv | ServerErrorEv)

#: the classes in the order the native decoder takes them (``Stream(checksum, EVENT_CLASSES)``)
EVENT_CLASSES = (RowsEv, RawRowsEv, SkippedRowsEv, TableMapEv, GtidEv, XidEv, QueryEv, XaPrepareEv, RotateEv,
                 AnnotateEv, HeartbeatEv, FormatEv, OtherEv, EndEv, ServerErrorEv)


def xid_key(format_id: int, gtrid: bytes, bqual: bytes) -> bytes:
    """One XA transaction's identity as bytes: the formatID (4 bytes, little-endian), the gtrid's
    and bqual's lengths (one byte each), then both. The decoders build it from the binlog's
    binary XIDs; :func:`pipeline.capture.xa.parse_xid` from the ``X'..',X'..',n`` text of an
    ``XA COMMIT``/``XA ROLLBACK`` statement."""
    return format_id.to_bytes(4, "little", signed=True) + bytes((len(gtrid), len(bqual))) + gtrid + bqual


def xid_text(key: bytes) -> str:
    """``X'7831',X'',1``: an XID as the servers print it."""
    fmt = int.from_bytes(key[:4], "little", signed=True)
    g, b = key[4], key[5]
    return f"X'{key[6:6 + g].hex()}',X'{key[6 + g:6 + g + b].hex()}',{fmt}"
