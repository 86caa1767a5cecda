"""The SELECT side of the value rules: a source row read by ``SELECT`` becomes exactly the
strings capture produces from the binlog (docs/capture.md, "Value encoding").

The load reads with pymysql *without* result converters, so every value arrives as the
server's own text (or bytes for binary-charset columns) and only a few types need work:

* FLOAT / DOUBLE are selected as ``CAST(col AS DOUBLE)`` (the server prints a FLOAT column with
  6 significant digits, and ``DOUBLE(M,D)`` with D decimals) and re-encoded with capture's
  rules;
* BIT arrives as big-endian bytes -> unsigned decimal text;
* binary strings (BINARY, VARBINARY, BLOB) arrive as bytes -> ISO-8859-1 text;
* GEOMETRY arrives as MySQL's internal value (SRID + WKB) -> upper-case hex;
* ZEROFILL integers arrive zero-padded -> plain decimal text;
* JSON arrives as the server's text (MySQL prints it as capture does), bytes when the column's
  charset is binary.

The rules (which text each type gets) are :mod:`sluice_common.dmlvalues`'; this module knows
which columns need one and how pymysql hands their values over.

Everything else is already the capture string when the session has ``time_zone='+00:00'``
(TIMESTAMP in UTC) and a ``sql_mode`` without ``PAD_CHAR_TO_FULL_LENGTH`` (CHAR without
trailing spaces); :func:`session_sql` sets both. ``mysqlType`` is rebuilt from
``information_schema.COLUMNS`` in the binlog's spelling (no display widths).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pymysql import converters

from sluice_common.dmlvalues import (
    binary_text,
    bit_text,
    double_text,
    float_text,
    geometry_text,
    integer_text,
    string_text,
)
from sluice_common.mysqltypes import BINARY_TYPES, FLOAT_TYPES, GEOMETRY_TYPES, INTEGER_TYPES

#: pymysql encoders only (keyed by Python type): results stay the server's text / bytes
RAW_CONV = {k: v for k, v in converters.conversions.items() if not isinstance(k, int)}

Decoder = Callable[[object], str]


def session_sql() -> tuple[str, ...]:
    """Session settings that make SELECT text equal the capture strings."""
    return ("SET SESSION time_zone = '+00:00'", "SET SESSION sql_mode = 'NO_ENGINE_SUBSTITUTION'")


def _float(v: object) -> str:
    return float_text(float(v))  # type: ignore[arg-type]


def _bit(v: object) -> str:
    return bit_text(v) if isinstance(v, bytes | bytearray) else integer_text(v)


def _binary(v: object) -> str:
    return binary_text(v) if isinstance(v, bytes | bytearray) else str(v)


def _geometry(v: object) -> str:
    return geometry_text(v) if isinstance(v, bytes | bytearray) else str(v)


def _json(v: object) -> str:
    return string_text(bytes(v), "utf-8") if isinstance(v, bytes | bytearray) else str(v)


@dataclass(frozen=True)
class SourceColumn:
    """One source column as ``information_schema.COLUMNS`` describes it."""

    name: str
    data_type: str      # DATA_TYPE, lower case (``int``, ``varchar``, ``longtext`` for MariaDB JSON)
    column_type: str    # COLUMN_TYPE, lower case (``int(10) unsigned zerofill``, ``enum('a','b')``)

    @property
    def unsigned(self) -> bool:
        return " unsigned" in self.column_type

    def mysql_type(self) -> str:
        """The type text capture writes into ``mysqlType`` (binlog spelling: no display widths)."""
        dt, ct = self.data_type, self.column_type
        uns = " unsigned" if self.unsigned else ""
        if dt in INTEGER_TYPES or dt in FLOAT_TYPES:
            return dt + uns
        if dt == "decimal":
            return ct.split(" ")[0] + uns
        if dt == "year":
            return "year"
        if dt == "geomcollection":
            return "geometrycollection"
        return ct.replace(" unsigned", "").replace(" zerofill", "")

    def select_expr(self, ref: str) -> str:
        """The select-list expression for this column (``ref`` = the quoted column reference)."""
        if self.data_type in ("float", "double"):
            return f"CAST({ref} AS DOUBLE)"
        return ref

    def decoder(self) -> Decoder | None:
        """Text/bytes as read -> the capture string (None: the text is already it)."""
        dt = self.data_type
        if dt == "float":
            return _float
        if dt == "double":
            return double_text
        if dt == "bit":
            return _bit
        if dt in BINARY_TYPES:
            return _binary
        if dt in GEOMETRY_TYPES:
            return _geometry
        if dt in INTEGER_TYPES and "zerofill" in self.column_type:
            return integer_text
        return _json if dt == "json" else None


def row_decoder(columns: tuple[SourceColumn, ...]) -> Callable[[tuple], dict[str, str | None]]:
    """A function turning one raw SELECT row (in ``columns`` order) into a Dml ``data`` dict."""
    names = tuple(c.name for c in columns)
    fixes = tuple((i, d) for i, c in enumerate(columns) if (d := c.decoder()) is not None)
    if not fixes:
        def plain(row: tuple) -> dict[str, str | None]:
            return dict(zip(names, row))  # noqa: B905 - same length by construction
        return plain

    def fixed(row: tuple) -> dict[str, str | None]:
        r = list(row)
        for i, d in fixes:
            v = r[i]
            if v is not None:
                r[i] = d(v)
        return dict(zip(names, r))  # noqa: B905
    return fixed
