"""Dml strings -> values for the reflected target column type, per dialect, lossless.

The capture stage writes every MySQL value as text (pipeline/capture/values.py). A
converter is chosen once per (target column type, source ``mysqlType``) and called per
value; ``None`` as a converter means "pass the string as is" (the fast path: MySQL parses
its own text formats exactly, PostgreSQL receives untyped text and parses it for the
column). docs/rdb.md has the table; :func:`suggest_type` is the recommended target type.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from typing import Any

from sqlalchemy import types as sa
from sqlalchemy.dialects import mysql as my
from sqlalchemy.dialects import postgresql as pg

from sluice_common.mysqltypes import (
    BINARY_TYPES,
    FLOAT_TYPES,
    GEOMETRY_TYPES,
    INTEGER_BYTES,
    integer_range,
    parse_type,
    signed_bytes,
)

Converter = Callable[[str | None], Any]

INT64 = integer_range("bigint", unsigned=False)


def source_kind(mysql_type: str | None) -> str:
    """binary | geometry | bit | int | timestamp | datetime | date | ... | text."""
    base = parse_type(mysql_type).base
    if base in BINARY_TYPES:
        return "binary"
    if base in GEOMETRY_TYPES:
        return "geometry"
    if base in INTEGER_BYTES:
        return "int"
    return base or "text"


def _latin1(v: str | None) -> bytes | None:
    return None if v is None else v.encode("latin-1")


def _hex(v: str | None) -> bytes | None:
    return None if v is None else bytes.fromhex(v)


def _utf8(v: str | None) -> bytes | None:
    return None if v is None else v.encode("utf-8")


def _int(v: str | None) -> int | None:
    return None if v is None else int(v)


def is_int_converter(conv: Converter | None) -> bool:
    """The converter of integer target columns on MySQL (literals.py writes those with ``%d``)."""
    return conv is _int


def _float(v: str | None) -> float | None:
    return None if v is None else float(v)


_F32 = struct.Struct("<f")
FLT_MAX = 3.4028234663852886e38
_F32_LIMIT = 3.4028235677973366e38  # FLT_MAX + half an ulp: still rounds to FLT_MAX


def _float32(v: str | None) -> float | None:
    """The float32 the text denotes, as its exact double ('3.4028235e+38' -> FLT_MAX).

    MySQL range-checks the parsed double before rounding it to FLOAT, so the shortest text of
    FLT_MAX would be 'out of range'; the exact double is accepted everywhere."""
    if v is None:
        return None
    x = float(v)
    try:
        return _F32.unpack(_F32.pack(x))[0]
    except OverflowError:
        if abs(x) < _F32_LIMIT:
            return math.copysign(FLT_MAX, x)
        raise ValueError(f"{v} is out of the FLOAT range") from None


def _int64(v: str | None) -> int | None:
    if v is None:
        return None
    n = int(v)
    if not INT64[0] <= n <= INT64[1]:
        raise ValueError(f"{v} does not fit a 64-bit SQLite INTEGER (declare the column TEXT)")
    return n


def _bool(v: str | None) -> bool | None:
    if v is None:
        return None
    if v in ("0", "1"):
        return v == "1"
    raise ValueError(f"{v} does not fit boolean (map TINYINT(1) to smallint to keep values other than 0/1)")


def is_zero_date(v: str) -> bool:
    """'0000-00-00', '2024-00-10', '0000-01-01 ...': dates PostgreSQL cannot hold."""
    return v[:4] == "0000" or v[5:7] == "00" or v[8:10] == "00"


def _pg_date(v: str | None) -> str | None:
    return "-infinity" if v is not None and is_zero_date(v) else v


def _pg_timestamptz(v: str | None) -> str | None:
    if v is None:
        return None
    return "-infinity" if is_zero_date(v) else v + "+00"


def _bits(width: int) -> Converter:
    def conv(v: str | None) -> str | None:
        return None if v is None else format(int(v), "b").zfill(width)
    return conv


def _source_bytes(kind: str) -> Converter:
    return {"binary": _latin1, "geometry": _hex}.get(kind, _utf8)


def converter(family: str, target: sa.TypeEngine, mysql_type: str | None) -> Converter | None:
    """The converter for one column, or None to pass the Dml string unchanged."""
    kind = source_kind(mysql_type)
    if family == "mysql":
        if isinstance(target, (my.BIT, sa.Integer)):  # ints bind as numbers (keys compare as numbers)
            return _int
        if isinstance(target, my.FLOAT) and kind not in ("binary", "geometry"):
            return _float32
        return {"binary": _latin1, "geometry": _hex}.get(kind)
    if family == "sqlite":
        if kind in ("binary", "geometry") or isinstance(target, sa.LargeBinary):
            return _source_bytes(kind)
        if isinstance(target, sa.Integer):
            return _int64
        if isinstance(target, sa.Float):
            return _float
        return None
    # postgresql
    if isinstance(target, sa.LargeBinary):
        return _source_bytes(kind)
    if isinstance(target, sa.Boolean):
        return _bool
    if isinstance(target, sa.Integer):
        return _int
    if isinstance(target, pg.REAL):
        return _float32
    if isinstance(target, sa.Float):
        return _float
    if isinstance(target, pg.BIT):
        width = target.length if not target.varying else int(parse_type(mysql_type).args or 1)
        return _bits(width or 1)
    if isinstance(target, sa.DateTime) and target.timezone:
        return _pg_timestamptz
    if isinstance(target, (sa.DateTime, sa.Date)):
        return _pg_date
    return None


def needs_relaxed(family: str, target: sa.TypeEngine) -> bool:
    """MySQL ENUM without a '' member: '' (the invalid-value index 0) is only storable non-strict."""
    return family == "mysql" and isinstance(target, my.ENUM) and "" not in target.enums


def suggest_type(family: str, mysql_type: str) -> str:
    """The target column type Sluice recommends for a source ``mysqlType`` (docs/rdb.md)."""
    t = parse_type(mysql_type)
    base, args, unsigned = t.base, t.args, t.unsigned
    if family == "mysql":
        return mysql_type
    if family == "sqlite":
        if base in INTEGER_BYTES and signed_bytes(base, unsigned) <= 8:
            return "INTEGER"
        if base in FLOAT_TYPES:
            return "REAL"
        if base == "bit" and int(args or 1) < 64:
            return "INTEGER"
        if base in BINARY_TYPES or base in GEOMETRY_TYPES:
            return "BLOB"
        return "TEXT"
    if base in INTEGER_BYTES:
        size = signed_bytes(base, unsigned)
        return "smallint" if size <= 2 else "integer" if size <= 4 else "bigint" if size <= 8 else "numeric(20,0)"
    table = {
        "decimal": f"numeric({args})" if args else "numeric", "numeric": f"numeric({args})" if args else "numeric",
        "float": "real", "double": "double precision", "real": "double precision",
        "bit": f"bit varying({args or 1})", "date": "date", "year": "smallint", "time": "interval",
        "datetime": f"timestamp({args or 0})", "timestamp": f"timestamptz({args or 0})",
        "json": "jsonb", "enum": "text", "set": "text", "char": f"varchar({args or 1})",
        "varchar": f"varchar({args})" if args else "text",
    }
    if base in table:
        return table[base]
    if base in BINARY_TYPES or base in GEOMETRY_TYPES:
        return "bytea"
    return "text"
