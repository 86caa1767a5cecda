"""Capture's side of the value rules: MySQL's row-image bytes, read at an offset.

The rules themselves (which text each type gets: docs/capture.md has the table) are
:mod:`sluice_common.dmlvalues`'; this module knows only the binlog's byte layouts (little- or
big-endian integers, DECIMAL's base-10**9 groups, packed DATETIME2/TIME2 fields, the 1900-based
YEAR byte, ENUM indexes and SET bitmasks, length prefixes, MySQL's binary JSON) and hands the
parts over. ``native/src/values.rs`` is the same reading in Rust (tests/unit/test_capture_native.py
holds both equal).

Every decoder here is built once per column (``ColumnSpec.decoder``) and then called as
``dec(buf, pos) -> (text, next_pos)`` on the raw rows-event body, so the per-value path
is one call and a struct/int conversion.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence

from sluice_common.dmlvalues import (
    binary_text,
    bit_text,
    date_text,
    datetime_text,
    decimal_text,
    double_text,
    enum_text,
    float32_text,
    fraction_text,
    geometry_text,
    set_text,
    string_text,
    time_text,
    utc_text,
    year_text,
)

Decoder = Callable[[bytes, int], tuple[str, int]]
#: the Unix epoch as TIMESTAMP text (UTC)
EPOCH = "1970-01-01 00:00:00"

_F32 = struct.Struct("<f")
_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def _fixed(fmt: str) -> Decoder:
    st = struct.Struct(fmt)
    unpack, size = st.unpack_from, st.size

    def dec(buf: bytes, pos: int) -> tuple[str, int]:
        return str(unpack(buf, pos)[0]), pos + size  # integer_text without the int() of a str
    return dec


def int_decoder(size: int, unsigned: bool) -> Decoder:
    """TINYINT/SMALLINT/MEDIUMINT/INT/BIGINT (``size`` bytes, little-endian), signed or unsigned."""
    if size == 3:
        def dec24(buf: bytes, pos: int) -> tuple[str, int]:
            return str(int.from_bytes(buf[pos:pos + 3], "little", signed=not unsigned)), pos + 3
        return dec24
    code = {1: "b", 2: "h", 4: "i", 8: "q"}[size]
    return _fixed("<" + (code.upper() if unsigned else code))


def float_decoder() -> Decoder:
    unpack = _F32.unpack_from

    def dec(buf: bytes, pos: int) -> tuple[str, int]:
        return float32_text(unpack(buf, pos)[0]), pos + 4
    return dec


def double_decoder() -> Decoder:
    unpack = struct.Struct("<d").unpack_from

    def dec(buf: bytes, pos: int) -> tuple[str, int]:
        return double_text(unpack(buf, pos)[0]), pos + 8
    return dec


def decimal_size(precision: int, scale: int) -> int:
    """Bytes of MySQL's binary DECIMAL(precision, scale)."""
    intg0, intg0x = divmod(precision - scale, 9)
    frac0, frac0x = divmod(scale, 9)
    return intg0 * 4 + _DIG2BYTES[intg0x] + frac0 * 4 + _DIG2BYTES[frac0x]


def decimal_decoder(precision: int, scale: int) -> Decoder:
    """MySQL's binary DECIMAL: sign bit, base-10**9 groups of the integer and fraction digits."""
    intg0 = (precision - scale) // 9
    frac0, frac0x = divmod(scale, 9)
    lead = _DIG2BYTES[(precision - scale) % 9]
    tail = _DIG2BYTES[frac0x]
    size = decimal_size(precision, scale)

    def dec(buf: bytes, pos: int) -> tuple[str, int]:
        raw = bytearray(buf[pos:pos + size])
        negative = not raw[0] & 0x80
        raw[0] ^= 0x80
        if negative:
            raw = bytearray(b ^ 0xFF for b in raw)
        ival = int.from_bytes(raw[:lead], "big") if lead else 0
        p = lead
        for _ in range(intg0):
            ival = ival * 1_000_000_000 + int.from_bytes(raw[p:p + 4], "big")
            p += 4
        parts = []
        for _ in range(frac0):
            parts.append("%09d" % int.from_bytes(raw[p:p + 4], "big"))
            p += 4
        if tail:
            parts.append("%0*d" % (frac0x, int.from_bytes(raw[p:p + tail], "big")))
        return decimal_text(negative, ival, "".join(parts)), pos + size
    return dec


def _frac_reader(fsp: int) -> tuple[int, Callable[[bytes, int], int]]:
    """(bytes, reader of microseconds) of a DATETIME2/TIMESTAMP2 fraction: fsp digits in
    (fsp + 1) // 2 big-endian bytes, in units of 10**(6 - 2 * bytes) microseconds."""
    nbytes = (fsp + 1) // 2
    if not fsp:
        return 0, lambda buf, pos: 0
    unit = 10 ** (6 - 2 * nbytes)

    def frac(buf: bytes, pos: int) -> int:
        return int.from_bytes(buf[pos:pos + nbytes], "big") * unit
    return nbytes, frac


def date_decoder() -> Decoder:
    def dec(buf: bytes, pos: int) -> tuple[str, int]:
        v = buf[pos] | buf[pos + 1] << 8 | buf[pos + 2] << 16
        return date_text(v >> 9, (v >> 5) & 15, v & 31), pos + 3
    return dec


def datetime2_decoder(fsp: int) -> Decoder:
    """DATETIME(fsp), MySQL 5.6+ format: local wall-clock text as stored."""
    nfrac, frac = _frac_reader(fsp)

    def dec(buf: bytes, pos: int) -> tuple[str, int]:
        v = int.from_bytes(buf[pos:pos + 5], "big") - 0x8000000000
        ymd, hms = v >> 17, v & 0x1FFFF
        ym = ymd >> 5
        return datetime_text(ym // 13, ym % 13, ymd & 31, hms >> 12, (hms >> 6) & 63, hms & 63,
                             frac(buf, pos + 5), fsp), pos + 5 + nfrac
    return dec


def timestamp2_decoder(fsp: int) -> Decoder:
    """TIMESTAMP(fsp): big-endian Unix seconds and a fraction; the UTC instant, printed in UTC."""
    nfrac, frac = _frac_reader(fsp)

    def dec(buf: bytes, pos: int) -> tuple[str, int]:
        secs = int.from_bytes(buf[pos:pos + 4], "big")
        micros = frac(buf, pos + 4)
        # 0 seconds with a fraction is not the zero TIMESTAMP (MariaDB stores an out-of-range value so)
        return (EPOCH if secs == 0 and micros else utc_text(secs)) + fraction_text(micros, fsp), pos + 4 + nfrac
    return dec


def time2_decoder(fsp: int) -> Decoder:
    """TIME(fsp), MySQL 5.6+ format: a packed signed value (hours up to 838)."""
    nfrac = (fsp + 1) // 2
    frac_scale = {0: 0, 1: 10000, 2: 100, 3: 1}[nfrac]

    def dec(buf: bytes, pos: int) -> tuple[str, int]:
        intpart = int.from_bytes(buf[pos:pos + 3], "big") - 0x800000
        fv = int.from_bytes(buf[pos + 3:pos + 3 + nfrac], "big") if nfrac else 0
        if intpart < 0 and fv:
            intpart += 1
            fv -= 1 << (8 * nfrac)
        packed = (intpart << 24) + fv * frac_scale
        negative = packed < 0
        packed = abs(packed)
        hms, micros = packed >> 24, packed & 0xFFFFFF
        return time_text(negative, (hms >> 12) & 0x3FF, (hms >> 6) & 63, hms & 63, micros, fsp), pos + 3 + nfrac
    return dec


def old_time_decoder() -> Decoder:
    """TIME in the pre-5.6 format (3 bytes, HHMMSS as a signed integer)."""
    def dec(buf: bytes, pos: int) -> tuple[str, int]:
        v = int.from_bytes(buf[pos:pos + 3], "little", signed=True)
        return time_text(v < 0, abs(v) // 10000, abs(v) // 100 % 100, abs(v) % 100), pos + 3
    return dec


def old_datetime_decoder() -> Decoder:
    """DATETIME in the pre-5.6 format (8 bytes, YYYYMMDDhhmmss as an integer)."""
    def dec(buf: bytes, pos: int) -> tuple[str, int]:
        v = int.from_bytes(buf[pos:pos + 8], "little")
        d, t = divmod(v, 1_000_000)
        return datetime_text(d // 10000, d // 100 % 100, d % 100, t // 10000, t // 100 % 100, t % 100), pos + 8
    return dec


def old_timestamp_decoder() -> Decoder:
    """TIMESTAMP in the pre-5.6 format (4 bytes little-endian seconds), in UTC."""
    def dec(buf: bytes, pos: int) -> tuple[str, int]:
        return utc_text(int.from_bytes(buf[pos:pos + 4], "little")), pos + 4
    return dec


def year_decoder() -> Decoder:
    """YEAR: one byte, years since 1900 (0: the zero year)."""
    def dec(buf: bytes, pos: int) -> tuple[str, int]:
        v = buf[pos]
        return year_text(1900 + v if v else 0), pos + 1
    return dec


def string_decoder(len_size: int, encoding: str | None, pad_to: int = 0) -> Decoder:
    """Length-prefixed bytes: text decoded with ``encoding``, or a binary string (None).

    ``pad_to`` restores the 0x00 padding of BINARY(n) that the row image leaves out.
    """
    def dec(buf: bytes, pos: int) -> tuple[str, int]:
        n = int.from_bytes(buf[pos:pos + len_size], "little")
        start = pos + len_size
        raw = buf[start:start + n]
        if pad_to and n < pad_to:
            raw = raw + b"\x00" * (pad_to - n)
        return (binary_text(raw) if encoding is None else string_text(raw, encoding)), start + n
    return dec


def json_decoder(len_size: int) -> Decoder:
    """MySQL binary JSON (length-prefixed) -> the document's text; an empty value is ``null``."""
    from .jsontext import parse, render

    def dec(buf: bytes, pos: int) -> tuple[str, int]:
        n = int.from_bytes(buf[pos:pos + len_size], "little")
        start = pos + len_size
        if n == 0:
            return "null", start
        raw = buf[start:start + n]
        return render(parse(raw)), start + n
    return dec


def enum_decoder(size: int, names: Sequence[str]) -> Decoder:
    """ENUM: a little-endian index of ``size`` bytes."""
    members = tuple(names)

    def dec(buf: bytes, pos: int) -> tuple[str, int]:
        return enum_text(members, int.from_bytes(buf[pos:pos + size], "little")), pos + size
    return dec


def set_decoder(size: int, names: Sequence[str]) -> Decoder:
    """SET: a little-endian bitmask of ``size`` bytes."""
    members = tuple(names)

    def dec(buf: bytes, pos: int) -> tuple[str, int]:
        return set_text(members, int.from_bytes(buf[pos:pos + size], "little")), pos + size
    return dec


def bit_decoder(nbytes: int) -> Decoder:
    """BIT(n): (n + 7) // 8 big-endian bytes."""
    def dec(buf: bytes, pos: int) -> tuple[str, int]:
        return bit_text(buf[pos:pos + nbytes]), pos + nbytes
    return dec


def geometry_decoder(len_size: int) -> Decoder:
    """GEOMETRY: length-prefixed internal value."""
    def dec(buf: bytes, pos: int) -> tuple[str, int]:
        n = int.from_bytes(buf[pos:pos + len_size], "little")
        start = pos + len_size
        return geometry_text(buf[start:start + n]), start + n
    return dec
