"""The native hot path (``native/``, Rust): loading it, and compiling a table's decoding plan.

``sluice_binlog.Stream`` frames the dump connection's packets, parses events and decodes the
row images of planned tables straight to canal's ``data``/``old`` JSON. Python decides per
table layout: ``plan_for(codec)`` turns the table's :class:`ColumnSpec` list into one op per
column (the same value rules as ``values.py``), or None when a column needs a rule only Python
has (MySQL binary JSON, charsets other than utf8/latin1/binary): such a table's rows come
back raw and are decoded by its :class:`TableCodec` (``rowcodec.py``).

Table maps whose bytes are new for their table id are parsed here with python-mysql-replication's
``TableMapEvent`` (rare: the native stream skips a table map whose bytes it has seen), so the
binlog metadata rules stay those of the library (docs/capture.md).

``SLUICE_CAPTURE_NATIVE=0`` turns the native path off (capture then runs on the library's stream).
"""

from __future__ import annotations

import codecs
import json
from typing import Any

from pymysql.protocol import MysqlPacket
from pymysqlreplication.constants import FIELD_TYPE as T
from pymysqlreplication.packet import BinLogPacketWrapper
from pymysqlreplication.row_event import TableMapEvent

from pipeline.native import load  # noqa: F401 - capture's loader (re-exported)

from . import charsets
from .columns import ColumnSpec
from .rowcodec import TableCodec

OpSpec = tuple[int, int, int, list[str]]

_FIXED = {T.FLOAT: 1, T.DOUBLE: 2, T.DATE: 4, T.TIME: 8, T.DATETIME: 9, T.TIMESTAMP: 10, T.YEAR: 11}
_FSP = {T.DATETIME2: 5, T.TIMESTAMP2: 6, T.TIME2: 7}


def _text_op(spec: ColumnSpec, len_size: int) -> OpSpec | None:
    if spec.encoding is None:  # binary: ISO-8859-1, BINARY(n) keeps its 0x00 padding
        pad = spec.max_length if spec.type == T.STRING else 0
        return (13, len_size, pad, [])
    name = codecs.lookup(spec.encoding).name
    if name == "utf-8":
        return (12, len_size, 0, [])
    if name == charsets.PREFIX + "latin1":  # MySQL's latin1 (pipeline/capture/charsets.py), the native table's
        return (18, len_size, 0, [])
    if name == "iso8859-1":
        return (13, len_size, 0, [])
    return None


def op_for(spec: ColumnSpec) -> OpSpec | None:
    """The native op for one column (its value rule in ``values.py``), or None."""
    t = spec.type
    if spec.int_bytes:
        return (0, spec.int_bytes, int(spec.unsigned), [])
    if t in _FIXED:
        return (_FIXED[t], 0, 0, [])
    if t in _FSP:
        return (_FSP[t], spec.fsp, 0, [])
    if t == T.NEWDECIMAL:
        return (3, spec.precision, spec.scale, [])
    if t in (T.VARCHAR, T.STRING):
        return _text_op(spec, 2 if spec.max_length > 255 else 1)
    if t == T.BLOB:
        return _text_op(spec, spec.length_size) if 1 <= spec.length_size <= 4 else None
    if t == T.ENUM and 1 <= spec.size <= 8:
        return (14, spec.size, 0, list(spec.members))
    if t == T.SET and 1 <= spec.size <= 8:
        return (15, spec.size, 0, list(spec.members))
    if t == T.BIT and 1 <= (spec.bits + 7) // 8 <= 8:
        return (16, (spec.bits + 7) // 8, 0, [])
    if t == T.GEOMETRY and 1 <= spec.length_size <= 4:
        return (17, spec.length_size, 0, [])
    return None  # MySQL binary JSON and anything new: Python decodes the table


def plan_for(codec: TableCodec) -> tuple[list[OpSpec], list[bytes]] | None:
    """(ops, JSON keys) for every column of ``codec``, or None if one column needs Python."""
    ops: list[OpSpec] = []
    for spec in codec.columns:
        op = op_for(spec)
        if op is None:
            return None
        ops.append(op)
    keys = [(json.dumps(c.name, ensure_ascii=False) + ":").encode() for c in codec.columns]
    return ops, keys


class _Ctl:
    """What the library's event classes ask of their control connection."""

    charset = "utf8mb4"

    def __init__(self, flavor: str):
        self._dbms = flavor

    def _get_dbms(self) -> str:
        return self._dbms


def parse_table_map(packet: bytes, flavor: str, checksum: bool) -> Any:
    """The library's ``TableMapEvent`` for one dump packet (the OK byte + the event)."""
    wrapper = BinLogPacketWrapper(
        MysqlPacket(packet, "utf8"), {}, _Ctl(flavor), (0, 0, 0), checksum, frozenset([TableMapEvent]),
        None, None, None, None, False, False, False, True, False)
    if wrapper.event is None:  # pragma: no cover - the library refused its own event type
        raise ValueError("not a table map event")
    return wrapper.event


def table_map_names(packet: bytes) -> tuple[str, str]:
    """The schema and table a table map event names, read without the library (for a message about
    one it cannot parse): after the OK byte, the 19-byte header, the table id (6) and flags (2)."""
    pos = 28
    names = []
    for _ in range(2):
        n = packet[pos] if pos < len(packet) else 0
        names.append(bytes(packet[pos + 1:pos + 1 + n]).decode("utf-8", "backslashreplace"))
        pos += n + 2
    return names[0], names[1]
