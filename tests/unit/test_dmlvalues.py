"""The value rules written once (sluice_common/dmlvalues.py), and the three Python producers of Dml
strings that use them agreeing type by type.

For each type, one value as each reader meets it: capture's row-image bytes (``ColumnSpec.decoder``,
the reference the native decoder is held to in test_capture_native.py), the full load's raw
``SELECT`` value (pymysql without converters: the server's text, or bytes; ``etl.values``) and
verify's pymysql-converted value (``datetime``, ``Decimal``, ``timedelta``; ``normalize.dml_text``)
give the same string.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import struct
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pymysqlreplication.constants import FIELD_TYPE as T

from pipeline.capture.columns import ColumnSpec
from pipeline.etl.values import SourceColumn, row_decoder
from sluice_common import dmlvalues as D
from sluice_common.mysqltypes import INTEGER_BYTES, integer_range, signed_bytes
from sluice_common.normalize import dml_text
from tests.unit.test_capture_values import date_bytes, datetime2_bytes, mysql_decimal, time2_bytes_fsp6

pytestmark = pytest.mark.unit

GEO = bytes.fromhex("E6100000" "0101000000000000000000F03F0000000000000040")
JSON_ARRAY = bytes([0x02]) + (1).to_bytes(2, "little") + (7).to_bytes(2, "little") + bytes([0x05, 1, 0])

# (capture's column, its row-image bytes), (information_schema's DATA_TYPE, COLUMN_TYPE),
# the raw SELECT value, the pymysql-converted value, the Dml string
CASES = [
    ((ColumnSpec("c", T.LONG, unsigned=True), (4294967295).to_bytes(4, "little")), ("int", "int(10) unsigned"),
     "4294967295", 4294967295, "4294967295"),
    ((ColumnSpec("c", T.TINY), b"\x80"), ("tinyint", "tinyint(1)"), "-128", -128, "-128"),
    ((ColumnSpec("c", T.INT24), (42).to_bytes(3, "little")), ("mediumint", "mediumint(8) zerofill"),
     "00000042", 42, "42"),
    ((ColumnSpec("c", T.BIT, bits=10), b"\x03\xff"), ("bit", "bit(10)"), b"\x03\xff", b"\x03\xff", "1023"),
    ((ColumnSpec("c", T.FLOAT), struct.pack("<f", 0.1)), ("float", "float"), repr(float(struct.unpack(
        "<f", struct.pack("<f", 0.1))[0])), 0.1, "0.1"),
    ((ColumnSpec("c", T.DOUBLE), struct.pack("<d", 1 / 3)), ("double", "double"), repr(1 / 3), 1 / 3,
     "0.3333333333333333"),
    ((ColumnSpec("c", T.NEWDECIMAL, precision=20, scale=10), mysql_decimal(Decimal(0), 20, 10)),
     ("decimal", "decimal(20,10)"), "0.0000000000", Decimal("0.0000000000"), "0.0000000000"),
    ((ColumnSpec("c", T.NEWDECIMAL, precision=20, scale=10), mysql_decimal(Decimal("-0.0000001"), 20, 10)),
     ("decimal", "decimal(20,10)"), "-0.0000001000", Decimal("-0.0000001000"), "-0.0000001000"),
    ((ColumnSpec("c", T.NEWDECIMAL, precision=10, scale=0), mysql_decimal(Decimal(-7), 10, 0)),
     ("decimal", "decimal(10,0)"), "-7", Decimal("-7"), "-7"),
    ((ColumnSpec("c", T.DATE), date_bytes(999, 1, 2)), ("date", "date"), "0999-01-02", dt.date(999, 1, 2),
     "0999-01-02"),
    ((ColumnSpec("c", T.DATETIME2, fsp=3), datetime2_bytes(999, 1, 2, 3, 4, 5, 678000, 3)),
     ("datetime", "datetime(3)"), "0999-01-02 03:04:05.678", dt.datetime(999, 1, 2, 3, 4, 5, 678000),
     "0999-01-02 03:04:05.678"),
    ((ColumnSpec("c", T.DATETIME2, fsp=6), datetime2_bytes(2024, 2, 29, 23, 59, 59, 1, 6)),
     ("datetime", "datetime(6)"), "2024-02-29 23:59:59.000001", dt.datetime(2024, 2, 29, 23, 59, 59, 1),
     "2024-02-29 23:59:59.000001"),
    ((ColumnSpec("c", T.TIMESTAMP2, fsp=6), (1710000000).to_bytes(4, "big") + (123456).to_bytes(3, "big")),
     ("timestamp", "timestamp(6)"), "2024-03-09 16:00:00.123456", dt.datetime(2024, 3, 9, 16, 0, 0, 123456),
     "2024-03-09 16:00:00.123456"),
    ((ColumnSpec("c", T.TIMESTAMP2), (2**31 - 1).to_bytes(4, "big")), ("timestamp", "timestamp"),
     "2038-01-19 03:14:07", dt.datetime(2038, 1, 19, 3, 14, 7), "2038-01-19 03:14:07"),
    ((ColumnSpec("c", T.TIME2, fsp=6), time2_bytes_fsp6(True, 838, 59, 59, 500000)), ("time", "time(6)"),
     "-838:59:59.500000", -dt.timedelta(hours=838, minutes=59, seconds=59, microseconds=500000),
     "-838:59:59.500000"),
    ((ColumnSpec("c", T.TIME2), (0x800000 + (100 << 12 | 1 << 6 | 2)).to_bytes(3, "big")), ("time", "time"),
     "100:01:02", dt.timedelta(hours=100, minutes=1, seconds=2), "100:01:02"),
    ((ColumnSpec("c", T.YEAR), bytes([124])), ("year", "year(4)"), "2024", 2024, "2024"),
    ((ColumnSpec("c", T.YEAR), b"\x00"), ("year", "year(4)"), "0000", 0, "0000"),
    ((ColumnSpec("c", T.ENUM, size=1, members=("a", "b")), b"\x02"), ("enum", "enum('a','b')"), "b", "b", "b"),
    ((ColumnSpec("c", T.SET, size=1, members=("x", "y", "z")), b"\x05"), ("set", "set('x','y','z')"), "x,z",
     "x,z", "x,z"),
    ((ColumnSpec("c", T.VARCHAR, charset="utf8mb4", encoding="utf8", max_length=40), b"\x06h\xc3\xa9llo"),
     ("varchar", "varchar(10)"), "héllo", "héllo", "héllo"),
    ((ColumnSpec("c", T.VARCHAR, charset="binary", max_length=8), b"\x04\x00\x80\n\xff"),
     ("varbinary", "varbinary(8)"), b"\x00\x80\n\xff", b"\x00\x80\n\xff", "\x00\x80\n\xff"),
    ((ColumnSpec("c", T.STRING, charset="binary", max_length=4), b"\x01a"), ("binary", "binary(4)"),
     b"a\x00\x00\x00", b"a\x00\x00\x00", "a\x00\x00\x00"),
    ((ColumnSpec("c", T.GEOMETRY, length_size=4), len(GEO).to_bytes(4, "little") + GEO), ("point", "point"),
     GEO, GEO, GEO.hex().upper()),
    ((ColumnSpec("c", T.JSON, length_size=4), len(JSON_ARRAY).to_bytes(4, "little") + JSON_ARRAY),
     ("json", "json"), "[1]", "[1]", "[1]"),
]


@pytest.mark.parametrize("binlog, types, selected, converted, text", CASES,
                         ids=[f"{c[1][1]}={c[4]!r}" for c in CASES])
def test_capture_the_full_load_and_verify_give_the_same_string(binlog, types, selected, converted, text):
    spec, raw = binlog
    assert spec.decoder()(raw, 0) == (text, len(raw))
    assert row_decoder((SourceColumn("c", *types),))((selected,)) == {"c": text}
    assert dml_text(*types, converted) == text


def test_verify_renders_what_capture_wrote_where_it_once_differed():
    """Before the rules were one module, verify's rendering printed a DATETIME before year 1000
    with a 3-digit year (strftime), a DECIMAL of scale 7+ in exponent notation and a GEOMETRY as
    ISO-8859-1 text instead of hex (repair had a rule of its own for it, verify none)."""
    assert dml_text("datetime", "datetime", dt.datetime(999, 1, 2, 3, 4, 5)) == "0999-01-02 03:04:05"
    assert dml_text("decimal", "decimal(20,7)", Decimal("0E-7")) == "0.0000000"
    assert dml_text("decimal", "decimal(40,30)", Decimal("1E-30")) == "0." + "0" * 29 + "1"
    assert dml_text("point", "point", b"\xe6\x10") == "E610"


@pytest.mark.parametrize("negative, integer, fraction, want", [
    (True, 0, "000", "0.000"), (True, 0, "", "0"), (True, 0, "010", "-0.010"), (False, 12, "", "12"),
    (True, 5, "", "-5"),
])
def test_decimal_text_never_signs_a_zero(negative, integer, fraction, want):
    assert D.decimal_text(negative, integer, fraction) == want


def test_temporal_texts():
    assert D.date_text(0, 0, 0) == "0000-00-00"
    assert D.datetime_text(2001, 2, 3, 4, 5, 6, 500000, 1) == "2001-02-03 04:05:06.5"
    assert D.time_text(True, 838, 59, 59) == "-838:59:59" and D.time_text(False, 0, 0, 0, 1, 6) == "00:00:00.000001"
    assert D.utc_text(0) == D.ZERO_DATETIME and D.utc_text(1710000000) == "2024-03-09 16:00:00"
    assert D.fraction_text(123456, 0) == "" and D.fraction_text(123456, 4) == ".1234"


def test_enum_and_set_texts():
    assert D.enum_text(("a", "b"), 0) == "" and D.enum_text(("a", "b"), 2) == "b" and D.enum_text(("a",), 9) == "9"
    assert D.set_text(("x", "y", "z"), 0) == "" and D.set_text(("x", "y", "z"), 7) == "x,y,z"


def test_json_text_is_mysqls_spacing():
    assert D.json_text({"k": [1, "x"], "é": None}) == '{"k": [1, "x"], "é": null}'
    assert json.loads(D.json_text({"a": 1})) == {"a": 1}


@given(st.floats(allow_nan=False))
def test_float32_of_rounds_as_a_float32_cast(x):
    """Struct's rounding, with numpy's answer (an infinity) where struct refuses past FLT_MAX."""
    got = D.float32_of(x)
    try:
        assert got == struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        assert math.isinf(got) and math.copysign(1, got) == math.copysign(1, x)


@pytest.mark.parametrize("base", sorted(INTEGER_BYTES))
def test_integer_ranges_and_the_signed_integer_that_holds_them(base):
    for unsigned in (False, True):
        lo, hi = integer_range(base, unsigned)
        n = signed_bytes(base, unsigned)
        assert -(1 << (8 * n - 1)) <= lo and hi < 1 << (8 * n - 1)
        assert hi - lo == (1 << (8 * INTEGER_BYTES[base])) - 1
    assert integer_range("tinyint", False) == (-128, 127) and integer_range("bigint", True) == (0, 2**64 - 1)
