"""Value rules: one lossless text encoding per MySQL column type, read from row-image bytes.

Every decoder here is built once per column (``make_decoder``) and then called as
``dec(buf, pos) -> (text, next_pos)`` on the raw rows-event body, so the per-value path
is one call and a struct/int conversion. The rules (docs/capture.md has the table):

* integers (signed/unsigned, any width, TINYINT(1) too): decimal string, ``"255"``
* BIT(n): unsigned decimal string of the bits, ``b'101'`` -> ``"5"``
* FLOAT: shortest decimal text that reads back to the same float32; DOUBLE: ``repr``
* DECIMAL(p,s): exact, with exactly ``s`` fraction digits (``"-1.500"``)
* DATE/DATETIME(fsp)/TIME(fsp): as MySQL prints them, fraction with exactly fsp digits;
  zero and partial-zero dates stay as they are (``"0000-00-00"``), never NULL
* TIMESTAMP(fsp): the stored UTC instant as ``"YYYY-MM-DD HH:MM:SS[.f]"`` in **UTC**,
  independent of server and session time zone; zero timestamp -> ``"0000-00-00 00:00:00"``
* YEAR: four digits, ``"0000"`` for the zero year
* ENUM: the member text (``""`` for the invalid-value index 0); SET: members joined by
  ``,`` in definition order (``""`` when empty)
* text types: decoded with the column charset; binary types (BINARY, VARBINARY, BLOB):
  ISO-8859-1, one code point per byte (canal's convention, lossless)
* JSON (MySQL binary JSON): canonical JSON text as MySQL prints it; MariaDB JSON is text
* GEOMETRY: upper-case hex of MySQL's internal value (4-byte little-endian SRID + WKB)
"""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Callable, Sequence

from pymysqlreplication.constants import FIELD_TYPE as T

from sluice_common.mysqltypes import float32_text

Decoder = Callable[[bytes, int], tuple[str, int]]

_F32 = struct.Struct("<f")
_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
ZERO_DATETIME = "0000-00-00 00:00:00"


def _fixed(fmt: str) -> Decoder:
    st = struct.Struct(fmt)
    unpack, size = st.unpack_from, st.size

    def dec(buf: bytes, pos: int) -> tuple[str, int]:
        return str(unpack(buf, pos)[0]), pos + size
    return dec


def int_decoder(size: int, unsigned: bool) -> Decoder:
    """TINYINT/SMALLINT/MEDIUMINT/INT/BIGINT, signed or unsigned: decimal text."""
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
        return repr(unpack(buf, pos)[0]), pos + 8
    return dec


def decimal_size(precision: int, scale: int) -> int:
    """Bytes of MySQL's binary DECIMAL(precision, scale)."""
    intg0, intg0x = divmod(precision - scale, 9)
    frac0, frac0x = divmod(scale, 9)
    return intg0 * 4 + _DIG2BYTES[intg0x] + frac0 * 4 + _DIG2BYTES[frac0x]


def decimal_decoder(precision: int, scale: int) -> Decoder:
    """Exact DECIMAL text with exactly ``scale`` fraction digits."""
    intg0, intg0x = divmod(precision - scale, 9)
    frac0, frac0x = divmod(scale, 9)
    lead = _DIG2BYTES[intg0x]
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
        text = str(ival)
        if scale:
            parts = []
            for _ in range(frac0):
                parts.append("%09d" % int.from_bytes(raw[p:p + 4], "big"))
                p += 4
            if tail:
                parts.append("%0*d" % (frac0x, int.from_bytes(raw[p:p + tail], "big")))
            frac = "".join(parts)
            text = f"{text}.{frac}"
            if negative and (ival or frac.strip("0")):
                text = "-" + text
        elif negative and ival:
            text = "-" + text
        return text, pos + size
    return dec


def _frac_reader(fsp: int) -> tuple[int, Callable[[bytes, int], str]]:
    nbytes = (fsp + 1) // 2
    if not fsp:
        return 0, lambda buf, pos: ""

    def frac(buf: bytes, pos: int) -> str:
        return "." + ("%0*d" % (2 * nbytes, int.from_bytes(buf[pos:pos + nbytes], "big")))[:fsp]
    return nbytes, frac


def date_decoder() -> Decoder:
    def dec(buf: bytes, pos: int) -> tuple[str, int]:
        v = buf[pos] | buf[pos + 1] << 8 | buf[pos + 2] << 16
        return "%04d-%02d-%02d" % (v >> 9, (v >> 5) & 15, v & 31), pos + 3
    return dec


def datetime2_decoder(fsp: int) -> Decoder:
    """DATETIME(fsp), MySQL 5.6+ format: local wall-clock text as stored."""
    nfrac, frac = _frac_reader(fsp)

    def dec(buf: bytes, pos: int) -> tuple[str, int]:
        v = int.from_bytes(buf[pos:pos + 5], "big") - 0x8000000000
        ymd, hms = v >> 17, v & 0x1FFFF
        ym = ymd >> 5
        text = "%04d-%02d-%02d %02d:%02d:%02d" % (ym // 13, ym % 13, ymd & 31, hms >> 12,
                                                 (hms >> 6) & 63, hms & 63)
        return text + frac(buf, pos + 5), pos + 5 + nfrac
    return dec


def timestamp2_decoder(fsp: int) -> Decoder:
    """TIMESTAMP(fsp): the UTC instant, printed in UTC."""
    nfrac, frac = _frac_reader(fsp)
    gmtime = time.gmtime

    def dec(buf: bytes, pos: int) -> tuple[str, int]:
        secs = int.from_bytes(buf[pos:pos + 4], "big")
        if secs == 0:
            text = ZERO_DATETIME
        else:
            t = gmtime(secs)
            text = "%04d-%02d-%02d %02d:%02d:%02d" % (t.tm_year, t.tm_mon, t.tm_mday,
                                                     t.tm_hour, t.tm_min, t.tm_sec)
        return text + frac(buf, pos + 4), pos + 4 + nfrac
    return dec


def time2_decoder(fsp: int) -> Decoder:
    """TIME(fsp), MySQL 5.6+ format: ``[-]HH:MM:SS[.f]`` (hours up to 838)."""
    nfrac = (fsp + 1) // 2
    frac_scale = {0: 0, 1: 10000, 2: 100, 3: 1}[nfrac]

    def dec(buf: bytes, pos: int) -> tuple[str, int]:
        intpart = int.from_bytes(buf[pos:pos + 3], "big") - 0x800000
        fv = int.from_bytes(buf[pos + 3:pos + 3 + nfrac], "big") if nfrac else 0
        if intpart < 0 and fv:
            intpart += 1
            fv -= 1 << (8 * nfrac)
        packed = (intpart << 24) + fv * frac_scale
        sign = "-" if packed < 0 else ""
        packed = abs(packed)
        hms, micros = packed >> 24, packed & 0xFFFFFF
        text = "%s%02d:%02d:%02d" % (sign, (hms >> 12) & 0x3FF, (hms >> 6) & 63, hms & 63)
        if fsp:
            text += "." + ("%06d" % micros)[:fsp]
        return text, pos + 3 + nfrac
    return dec


def old_time_decoder() -> Decoder:
    """TIME in the pre-5.6 format (3 bytes, HHMMSS as a signed integer)."""
    def dec(buf: bytes, pos: int) -> tuple[str, int]:
        v = int.from_bytes(buf[pos:pos + 3], "little", signed=True)
        sign, v = ("-", -v) if v < 0 else ("", v)
        return "%s%02d:%02d:%02d" % (sign, v // 10000, v // 100 % 100, v % 100), pos + 3
    return dec


def old_datetime_decoder() -> Decoder:
    """DATETIME in the pre-5.6 format (8 bytes, YYYYMMDDhhmmss as an integer)."""
    def dec(buf: bytes, pos: int) -> tuple[str, int]:
        v = int.from_bytes(buf[pos:pos + 8], "little")
        d, t = divmod(v, 1_000_000)
        return "%04d-%02d-%02d %02d:%02d:%02d" % (d // 10000, d // 100 % 100, d % 100,
                                                 t // 10000, t // 100 % 100, t % 100), pos + 8
    return dec


def old_timestamp_decoder() -> Decoder:
    """TIMESTAMP in the pre-5.6 format (4 bytes little-endian seconds), in UTC."""
    inner = timestamp2_decoder(0)

    def dec(buf: bytes, pos: int) -> tuple[str, int]:
        return inner(int.from_bytes(buf[pos:pos + 4], "little").to_bytes(4, "big"), 0)[0], pos + 4
    return dec


def year_decoder() -> Decoder:
    def dec(buf: bytes, pos: int) -> tuple[str, int]:
        v = buf[pos]
        return ("%04d" % (1900 + v) if v else "0000"), pos + 1
    return dec


def string_decoder(len_size: int, encoding: str | None, pad_to: int = 0) -> Decoder:
    """Length-prefixed bytes: decoded with ``encoding``, or ISO-8859-1 when binary (None).

    ``pad_to`` restores the 0x00 padding of BINARY(n) that the row image leaves out.
    """
    enc = encoding or "latin-1"

    def dec(buf: bytes, pos: int) -> tuple[str, int]:
        n = int.from_bytes(buf[pos:pos + len_size], "little")
        start = pos + len_size
        raw = buf[start:start + n]
        if pad_to and n < pad_to:
            raw = raw + b"\x00" * (pad_to - n)
        try:
            return raw.decode(enc), start + n
        except UnicodeDecodeError:
            return raw.decode(enc, "backslashreplace"), start + n
    return dec


def json_decoder(len_size: int) -> Decoder:
    """MySQL binary JSON -> canonical JSON text (MySQL's own spacing)."""
    from pymysqlreplication.json_binary import parse_json

    def dec(buf: bytes, pos: int) -> tuple[str, int]:
        n = int.from_bytes(buf[pos:pos + len_size], "little")
        start = pos + len_size
        if n == 0:
            return "null", start
        raw = buf[start:start + n]
        value = _jsonable(parse_json(raw[0], raw[1:]))
        return json.dumps(value, ensure_ascii=False, separators=(", ", ": ")), start + n
    return dec


def _jsonable(v: object) -> object:
    if isinstance(v, bytes):
        return v.decode("utf-8", "backslashreplace")
    if isinstance(v, dict):
        return {_jsonable(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    return v


def enum_decoder(size: int, names: Sequence[str]) -> Decoder:
    """ENUM index -> member text; index 0 (invalid value) -> ``""``."""
    table = ["", *names]

    def dec(buf: bytes, pos: int) -> tuple[str, int]:
        i = int.from_bytes(buf[pos:pos + size], "little")
        return (table[i] if i < len(table) else str(i)), pos + size
    return dec


def set_decoder(size: int, names: Sequence[str]) -> Decoder:
    """SET bitmask -> members joined by ``,`` in definition order."""
    members = tuple(names)

    def dec(buf: bytes, pos: int) -> tuple[str, int]:
        mask = int.from_bytes(buf[pos:pos + size], "little")
        return ",".join(m for i, m in enumerate(members) if mask >> i & 1), pos + size
    return dec


def bit_decoder(nbytes: int) -> Decoder:
    def dec(buf: bytes, pos: int) -> tuple[str, int]:
        return str(int.from_bytes(buf[pos:pos + nbytes], "big")), pos + nbytes
    return dec


def geometry_decoder(len_size: int) -> Decoder:
    def dec(buf: bytes, pos: int) -> tuple[str, int]:
        n = int.from_bytes(buf[pos:pos + len_size], "little")
        start = pos + len_size
        return buf[start:start + n].hex().upper(), start + n
    return dec


SIMPLE = {
    T.TINY: 1, T.SHORT: 2, T.INT24: 3, T.LONG: 4, T.LONGLONG: 8,
}
