"""Values to JSON for Elasticsearch and OpenSearch: from the capture's strings and from re-queried rows.

Two inputs reach a document field: the Dml string of a binlog image (with the column's
``mysqlType``) and a value pymysql read when the mapping SQL was re-run (with the result
column's type code). Both first become one *canonical* Python value, so a document built
from the binlog equals the one re-queried from the source; then ``objFields`` and the
index's field type (``GET _mapping``) decide the JSON value. docs/es.md has the table.

canonical: integers/YEAR/BIT -> int; DECIMAL -> Decimal; FLOAT/DOUBLE -> float;
DATE -> date; DATETIME -> naive datetime; TIMESTAMP -> UTC datetime; zero/invalid dates ->
None; TIME -> "[-]HH:MM:SS[.ffffff]"; binary strings/BLOB -> bytes; GEOMETRY -> upper hex
of MySQL's internal value; JSON, text, ENUM, SET -> str.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any

from pymysql.constants import FIELD_TYPE as FT

from sluice_common.dmlvalues import decimal_value_text
from sluice_common.mysqltypes import BINARY_TYPES, DECIMAL_TYPES, GEOMETRY_TYPES, INTEGER_TYPES, parse_type
from sluice_common.mysqltypes import FLOAT_TYPES as MYSQL_FLOATS

Converter = Callable[[Any], Any]
UTC = dt.UTC

TEXT_TYPES = {"keyword", "text", "match_only_text", "wildcard", "constant_keyword", "search_as_you_type", "ip",
              "version"}
INT_TYPES = {"long", "integer", "short", "byte", "unsigned_long"}
FLOAT_TYPES = {"double", "float", "half_float", "scaled_float"}
OBJECT_TYPES = {"object", "nested", "flattened", "flat_object"}  # flat_object: OpenSearch's flattened


class FieldValueError(ValueError):
    """A value that cannot become the field's type (the writer names index, _id and field)."""


def column_kind(mysql_type: str | None) -> str:
    """int | decimal | float | date | datetime | timestamp | time | year | bit | binary |
    json | geometry | text, from a ``mysqlType`` such as ``bigint(20) unsigned``."""
    base = parse_type(mysql_type).base
    if base in INTEGER_TYPES or base in ("serial", "bool", "boolean"):
        return "int"
    if base in DECIMAL_TYPES:
        return "decimal"
    if base in MYSQL_FLOATS:
        return "float"
    if base in ("date", "datetime", "timestamp", "time", "year", "bit", "json"):
        return base
    if base in BINARY_TYPES:
        return "binary"
    if base in GEOMETRY_TYPES:
        return "geometry"
    return "text"


# -- canonical values ------------------------------------------------------------------------
def time_text(td: dt.timedelta) -> str:
    """A TIME value as ``[-]HH:MM:SS[.ffffff]`` (hours may exceed 24)."""
    micros = td.days * 86_400_000_000 + td.seconds * 1_000_000 + td.microseconds
    sign, micros = ("-", -micros) if micros < 0 else ("", micros)
    secs, frac = divmod(micros, 1_000_000)
    text = "%s%02d:%02d:%02d" % (sign, secs // 3600, secs // 60 % 60, secs % 60)
    return text + (".%06d" % frac if frac else "")


def _parse_time(text: str) -> str:
    sign = "-" if text.startswith("-") else ""
    hms, _, frac = text.lstrip("-").partition(".")
    h, m, s = (int(x) for x in hms.split(":"))
    micros = int((frac + "000000")[:6]) if frac else 0
    td = dt.timedelta(hours=h, minutes=m, seconds=s, microseconds=micros)
    return time_text(-td if sign else td)


def _date(text: str) -> dt.date | None:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        return None  # zero or partial-zero date


def _datetime(text: str) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError:
        return None


def _timestamp(text: str) -> dt.datetime | None:
    v = _datetime(text)
    return None if v is None else v.replace(tzinfo=UTC)


_FROM_TEXT: dict[str, Converter] = {
    "int": int, "year": int, "bit": int, "decimal": Decimal, "float": float,
    "date": _date, "datetime": _datetime, "timestamp": _timestamp, "time": _parse_time,
    "binary": lambda s: s.encode("latin-1"),  # capture: one code point per byte
    "json": str, "geometry": str, "text": str,
}


def from_capture(kind: str) -> Converter:
    """Dml string -> canonical value, for a column of this :func:`column_kind`."""
    return _FROM_TEXT[kind]


def _db_datetime(v: Any) -> Any:
    return v if isinstance(v, dt.datetime) else None


def _db_timestamp(v: Any) -> Any:
    return v.replace(tzinfo=UTC) if isinstance(v, dt.datetime) else None  # session time_zone is UTC


def _db_date(v: Any) -> Any:
    return v if isinstance(v, dt.date) else None


def _db_time(v: Any) -> Any:
    return time_text(v) if isinstance(v, dt.timedelta) else v


def _db_bit(v: Any) -> Any:
    return int.from_bytes(v, "big") if isinstance(v, (bytes, bytearray)) else v


def _db_geometry(v: Any) -> Any:
    return bytes(v).hex().upper() if isinstance(v, (bytes, bytearray)) else v


_FROM_DB: dict[int, Converter] = {FT.TIMESTAMP: _db_timestamp, FT.DATETIME: _db_datetime, FT.DATE: _db_date,
                                  FT.NEWDATE: _db_date, FT.TIME: _db_time, FT.BIT: _db_bit,
                                  FT.GEOMETRY: _db_geometry}


def from_db(type_code: int) -> Converter | None:
    """pymysql value -> canonical value, for a result column type code (None: as it is)."""
    return _FROM_DB.get(type_code)


# -- JSON values -----------------------------------------------------------------------------
def default_json(v: Any) -> Any:
    """The JSON value of a canonical value when the index does not map the field."""
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    if isinstance(v, Decimal):
        return float(v)  # a double, as ES stores numbers; map the field as keyword for exact text
    if isinstance(v, dt.datetime):
        return v.isoformat().replace("+00:00", "Z")
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(v).decode("ascii")
    if isinstance(v, (dict, list)):
        return v
    return str(v)


def _as_text(v: Any) -> Any:
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, Decimal):  # exact, with the column's scale (str() writes 1E-30 for 0.000...001)
        return decimal_value_text(v)
    return str(default_json(v))


def _as_int(v: Any) -> Any:
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, int):
        return v
    if isinstance(v, (Decimal, float)):
        if v != int(v):
            raise FieldValueError(f"{v} is not a whole number (the field is an integer type)")
        return int(v)
    if isinstance(v, str):
        try:
            return int(v.strip())
        except ValueError:
            raise FieldValueError(f"{v[:60]!r} is not an integer") from None
    return default_json(v)


def _as_float(v: Any) -> Any:
    if isinstance(v, Decimal):
        return float(v)
    if isinstance(v, str):
        try:
            return float(Decimal(v.strip()))
        except InvalidOperation:
            raise FieldValueError(f"{v[:60]!r} is not a number") from None
    return default_json(v)


def _as_bool(v: Any) -> Any:
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, (int, float, Decimal)):
        return v != 0  # TINYINT(1): 0 -> false, any other value -> true (MySQL's truth)
    if isinstance(v, str):
        low = v.strip().lower()
        if low in ("1", "true", "t", "y", "yes", "on"):
            return True
        if low in ("0", "false", "f", "n", "no", "off", ""):
            return False
        raise FieldValueError(f"{v[:60]!r} is not a boolean")
    return default_json(v)


def _as_binary(v: Any) -> Any:
    if isinstance(v, str):
        return base64.b64encode(v.encode("utf-8")).decode("ascii")
    return default_json(v)


def _as_geo_point(v: Any) -> Any:
    if isinstance(v, str):
        lat, sep, lon = v.partition(",")
        try:
            if not sep:
                raise ValueError
            point = {"lat": float(lat), "lon": float(lon)}
        except ValueError:
            raise FieldValueError(f"{v[:60]!r} is not a geo_point: write it as \"lat,lon\"") from None
        if not (-90 <= point["lat"] <= 90 and -180 <= point["lon"] <= 180):
            raise FieldValueError(f"{v[:60]!r} is out of range for a geo_point (lat -90..90, lon -180..180)")
        return point
    return default_json(v)


def _as_object(v: Any) -> Any:
    if isinstance(v, (bytes, bytearray)):
        v = bytes(v).decode("utf-8")
    if isinstance(v, str):
        try:
            return json.loads(v)
        except json.JSONDecodeError as e:
            raise FieldValueError(f"is not valid JSON ({e.msg} at {e.pos})") from None
    return default_json(v)


def _for_es_type(es_type: str | None) -> Converter:
    if es_type in TEXT_TYPES:
        return _as_text
    if es_type in INT_TYPES:
        return _as_int
    if es_type in FLOAT_TYPES:
        return _as_float
    if es_type == "boolean":
        return _as_bool
    if es_type == "binary":
        return _as_binary
    if es_type == "geo_point":
        return _as_geo_point
    if es_type in OBJECT_TYPES:
        return _as_object
    return default_json  # date/date_nanos (ISO text), unmapped fields, other types


@lru_cache(maxsize=4096)
def field_converter(es_type: str | None, obj_type: str | None) -> Converter:
    """canonical value -> JSON value for a field of this ES type and ``objFields`` type."""
    scalar = _for_es_type(es_type)
    if obj_type in ("object", "json"):
        return _as_object
    if obj_type and obj_type.startswith("array:"):
        sep = obj_type[len("array:"):]

        def split(v: Any) -> Any:
            if v is None:
                return None
            if isinstance(v, (bytes, bytearray)):
                v = bytes(v).decode("utf-8")
            text = v if isinstance(v, str) else str(default_json(v))
            return [scalar(x) for x in text.split(sep)] if text else []
        return split
    return scalar


@lru_cache(maxsize=4096)
def capture_converter(mysql_type: str | None, es_type: str | None, obj_type: str | None) -> Converter:
    """Dml string -> JSON value, for a column type and a document field."""
    parse = from_capture(column_kind(mysql_type))
    out = field_converter(es_type, obj_type)
    if parse is str and out is default_json:
        return _identity

    def convert(text: Any) -> Any:
        return None if text is None else out(parse(text))
    return convert


def _identity(v: Any) -> Any:
    return v


@lru_cache(maxsize=4096)
def db_converter(type_code: int, es_type: str | None, obj_type: str | None) -> Converter:
    """pymysql value -> JSON value, for a result column type code and a document field."""
    canon = from_db(type_code)
    out = field_converter(es_type, obj_type)
    if canon is None:
        return out

    def convert(v: Any) -> Any:
        return None if v is None else out(canon(v))
    return convert


def id_text(v: Any) -> str | None:
    """A canonical value as a document ``_id`` (the same text from binlog and re-query)."""
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, Decimal):
        return str(v)
    out = default_json(v)
    return out if isinstance(out, str) else json.dumps(out) if isinstance(out, (dict, list)) else str(out)


@lru_cache(maxsize=1024)
def capture_id(mysql_type: str | None) -> Converter:
    """Dml string -> ``_id`` text, for the column that is the document id."""
    kind = column_kind(mysql_type)
    if kind in ("int", "text", "json"):
        return _identity  # "42" is already the id text of 42
    parse = from_capture(kind)
    return lambda text: None if text is None else id_text(parse(text))
