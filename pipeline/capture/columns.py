"""Column descriptions from the binlog's own table-map metadata (binlog_row_metadata=FULL).

The table-map event of every transaction carries column types, names, signedness,
charsets, ENUM/SET members and the primary key, as they were when the row was written,
so historical events decode correctly even after later DDL. ``ColumnSpec`` is our
typed copy of one column; ``mysql_type``/``sql_type`` name it the way canal does
(``bigint unsigned``, ``varchar(255)``, ``decimal(65,30)``; JDBC ``java.sql.Types`` codes).
"""

from __future__ import annotations

from dataclasses import dataclass

from pymysqlreplication.constants import FIELD_TYPE as T

from sluice_common.errors import SourceError
from sluice_common.mysqltypes import INTEGER_BYTES

from . import values as V
from .charsets import codec_for

# java.sql.Types
BIT, TINYINT, SMALLINT, INTEGER, BIGINT = -7, -6, 5, 4, -5
REAL, DOUBLE, DECIMAL, CHAR, VARCHAR, LONGVARCHAR = 7, 8, 3, 1, 12, -1
DATE, TIME, TIMESTAMP, BINARY, VARBINARY, BLOB, CLOB, OTHER = 91, 92, 93, -2, -3, 2004, 2005, 1111

#: the types whose values are text in the column's character set
_TEXT_TYPES = frozenset({T.VARCHAR, T.STRING, T.VAR_STRING, T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB})
_MBMAXLEN = {"utf8mb4": 4, "utf8mb3": 3, "utf8": 3, "ucs2": 2, "utf16": 4, "utf16le": 4, "utf32": 4,
             "gbk": 2, "big5": 2, "sjis": 2, "cp932": 2, "euckr": 2, "gb2312": 2, "ujis": 3,
             "eucjpms": 3, "gb18030": 4}
#: the binlog's integer type codes -> their type names (sizes: ``INTEGER_BYTES``)
BINLOG_INTEGERS = {T.TINY: "tinyint", T.SHORT: "smallint", T.INT24: "mediumint", T.LONG: "int", T.LONGLONG: "bigint"}
#: integer type -> JDBC codes (signed, unsigned), as canal assigns them (unsigned widens one step)
_INT_JDBC = {"tinyint": (TINYINT, SMALLINT), "smallint": (SMALLINT, INTEGER), "mediumint": (INTEGER, INTEGER),
             "int": (INTEGER, BIGINT), "bigint": (BIGINT, DECIMAL)}
_BLOB_NAMES = {1: "tiny", 2: "", 3: "medium", 4: "long"}
_GEOMETRY_NAMES = {0: "geometry", 1: "point", 2: "linestring", 3: "polygon", 4: "multipoint",
                   5: "multilinestring", 6: "multipolygon", 7: "geometrycollection"}


@dataclass(frozen=True)
class ColumnSpec:
    """One column as the binlog describes it."""

    name: str
    type: int
    unsigned: bool = False
    charset: str | None = None      # MySQL charset name; "binary" for binary strings
    encoding: str | None = None     # Python codec for text, None for binary
    max_length: int = 0             # CHAR/VARCHAR: bytes
    length_size: int = 0            # BLOB/TEXT/JSON/GEOMETRY length prefix
    fsp: int = 0
    precision: int = 0
    scale: int = 0
    bits: int = 0
    size: int = 0                   # ENUM/SET bytes
    members: tuple[str, ...] = ()   # ENUM/SET members
    geometry_type: int = 0
    is_pk: bool = False

    @property
    def binary(self) -> bool:
        return self.charset == "binary"

    @property
    def int_bytes(self) -> int:
        """An integer column's size in bytes in the row image (0 for other types)."""
        name = BINLOG_INTEGERS.get(self.type)
        return INTEGER_BYTES[name] if name else 0

    def mysql_type(self) -> str:
        """canal-style column type text, from binlog metadata."""
        t = self.type
        if t in BINLOG_INTEGERS:
            return BINLOG_INTEGERS[t] + (" unsigned" if self.unsigned else "")
        if t in (T.FLOAT, T.DOUBLE):
            return ("float" if t == T.FLOAT else "double") + (" unsigned" if self.unsigned else "")
        if t == T.NEWDECIMAL:
            return f"decimal({self.precision},{self.scale})" + (" unsigned" if self.unsigned else "")
        if t in (T.DATETIME2, T.TIMESTAMP2, T.TIME2):
            base = {T.DATETIME2: "datetime", T.TIMESTAMP2: "timestamp", T.TIME2: "time"}[t]
            return f"{base}({self.fsp})" if self.fsp else base
        simple = {T.DATE: "date", T.DATETIME: "datetime", T.TIMESTAMP: "timestamp", T.TIME: "time",
                  T.YEAR: "year", T.JSON: "json"}
        if t in simple:
            return simple[t]
        if t in (T.VARCHAR, T.STRING):
            n = self.max_length // (1 if self.binary else _MBMAXLEN.get(self.charset or "", 1))
            if self.binary:
                return f"{'varbinary' if t == T.VARCHAR else 'binary'}({n})"
            return f"{'varchar' if t == T.VARCHAR else 'char'}({n})"
        if t == T.BLOB:
            return _BLOB_NAMES.get(self.length_size, "") + ("blob" if self.binary else "text")
        if t in (T.ENUM, T.SET):
            items = ",".join("'" + m.replace("'", "''") + "'" for m in self.members)
            return f"{'enum' if t == T.ENUM else 'set'}({items})"
        if t == T.BIT:
            return f"bit({self.bits})"
        if t == T.GEOMETRY:
            return _GEOMETRY_NAMES.get(self.geometry_type, "geometry")
        return f"type{t}"

    def sql_type(self) -> int:
        """JDBC type code as canal assigns it (unsigned ints widen one step)."""
        t = self.type
        if t in BINLOG_INTEGERS:
            return _INT_JDBC[BINLOG_INTEGERS[t]][self.unsigned]
        if t in (T.VARCHAR, T.STRING):
            if self.binary:
                return VARBINARY if t == T.VARCHAR else BINARY
            return VARCHAR if t == T.VARCHAR else CHAR
        if t == T.BLOB:
            return BLOB if self.binary else CLOB
        return {T.FLOAT: REAL, T.DOUBLE: DOUBLE, T.NEWDECIMAL: DECIMAL, T.DATE: DATE, T.TIME: TIME,
                T.TIME2: TIME, T.DATETIME: TIMESTAMP, T.DATETIME2: TIMESTAMP, T.TIMESTAMP: TIMESTAMP,
                T.TIMESTAMP2: TIMESTAMP, T.YEAR: VARCHAR, T.ENUM: CHAR, T.SET: CHAR, T.BIT: BIT,
                T.JSON: LONGVARCHAR, T.GEOMETRY: BINARY}.get(t, OTHER)

    def decoder(self) -> V.Decoder:
        """The value rule for this column (see pipeline/capture/values.py)."""
        t = self.type
        if self.int_bytes:
            return V.int_decoder(self.int_bytes, self.unsigned)
        if t in (T.VARCHAR, T.STRING):
            pad = self.max_length if (t == T.STRING and self.binary) else 0
            return V.string_decoder(2 if self.max_length > 255 else 1, self.encoding, pad)
        makers = {
            T.FLOAT: V.float_decoder, T.DOUBLE: V.double_decoder, T.DATE: V.date_decoder,
            T.YEAR: V.year_decoder, T.TIME: V.old_time_decoder, T.DATETIME: V.old_datetime_decoder,
            T.TIMESTAMP: V.old_timestamp_decoder,
        }
        if t in makers:
            return makers[t]()
        if t == T.NEWDECIMAL:
            return V.decimal_decoder(self.precision, self.scale)
        if t == T.DATETIME2:
            return V.datetime2_decoder(self.fsp)
        if t == T.TIMESTAMP2:
            return V.timestamp2_decoder(self.fsp)
        if t == T.TIME2:
            return V.time2_decoder(self.fsp)
        if t == T.BLOB:
            return V.string_decoder(self.length_size, self.encoding)
        if t == T.JSON:
            return V.json_decoder(self.length_size)
        if t == T.ENUM:
            return V.enum_decoder(self.size, self.members)
        if t == T.SET:
            return V.set_decoder(self.size, self.members)
        if t == T.BIT:
            return V.bit_decoder((self.bits + 7) // 8)
        if t == T.GEOMETRY:
            return V.geometry_decoder(self.length_size)
        raise SourceError(f"column {self.name!r}: MySQL column type {t} is not supported by capture",
                          hint="see docs/capture.md for the supported types")


def spec_from_library(col: object, index: int, pk_index: set[int], geometry_type: int = 0,
                      table: str = "") -> ColumnSpec:
    """Our ColumnSpec from a python-mysql-replication ``Column`` of a TableMapEvent (of ``table``,
    for messages)."""
    g = col.__dict__.get
    t = g("type")
    collation = g("collation_name") or ""
    charset = collation.split("_")[0] if collation else None
    if collation == "binary":
        charset = "binary"
    name = g("name") or f"col{index}"
    encoding = codec_for(charset, g("character_set_name"), name, table) if t in _TEXT_TYPES else \
        None if charset == "binary" else (g("character_set_name") or "utf8")
    members = g("enum_values") or g("set_values") or ()
    if t == T.ENUM and members and members[0] == "":
        members = members[1:]  # the library prepends the invalid-value '' to ENUM members
    bits = g("bits") or 0
    return ColumnSpec(
        name=name, type=t, unsigned=bool(g("unsigned")), charset=charset,
        encoding=encoding, max_length=g("max_length") or 0, length_size=g("length_size") or 0,
        fsp=g("fsp") or 0, precision=g("precision") or 0, scale=g("decimals") or 0, bits=bits,
        size=g("size") or 0, members=tuple(members), is_pk=index in pk_index,
        geometry_type=geometry_type,
    )
