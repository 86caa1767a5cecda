"""MySQL binary JSON as the text MySQL prints, opaque values included.

A MySQL JSON document can hold *opaque* values: a DECIMAL (``JSON_OBJECT('price', price)`` of a
DECIMAL column), a DATE, TIME, DATETIME or TIMESTAMP, or bytes of another type. python-mysql-replication's
parser gives a ``Decimal`` (which ``json.dumps`` refuses: capture stopped for good, a new user's probe),
a ``datetime`` for DATE and DATETIME alike, a TIME without its sign, and other types' bytes decoded
with errors ignored; and Python prints a double otherwise than MySQL (``1e+300`` for ``1e300``).
:func:`parse` reads them with its parser but turns each opaque value and each double into
:class:`Raw`, MySQL's own text for it (``9.99``, ``-0.500``, ``"2024-01-02"``,
``"2024-01-02 03:04:05.500000"``, ``"-838:04:05.000000"``, ``"base64:type15:AP8="``), and
:func:`render` writes a document holding them. The partial-update path (:mod:`.jsondiff`) reads the
before image's text with :func:`loads`, which keeps each number's literal as written.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from pymysqlreplication import json_binary
from pymysqlreplication.constants import FIELD_TYPE as T
from pymysqlreplication.util.bytes import decode_decimal, decode_variable_length

from sluice_common.dmlvalues import json_text

_DATES = frozenset({T.DATE, T.NEWDATE})
_DATETIMES = frozenset({T.DATETIME, T.DATETIME2, T.TIMESTAMP, T.TIMESTAMP2})
_TIMES = frozenset({T.TIME, T.TIME2})


class Raw:
    """JSON text written as it is (not a ``str``: ``json.dumps`` refuses it, so :func:`render` takes over)."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Raw) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return f"Raw({self.text!r})"


def _opaque(data: bytes) -> Raw | None:
    """An opaque value (its field type, a variable length, the bytes) as MySQL prints it."""
    if len(data) < 1:
        return None
    kind = data[0]
    n, k = decode_variable_length(data[1:])
    body = bytes(data[1 + k:1 + k + n])
    if kind in (T.NEWDECIMAL, T.DECIMAL) and len(body) >= 2:
        return Raw(format(decode_decimal(body), "f"))
    if (kind in _DATES or kind in _DATETIMES or kind in _TIMES) and len(body) >= 8:
        packed = int.from_bytes(body[:8], "little", signed=True)
        sign, packed = ("-", -packed) if packed < 0 else ("", packed)
        usec, whole = packed % (1 << 24), packed >> 24
        hms = whole % (1 << 17) if kind not in _TIMES else whole
        clock = f"{hms >> 12:02d}:{(hms >> 6) % 64:02d}:{hms % 64:02d}.{usec:06d}"
        if kind in _TIMES:
            return Raw(f'"{sign}{clock}"')
        ymd = whole >> 17
        date = f"{(ymd >> 5) // 13:04d}-{(ymd >> 5) % 13:02d}-{ymd % 32:02d}"
        return Raw(f'"{date}"' if kind in _DATES else f'"{date} {clock}"')
    text = base64.b64encode(body).decode()  # MySQL breaks its base64 into lines of 76
    return Raw(json_text(f"base64:type{kind}:" + "\n".join(text[i:i + 76] for i in range(0, len(text), 76))))


json_binary.parse_opaque = _opaque  # the library's parser calls it by its module name for each opaque value


def parse(raw: bytes) -> Any:
    """A MySQL binary JSON value (its type byte first) as Python values, opaque values and doubles as
    :class:`Raw` (MySQL's text of them)."""
    return _values(json_binary.parse_json(raw[0], raw[1:]))


def _values(v: Any) -> Any:
    """The parsed document with doubles as :class:`Raw` and byte strings (keys, values the parser left
    undecoded) as text, ``\\xNN`` for bytes that are not UTF-8."""
    if isinstance(v, float):
        return Raw(double_text(v))
    if isinstance(v, bytes):
        return v.decode("utf-8", "backslashreplace")
    if isinstance(v, dict):
        return {_values(k): _values(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_values(x) for x in v]
    return v


def double_text(x: float) -> str:
    """A JSON double as MySQL prints it: the shortest digits that read back as ``x`` (Python's
    ``repr``), in fixed notation from 1e-15 to below 1e15 (and beyond while digits remain after the
    point: ``1234567890123456.8``), with ``.0`` on a whole number; else ``d.ddde<exp>`` (``1e300``,
    ``1e15``, ``1.5e-16``; Python writes ``1e+300``, ``1000000000000000.0``, ``1.5e-16``, and
    ``1.5e-07`` where MySQL writes ``0.00000015``). Checked against MySQL 9.7 on 600 random
    doubles (tests/unit/test_capture_jsontext.py has the boundaries)."""
    r = repr(x)
    sign, r = ("-", r[1:]) if r.startswith("-") else ("", r)
    mant, _, exp = r.partition("e")
    whole, _, frac = mant.partition(".")
    digits = (whole + frac).lstrip("0").rstrip("0")
    if not digits:
        return sign + "0.0"
    # where the decimal point sits before the digits: 0.d1d2... x 10^point
    point = (len(whole) if whole != "0" else len(frac.lstrip("0")) - len(frac)) + (int(exp) if exp else 0)
    n = len(digits)
    if -14 <= point <= 15 or 15 < point < n:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        if point >= n:
            return f"{sign}{digits}{'0' * (point - n)}.0"
        return f"{sign}{digits[:point]}.{digits[point:]}"
    return f"{sign}{digits[0]}{'.' + digits[1:] if n > 1 else ''}e{point - 1}"


def loads(text: str) -> Any:
    """A document's text, each non-integer number kept as its literal (:class:`Raw`)."""
    return json.loads(text, parse_float=Raw)


def render(doc: Any) -> str:
    """The document's text as MySQL prints it (``", "`` and ``": "`` separators, non-ASCII kept)."""
    try:
        return json_text(doc)
    except TypeError:  # a Raw in it
        return _render(doc)


def _render(v: Any) -> str:
    if isinstance(v, Raw):
        return v.text
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json_text(k)}: {_render(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(_render(x) for x in v) + "]"
    return json_text(v)
