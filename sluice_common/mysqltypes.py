"""The MySQL/MariaDB type vocabulary, in one place (the value text rules: :mod:`sluice_common.dmlvalues`).

* :func:`parse_type`: a column type string as capture writes it into ``mysqlType`` (or as
  ``information_schema.COLUMNS.COLUMN_TYPE`` spells it) -> its base name, the text between its
  parentheses and whether it is unsigned: ``"decimal(10,2) unsigned"`` -> ``decimal``, ``10,2``,
  unsigned; ``"enum('a','b')"`` -> ``enum``, ``'a','b'``.
* :data:`INTEGER_TYPES` (with :data:`INTEGER_BYTES`, their storage sizes, :func:`integer_range`,
  their ranges, and :func:`signed_bytes`, the signed integer that holds one), :data:`FLOAT_TYPES`,
  :data:`DECIMAL_TYPES`: the numeric type names, each list once (``year``, ``bit`` and ``bool``
  are not in them: a caller that treats them as integers says so).
* :data:`TEMPORAL_TYPES`: the date and time type names.
* :data:`BINARY_TYPES`, :data:`GEOMETRY_TYPES`: the binary string and spatial type names (a
  binary string's capture text is ISO-8859-1, one character per byte; a geometry's is the upper-case
  hex of MySQL's internal value).
* :func:`quote_ident`: a backquoted identifier (`` ` `` doubled).

Capture, the full load (``pipeline/etl``), ``verify``, ``repair`` and every adapter's ``values.py``
use these, so a new type or a changed rule has one home. It lives in :mod:`sluice_common`, below
both ``pipeline`` and ``adapters``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType

#: binary strings: capture text is ISO-8859-1 (one character per byte)
BINARY_TYPES = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})
#: spatial types (``geomcollection``: MySQL 8's DATA_TYPE of GEOMETRYCOLLECTION)
GEOMETRY_TYPES = frozenset({"geometry", "point", "linestring", "polygon", "multipoint", "multilinestring",
                            "multipolygon", "geometrycollection", "geomcollection"})
#: integer types -> their storage size in bytes (``integer``: INT's synonym in a declared type;
#: information_schema's DATA_TYPE and the binlog say ``int``)
INTEGER_BYTES = MappingProxyType({"tinyint": 1, "smallint": 2, "mediumint": 3, "int": 4, "integer": 4, "bigint": 8})
#: integer types (and their synonyms)
INTEGER_TYPES = frozenset(INTEGER_BYTES)
#: approximate numeric types (``real``: DOUBLE, unless the REAL_AS_FLOAT SQL mode)
FLOAT_TYPES = frozenset({"float", "double", "real"})
#: exact numeric types (and their synonyms)
DECIMAL_TYPES = frozenset({"decimal", "numeric", "dec", "fixed"})
#: date and time types
TEMPORAL_TYPES = frozenset({"date", "datetime", "timestamp", "time", "year"})

_TYPE_RE = re.compile(r"\s*([a-z]+)\s*(?:\(([^)]*)\))?\s*(.*)", re.S)
_WIDTH_RE = re.compile(r"\d+")


@dataclass(frozen=True)
class MysqlType:
    """A parsed column type: base name (lower case; ``""`` if none), the text between its
    parentheses (``""`` if none) and whether it is unsigned."""

    base: str
    args: str = ""
    unsigned: bool = False

    @property
    def width(self) -> int | None:
        """The leading number in the parentheses (``bit(12)`` -> 12, ``decimal(10,2)`` -> 10), if any."""
        m = _WIDTH_RE.match(self.args)
        return int(m.group()) if m else None

    @property
    def binary(self) -> bool:
        return self.base in BINARY_TYPES

    @property
    def geometry(self) -> bool:
        return self.base in GEOMETRY_TYPES


@lru_cache(maxsize=4096)
def parse_type(mysql_type: str | None) -> MysqlType:
    """``"bigint(20) unsigned"`` -> ``MysqlType("bigint", "20", True)``; no type -> base ``""``."""
    m = _TYPE_RE.match((mysql_type or "").lower())
    if not m:
        return MysqlType("")
    return MysqlType(m.group(1), m.group(2) or "", "unsigned" in m.group(3))


def base_type(mysql_type: str | None) -> str:
    """The base name of a column type (``"int(10) unsigned"`` -> ``int``; none -> ``""``)."""
    return parse_type(mysql_type).base


def is_binary(mysql_type: str | None) -> bool:
    """True for BINARY/VARBINARY/BLOB columns (capture text = ISO-8859-1, one char per byte)."""
    return parse_type(mysql_type).base in BINARY_TYPES


def integer_range(base: str, unsigned: bool) -> tuple[int, int]:
    """The smallest and largest value of an integer type (``tinyint``, signed: -128, 127)."""
    bits = 8 * INTEGER_BYTES[base]
    return (0, (1 << bits) - 1) if unsigned else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)


def signed_bytes(base: str, unsigned: bool) -> int:
    """Bytes of the smallest signed integer that holds every value of an integer type: its size,
    one more when unsigned (``smallint unsigned`` -> 3: a 4-byte signed integer holds it)."""
    return INTEGER_BYTES[base] + (1 if unsigned else 0)


def quote_ident(name: str) -> str:
    """A backquoted MySQL identifier (a backquote in the name doubled)."""
    return "`" + name.replace("`", "``") + "`"
