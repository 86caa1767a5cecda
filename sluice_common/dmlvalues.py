"""The Dml record's value rules: a decoded MySQL value -> its string, written once.

The Dml record (docs/capture.md, "Value encoding"; /shared/DESIGN.md) carries every value as a
string or null. Three readers produce those strings and must agree byte for byte: capture from
the binlog's row images (``pipeline/capture/values.py``; ``native/src/values.rs`` is the same
rules in Rust, held equal by tests/unit/test_capture_native.py), the full load from a
``SELECT`` (``pipeline/etl/values.py``) and ``verify`` from values pymysql converted
(``sluice_common/normalize.py``). Each of them decodes its own input (bytes at an offset, the
server's text, a Python ``datetime``) into the parts below; the text is made here:

* integers: decimal text (:func:`integer_text`); BIT(n): the bits as an unsigned number,
  big-endian (:func:`bit_text`)
* FLOAT: the shortest decimal that reads back as the same float32 (:func:`float_text`,
  :func:`float32_text`); DOUBLE: Python's ``repr`` (:func:`double_text`)
* DECIMAL(p,s): exact, exactly ``s`` fraction digits, no sign on zero (:func:`decimal_text`)
* DATE / DATETIME(fsp) / TIME(fsp): as MySQL prints them, the fraction with exactly fsp digits
  (:func:`date_text`, :func:`datetime_text`, :func:`time_text`: TIME keeps its sign and hours
  past 24); zero dates stay as they are; TIMESTAMP: the UTC instant (:func:`utc_text`)
* YEAR: four digits, ``"0000"`` for the zero year (:func:`year_text`)
* ENUM: the member (``""`` for index 0); SET: members joined by ``,`` in definition order
* text: decoded with the column's charset (:func:`string_text`); binary strings: ISO-8859-1, one
  code point per byte (:func:`binary_text`); GEOMETRY: upper-case hex (:func:`geometry_text`)
* JSON: MySQL's canonical text (``", "`` and ``": "`` separators, :func:`json_text`)

It lives in :mod:`sluice_common`, below ``pipeline`` and ``adapters``; the type names are
:mod:`sluice_common.mysqltypes`'.
"""

from __future__ import annotations

import json
import math
import struct
import time
from collections.abc import Sequence
from decimal import Decimal

#: the encoding of a binary string's text: one code point per byte (canal's, lossless)
BINARY_ENCODING = "latin-1"
#: the zero DATETIME / TIMESTAMP
ZERO_DATETIME = "0000-00-00 00:00:00"

_F32 = struct.Struct("<f")


def integer_text(v: object) -> str:
    """An integer (any width, signed or not; also a ZEROFILL column's padded text): ``"255"``."""
    return str(int(v))  # type: ignore[call-overload]


def bit_text(raw: bytes) -> str:
    """BIT(n): the bytes as one big-endian unsigned number, ``b'101'`` -> ``"5"``."""
    return str(int.from_bytes(raw, "big"))


def float32_of(x: float) -> float:
    """A double rounded to the nearest float32 (past float32's range: an infinity)."""
    try:
        return _F32.unpack(_F32.pack(x))[0]
    except OverflowError:  # rounds past FLT_MAX
        return math.copysign(math.inf, x)


def float32_text(x: float) -> str:
    """Shortest decimal text that reads back as the same float32 value (``x`` is one)."""
    pack, unpack = _F32.pack, _F32.unpack
    for digits in range(1, 10):
        s = "%.*g" % (digits, x)
        try:
            if unpack(pack(float(s)))[0] == x:
                return repr(float(s))
        except OverflowError:  # rounded past float32's range (e.g. 3.403e+38)
            continue
    return repr(x)  # pragma: no cover - 9 digits always round-trip a float32


def float_text(x: float) -> str:
    """FLOAT: the float32 nearest ``x`` as :func:`float32_text`."""
    return float32_text(float32_of(x))


def double_text(x: object) -> str:
    """DOUBLE: ``repr`` of the double."""
    return repr(float(x))  # type: ignore[arg-type]


def decimal_text(negative: bool, integer: int, fraction: str) -> str:
    """DECIMAL(p,s) from its parts: ``fraction`` holds exactly ``s`` digits (``""`` for s=0);
    a zero is never signed."""
    text = f"{integer}.{fraction}" if fraction else str(integer)
    return "-" + text if negative and (integer or fraction.strip("0")) else text


def decimal_value_text(d: Decimal) -> str:
    """DECIMAL from a :class:`~decimal.Decimal` read from the server's text (its exponent is the
    column's scale): no exponent notation, ``Decimal('0E-7')`` -> ``"0.0000000"``."""
    integer, _, fraction = format(d.copy_abs(), "f").partition(".")  # abs() would round to 28 digits
    return decimal_text(d.is_signed(), int(integer), fraction)


def fraction_text(micros: int, fsp: int) -> str:
    """The fraction of a temporal value: ``""`` for fsp 0, else ``.`` and its first fsp digits."""
    return "." + ("%06d" % micros)[:fsp] if fsp else ""


def date_text(year: int, month: int, day: int) -> str:
    """DATE, zero parts kept: ``"0000-00-00"``, ``"2020-00-00"``."""
    return "%04d-%02d-%02d" % (year, month, day)


def datetime_text(year: int, month: int, day: int, hour: int, minute: int, second: int,
                  micros: int = 0, fsp: int = 0) -> str:
    """DATETIME(fsp) (and TIMESTAMP's UTC wall clock): ``"2024-02-29 12:34:56.789"``."""
    return ("%04d-%02d-%02d %02d:%02d:%02d" % (year, month, day, hour, minute, second)
            + fraction_text(micros, fsp))


def utc_text(secs: int) -> str:
    """TIMESTAMP: the Unix time ``secs`` as UTC wall clock (no fraction); 0 is the zero timestamp."""
    if secs == 0:
        return ZERO_DATETIME
    t = time.gmtime(secs)
    return datetime_text(t.tm_year, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec)


def time_text(negative: bool, hours: int, minutes: int, seconds: int, micros: int = 0, fsp: int = 0) -> str:
    """TIME(fsp): ``[-]HH:MM:SS[.f]``, hours up to 838 (``"-838:59:59"``)."""
    return ("%s%02d:%02d:%02d" % ("-" if negative else "", hours, minutes, seconds)
            + fraction_text(micros, fsp))


def year_text(year: int) -> str:
    """YEAR: four digits; the zero year is ``"0000"``."""
    return "%04d" % year


def enum_text(members: Sequence[str], index: int) -> str:
    """ENUM: the member at 1-based ``index``; 0 (the invalid value) -> ``""``; an index past the
    members (never written by MySQL) -> its number."""
    if index == 0:
        return ""
    return members[index - 1] if index <= len(members) else str(index)


def set_text(members: Sequence[str], mask: int) -> str:
    """SET: the members whose bit is set, joined by ``,`` in definition order (``""`` when none)."""
    return ",".join(m for i, m in enumerate(members) if mask >> i & 1)


def string_text(raw: bytes, encoding: str) -> str:
    """Text of a character column, decoded with its charset's codec; bytes that do not decode
    stay visible as ``\\xNN`` escapes."""
    return raw.decode(encoding, "backslashreplace")


def binary_text(raw: bytes | bytearray | memoryview) -> str:
    """A binary string (BINARY, VARBINARY, BLOB): ISO-8859-1, one code point per byte."""
    return bytes(raw).decode(BINARY_ENCODING)


def geometry_text(raw: bytes | bytearray | memoryview) -> str:
    """GEOMETRY: upper-case hex of MySQL's internal value (4-byte little-endian SRID + WKB)."""
    return bytes(raw).hex().upper()


def json_text(doc: object) -> str:
    """JSON: the document as MySQL prints it (``", "`` and ``": "`` separators, non-ASCII kept)."""
    return json.dumps(doc, ensure_ascii=False, separators=(", ", ": "))
