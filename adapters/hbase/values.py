"""Dml strings -> HBase cell bytes (and back), per mode and per MySQL or declared type.

STRING mode writes every value as its text in UTF-8, except binary columns (BINARY,
VARBINARY, *BLOB), whose text is ISO-8859-1 one char per byte: they are written as those
raw bytes. Declared ``$TYPE`` suffixes are ignored in STRING mode (as canal does).

NATIVE mode writes big-endian binary, as canal's ``Bytes.toBytes`` of a Java value. The
type is the declared ``$TYPE``; without one (or ``$DEFAULT``) it is inferred from the
column's MySQL type (:func:`native_kind`), chosen so every value fits losslessly:

=============================  ===========  ==============================================
MySQL type                     NATIVE kind  bytes
=============================  ===========  ==============================================
TINYINT (incl. TINYINT(1))     BYTE         1, signed
TINYINT UNSIGNED, SMALLINT     SHORT        2, signed (Bytes.toShort)
SMALLINT UNSIGNED, MEDIUMINT,  INTEGER      4, signed (Bytes.toInt)
INT
INT UNSIGNED, BIGINT           LONG         8, signed (Bytes.toLong)
BIGINT UNSIGNED                LONG         8, the unsigned value's bits (Long.toUnsignedString)
BIT(n)                         BITS         ceil(n/8), unsigned big-endian, as MySQL stores it
FLOAT                          FLOAT        4, IEEE 754 (Bytes.toFloat)
DOUBLE, REAL                   DOUBLE       8, IEEE 754 (Bytes.toDouble)
DECIMAL, NUMERIC               BIGDECIMAL   4-byte scale + two's-complement unscaled value
                                            (Bytes.toBigDecimal; scale kept: 1.50 stays 1.50)
YEAR                           SHORT        2 (0 for the zero year)
BINARY, VARBINARY, *BLOB       BYTES        the raw bytes
everything else                STRING       UTF-8 text: CHAR/VARCHAR/TEXT, ENUM, SET, JSON,
                                            DATE, DATETIME, TIMESTAMP (UTC), TIME, GEOMETRY
=============================  ===========  ==============================================

Declared types convert the text: ``$INTEGER/$LONG/$SHORT/$BYTE`` need an integer that fits
the width (signed or unsigned range), ``$BOOLEAN`` 0/1/true/false (one byte, 0xFF true),
``$DATE`` a date/datetime taken as UTC (or epoch ms) -> 8-byte epoch milliseconds (zero
dates write no cell), ``$BYTES`` the raw bytes. A value that does not convert is a
TargetError naming the column: a declared type that loses data is a mapping bug.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation

from sluice_common.dmlvalues import float32_text
from sluice_common.mysqltypes import BINARY_TYPES, DECIMAL_TYPES, INTEGER_BYTES, is_binary, parse_type, signed_bytes

Encoder = Callable[[str], bytes | None]
Decoder = Callable[[bytes], str]

_WIDTH = {"BYTE": 1, "SHORT": 2, "INTEGER": 4, "LONG": 8}
_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?:[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?)?")
_F32 = struct.Struct(">f")
_F64 = struct.Struct(">d")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class ValueError_(ValueError):
    """A value that does not fit its declared type (the writer adds table/column/row)."""


def native_kind(mysql_type: str | None) -> str:
    """The NATIVE encoding inferred from a MySQL column type (see the module table)."""
    t = parse_type(mysql_type)
    name, unsigned = t.base, t.unsigned
    if name in ("bool", "boolean"):
        name = "tinyint"
    if name in INTEGER_BYTES:  # the smallest Java integer that holds every value (BIGINT UNSIGNED: its bits)
        size = signed_bytes(name, unsigned)
        return "BYTE" if size <= 1 else "SHORT" if size <= 2 else "INTEGER" if size <= 4 else "LONG"
    if name == "bit":
        return "BITS"
    if name == "float":
        return "FLOAT"
    if name in ("double", "real"):
        return "DOUBLE"
    if name in DECIMAL_TYPES:
        return "BIGDECIMAL"
    if name == "year":
        return "SHORT"
    if name in BINARY_TYPES:
        return "BYTES"
    return "STRING"


def kind_for(mode: str, declared: str | None, mysql_type: str | None) -> str:
    """The encoding one column gets: STRING mode -> STRING/BYTES; NATIVE -> declared or inferred."""
    if mode != "NATIVE":
        return "BYTES" if is_binary(mysql_type) else "STRING"
    if declared in (None, "", "DEFAULT"):
        return native_kind(mysql_type)
    return declared


def _latin1(v: str) -> bytes:
    return v.encode("latin-1")


def _text_bytes(binary: bool) -> Encoder:
    return _latin1 if binary else str.encode  # str.encode: UTF-8, no Python frame per value


def _integer(v: str) -> int:
    try:
        return int(v)
    except ValueError:
        pass
    try:
        d = Decimal(v)
    except InvalidOperation:
        raise ValueError_(f"{v!r} is not a number") from None
    if d != d.to_integral_value():
        raise ValueError_(f"{v!r} is not an integer")
    return int(d)


def _fixed_int(width: int) -> Encoder:
    lo, hi = -(1 << (8 * width - 1)), 1 << (8 * width)

    def enc(v: str) -> bytes:
        n = _integer(v)
        if not lo <= n < hi:
            raise ValueError_(f"{v} does not fit {8 * width} bits")
        return (n & (hi - 1)).to_bytes(width, "big")
    return enc


def _bits(nbits: int | None) -> Encoder:
    width = max(1, ((nbits or 1) + 7) // 8)
    return lambda v: int(v).to_bytes(width, "big")


def _boolean(v: str) -> bytes:
    t = v.strip().lower()
    if t in ("true", "false"):
        return b"\xff" if t == "true" else b"\x00"
    return b"\xff" if _integer(t) != 0 else b"\x00"


def _float(st: struct.Struct) -> Encoder:
    def enc(v: str) -> bytes:
        try:
            return st.pack(float(v))
        except (ValueError, OverflowError, struct.error):
            raise ValueError_(f"{v!r} is not a {8 * st.size}-bit float") from None
    return enc


def bigdecimal_bytes(v: str) -> bytes:
    """Java ``Bytes.toBytes(BigDecimal)``: 4-byte scale, then the unscaled value's minimal
    two's-complement big-endian bytes (``BigInteger.toByteArray``)."""
    try:
        d = Decimal(v)
    except InvalidOperation:
        raise ValueError_(f"{v!r} is not a decimal number") from None
    if not d.is_finite():
        raise ValueError_(f"{v!r} is not a finite decimal")
    sign, digits, exp = d.as_tuple()
    unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
    nbytes = (unscaled.bit_length() + 8) // 8  # room for the sign bit, at least one byte
    return (-exp).to_bytes(4, "big", signed=True) + unscaled.to_bytes(nbytes, "big", signed=True)


def epoch_millis(v: str) -> int | None:
    """A DATE/DATETIME/TIMESTAMP text taken as UTC (or an integer, epoch ms) -> epoch ms;
    None for zero and partial-zero dates (no instant to store)."""
    text = v.strip()
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    m = _DATE.fullmatch(text)
    if not m:
        raise ValueError_(f"{v!r} is not a date or datetime")
    y, mo, d, hh, mi, ss, frac = m.groups()
    if int(y) == 0 or int(mo) == 0 or int(d) == 0:
        return None
    try:
        dt = datetime(int(y), int(mo), int(d), int(hh or 0), int(mi or 0), int(ss or 0), tzinfo=UTC)
    except ValueError:
        raise ValueError_(f"{v!r} is not a valid date") from None
    delta = dt - _EPOCH
    millis = (delta.days * 86400 + delta.seconds) * 1000
    return millis + (int((frac or "0")[:3].ljust(3, "0")) if frac else 0)


def _date(v: str) -> bytes | None:
    ms = epoch_millis(v)
    return None if ms is None else ms.to_bytes(8, "big", signed=True)


def encoder(mode: str, declared: str | None, mysql_type: str | None) -> Encoder:
    """The function turning one column's Dml text into cell bytes (None: write no cell)."""
    kind = kind_for(mode, declared, mysql_type)
    binary = is_binary(mysql_type)
    if kind in ("STRING", "BYTES"):
        return _text_bytes(binary)
    if kind in _WIDTH:
        return _fixed_int(_WIDTH[kind])
    if kind == "BITS":
        return _bits(parse_type(mysql_type).width)
    if kind == "FLOAT":
        return _float(_F32)
    if kind == "DOUBLE":
        return _float(_F64)
    if kind == "BIGDECIMAL":
        return bigdecimal_bytes
    if kind == "BOOLEAN":
        return _boolean
    if kind == "DATE":
        return _date
    raise ValueError_(f"type ${kind} is not supported in NATIVE mode")


# -- reading back (tests, verification tools) ---------------------------------------------
def bigdecimal_text(b: bytes) -> str:
    """Inverse of :func:`bigdecimal_bytes`: the exact decimal text with its scale."""
    scale = int.from_bytes(b[:4], "big", signed=True)
    unscaled = int.from_bytes(b[4:], "big", signed=True)
    if scale <= 0:
        return str(unscaled * 10 ** -scale)
    sign, digits = ("-" if unscaled < 0 else ""), str(abs(unscaled)).rjust(scale + 1, "0")
    return f"{sign}{digits[:-scale]}.{digits[-scale:]}"


def decoder(mode: str, declared: str | None, mysql_type: str | None) -> Decoder:
    """Cell bytes -> the Dml text they were written from (inverse of :func:`encoder`)."""
    kind = kind_for(mode, declared, mysql_type)
    t = parse_type(mysql_type)
    name, unsigned = t.base, t.unsigned
    if kind in ("STRING", "BYTES"):
        return (lambda b: b.decode("latin-1")) if is_binary(mysql_type) else (lambda b: b.decode("utf-8"))
    if kind in _WIDTH or kind == "BITS":
        signed = kind != "BITS" and not unsigned
        fmt = "%04d" if name == "year" else "%d"
        return lambda b: fmt % int.from_bytes(b, "big", signed=signed)
    if kind == "FLOAT":
        return lambda b: float32_text(_F32.unpack(b)[0])
    if kind == "DOUBLE":
        return lambda b: repr(_F64.unpack(b)[0])
    if kind == "BIGDECIMAL":
        return bigdecimal_text
    if kind == "BOOLEAN":
        return lambda b: "1" if b != b"\x00" else "0"
    if kind == "DATE":
        def date(b: bytes) -> str:
            ms = int.from_bytes(b, "big", signed=True)
            dt = datetime.fromtimestamp(ms // 1000, UTC).replace(tzinfo=None)
            return dt.strftime("%Y-%m-%d %H:%M:%S") + (".%03d" % (ms % 1000) if ms % 1000 else "")
        return date
    raise ValueError_(f"type ${kind} is not supported in NATIVE mode")
