"""Values read back from a source or a target, made comparable across SQL dialects.

``sluice verify`` compares rows that come from different drivers: pymysql on the source,
pymysql / psycopg / sqlite3 on RDB targets. The same value arrives in different Python
shapes (a BIT(10) as ``bytes`` from MariaDB and as the string ``'0000000101'`` from a
PostgreSQL ``bit varying``; a TIMESTAMP as a naive UTC ``datetime`` and as an aware one;
JSON as text and as a dict; FLOAT as the server's short text and as the float32's double).
:func:`normalizer` picks, from the *source* column type, one function that maps every such
shape to one canonical value; rows are then compared as tuples of those (docs/rdb.md's value
table is the list of shapes).

:func:`dml_text` turns a value read from the source with pymysql into the capture's Dml text
(docs/capture.md's value table, by :mod:`sluice_common.dmlvalues`' rules), so ES/HBase
verification can feed source rows through the adapters' own encoders.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from sluice_common.dmlvalues import (
    binary_text,
    date_text,
    datetime_text,
    decimal_value_text,
    double_text,
    float32_of,
    float_text,
    geometry_text,
    time_text,
    year_text,
)
from sluice_common.mysqltypes import BINARY_TYPES, DECIMAL_TYPES, GEOMETRY_TYPES, INTEGER_TYPES

#: values compared as bytes: binary strings and geometry (MySQL 8's ``geomcollection`` as text, as before)
BLOB_TYPES = (BINARY_TYPES | GEOMETRY_TYPES) - {"geomcollection"}
ZERO = "<zero date>"


def _bytes(v: Any) -> Any:
    return bytes(v) if isinstance(v, memoryview | bytearray) else v


def _int(v: Any) -> Any:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, Decimal | float):
        return int(v) if v == int(v) else v
    try:
        return int(str(v))
    except ValueError:
        return str(v)


def _bit(v: Any) -> Any:
    v = _bytes(v)
    if isinstance(v, bytes):
        return int.from_bytes(v, "big")
    if isinstance(v, str):
        return int(v, 2) if v and set(v) <= {"0", "1"} else int(v)
    return _int(v)


def _float32(v: Any) -> Any:
    try:
        return float32_of(float(v))
    except ValueError:
        return str(v)


def _double(v: Any) -> Any:
    try:
        return float(v)
    except ValueError:
        return str(v)


def _decimal(v: Any) -> Any:
    try:
        d = Decimal(str(v)) if not isinstance(v, Decimal) else v
    except InvalidOperation:
        return str(v)
    if not d:
        return "0"
    text = format(d, "f")  # exact: normalize() would round to the context's 28 digits
    return text.rstrip("0").rstrip(".") if "." in text else text


def _zero(text: str) -> bool:
    return text.startswith("0000-") or "-00" in text[:10]


def _datetime(v: Any) -> Any:
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.UTC).replace(tzinfo=None)
        if v in (dt.datetime.min, dt.datetime.max):
            return ZERO  # PostgreSQL's -infinity (zero dates, docs/rdb.md) read back by the driver
        return v.isoformat(" ", "microseconds")
    if isinstance(v, dt.date):
        return dt.datetime(v.year, v.month, v.day).isoformat(" ", "microseconds")
    text = str(v)
    if _zero(text) or "infinity" in text:
        return ZERO
    try:
        return dt.datetime.fromisoformat(text).isoformat(" ", "microseconds")
    except ValueError:
        return text


def _date(v: Any) -> Any:
    if isinstance(v, dt.datetime):
        return v.date().isoformat()
    if isinstance(v, dt.date):
        return ZERO if v in (dt.date.min, dt.date.max) else v.isoformat()
    text = str(v)
    return ZERO if _zero(text) or "infinity" in text else text


def _time(v: Any) -> Any:
    if isinstance(v, dt.timedelta):
        return v // dt.timedelta(microseconds=1)
    if isinstance(v, dt.time):
        return (((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000) + v.microsecond
    text = str(v).strip()
    neg = text.startswith("-")
    try:
        h, m, s = text.lstrip("-").split(":")
        us = round((int(h) * 3600 + int(m) * 60 + float(s)) * 1_000_000)
        return -us if neg else us
    except ValueError:
        return text


def _json(v: Any) -> Any:
    """A JSON document by value: keys sorted, each number by its exact value (PostgreSQL's jsonb
    writes MySQL's ``1e300`` as its 301 digits: a probe found such rows never verified clean)."""
    if isinstance(v, bytes | memoryview):
        v = bytes(v).decode("utf-8", "replace")
    if isinstance(v, str):
        try:
            v = json.loads(v, parse_float=Decimal, parse_int=Decimal)
        except ValueError:
            return v
    return json.dumps(_json_numbers(v), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _json_numbers(v: Any) -> Any:
    """Numbers as a marked string of their exact value (a document's strings cannot hold U+0000 in
    jsonb; a MySQL document's string that does would read as a number here: harmless)."""
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, int | float | Decimal):
        d = Decimal(repr(v)) if isinstance(v, float) else Decimal(v)
        return "\x00" + _decimal(d)
    if isinstance(v, dict):
        return {k: _json_numbers(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_json_numbers(x) for x in v]
    return v


def _text(v: Any) -> Any:
    v = _bytes(v)
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return v if isinstance(v, str) else str(v)


def _char(v: Any) -> Any:
    t = _text(v)
    return t.rstrip(" ") if isinstance(t, str) else t  # CHAR(n): MySQL strips the padding, PostgreSQL keeps it


def _binary(v: Any) -> Any:
    v = _bytes(v)
    if isinstance(v, str):
        return v.encode("latin-1", "replace")
    return v


def _bool_or_int(v: Any) -> Any:
    return int(v) if isinstance(v, bool) else _int(v)


def normalizer(data_type: str, column_type: str = "") -> Callable[[Any], Any]:
    """The canonical form of a source column's values (by its MySQL DATA_TYPE / COLUMN_TYPE)."""
    t = (data_type or "").lower()
    if t == "bit":
        return _bit
    if t in INTEGER_TYPES or t == "year":
        return _bool_or_int
    if t == "float":
        return _float32
    if t in ("double", "real"):
        return _double
    if t in DECIMAL_TYPES:
        return _decimal
    if t in ("datetime", "timestamp"):
        return _datetime
    if t == "date":
        return _date
    if t == "time":
        return _time
    if t == "json":
        return _json
    if t in BLOB_TYPES:
        return _binary
    if t == "char":
        return _char
    return _text


def normalize_row(row: tuple, funcs: list[Callable[[Any], Any]]) -> tuple:
    """Apply the per-column normalizers (None stays None)."""
    return tuple(None if v is None else f(v) for v, f in zip(row, funcs, strict=True))


# -- source value -> capture Dml text ---------------------------------------------------------
def _fsp(column_type: str) -> int:
    if "(" in column_type:
        try:
            return int(column_type.split("(", 1)[1].split(")", 1)[0])
        except ValueError:
            return 0
    return 0


def dml_text(data_type: str, column_type: str, v: Any) -> str | None:
    """The capture's text for a value pymysql read from the source (session time zone UTC)."""
    if v is None:
        return None
    t = (data_type or "").lower()
    ct = (column_type or "").lower()
    if t == "bit":
        return str(_bit(v))
    if t == "year":
        return year_text(int(v))
    if t == "float":
        return float_text(float(v))
    if t in ("double", "real"):
        return double_text(v)
    if isinstance(v, Decimal):
        return decimal_value_text(v)
    if t in ("datetime", "timestamp") and isinstance(v, dt.datetime):
        return datetime_text(v.year, v.month, v.day, v.hour, v.minute, v.second, v.microsecond, _fsp(ct))
    if t == "date" and isinstance(v, dt.date):
        return date_text(v.year, v.month, v.day)
    if t == "time" and isinstance(v, dt.timedelta):
        us = v // dt.timedelta(microseconds=1)
        s, frac = divmod(abs(us), 1_000_000)
        return time_text(us < 0, s // 3600, s // 60 % 60, s % 60, frac, _fsp(ct))
    v = _bytes(v)
    if isinstance(v, bytes):
        return geometry_text(v) if t in GEOMETRY_TYPES else binary_text(v)
    return str(v)
