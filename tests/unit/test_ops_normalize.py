"""Cross-dialect value normalization (verify) and the capture-text rendering of source values."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from sluice_common.chunksql import Side, range_clause
from sluice_common.normalize import ZERO, dml_text, normalizer


@pytest.mark.parametrize("data_type,a,b", [
    ("bit", b"\x00\x05", "0000000101"),                         # MariaDB bytes vs PostgreSQL bit varying
    ("bit", b"\x03\xff", 1023),
    ("tinyint", 1, True),                                       # TINYINT(1) into a boolean column
    ("bigint", 18446744073709551615, Decimal("18446744073709551615")),  # unsigned into numeric(20,0)
    ("year", 2024, 2024),
    ("float", 0.1, 0.10000000149011612),                        # server's short text vs float32's double
    ("double", 0.3333333333333333, 0.3333333333333333),
    ("decimal", Decimal("1.50"), Decimal("1.5000")),
    ("decimal", Decimal("0.00"), Decimal("0")),
    ("datetime", dt.datetime(2024, 3, 10, 2, 30, 0, 5), dt.datetime(2024, 3, 10, 2, 30, 0, 5)),
    ("timestamp", dt.datetime(2024, 3, 10, 2, 30), dt.datetime(2024, 3, 10, 2, 30, tzinfo=dt.UTC)),
    ("timestamp", dt.datetime(2024, 3, 10, 2, 30),
     dt.datetime(2024, 3, 10, 8, 0, tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=30)))),
    ("datetime", "0000-00-00 00:00:00", dt.datetime.min),       # zero date vs PostgreSQL -infinity
    ("date", dt.date(2024, 1, 2), dt.date(2024, 1, 2)),
    ("date", "0000-00-00", dt.date.min),
    ("time", dt.timedelta(hours=-838, minutes=-59, seconds=-59), dt.timedelta(hours=-838, minutes=-59, seconds=-59)),
    ("time", dt.timedelta(hours=1, microseconds=5), dt.time(1, 0, 0, 5)),
    ("json", '{"b": 1, "a": [1, 2]}', {"a": [1, 2], "b": 1}),
    ("varbinary", b"\x00\xff", memoryview(b"\x00\xff")),
    ("char", "ab", "ab   "),
    ("varchar", "ü🚀", "ü🚀"),
    ("enum", "x", "x"),
])
def test_equal_values_normalize_equal(data_type, a, b):
    f = normalizer(data_type)
    assert f(a) == f(b)


@pytest.mark.parametrize("data_type,a,b", [
    ("decimal", Decimal("1.5"), Decimal("1.51")),
    ("datetime", dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 1, 0, 0, 0, 1)),
    ("varchar", "a", "a "),
    ("float", 0.1, 0.2),
    ("json", '{"a": 1}', {"a": 2}),
    ("bit", b"\x01", "10"),
])
def test_different_values_stay_different(data_type, a, b):
    f = normalizer(data_type)
    assert f(a) != f(b)


@pytest.mark.parametrize("data_type,column_type,value,text", [
    ("bit", "bit(10)", b"\x03\xff", "1023"),
    ("year", "year(4)", 0, "0000"),
    ("float", "float", 0.1, "0.1"),
    ("float", "float", 3.4028234663852886e38, "3.4028235e+38"),
    ("double", "double", 1 / 3, "0.3333333333333333"),
    ("datetime", "datetime(6)", dt.datetime(2024, 3, 10, 2, 30, 0, 12), "2024-03-10 02:30:00.000012"),
    ("datetime", "datetime(3)", dt.datetime(2024, 3, 10, 2, 30, 0, 120000), "2024-03-10 02:30:00.120"),
    ("timestamp", "timestamp", dt.datetime(2038, 1, 19, 3, 14, 7), "2038-01-19 03:14:07"),
    ("datetime", "datetime", "0000-00-00 00:00:00", "0000-00-00 00:00:00"),
    ("time", "time", dt.timedelta(hours=-838, minutes=-59, seconds=-59), "-838:59:59"),
    ("time", "time(6)", -dt.timedelta(microseconds=1), "-00:00:00.000001"),
    ("varbinary", "varbinary(8)", b"\x00\x80\n\xff", "\x00\x80\n\xff"),
    ("decimal", "decimal(12,2)", Decimal("1.50"), "1.50"),
    ("int", "int(10) unsigned", 4000000001, "4000000001"),
])
def test_dml_text_matches_the_capture_rules(data_type, column_type, value, text):
    assert dml_text(data_type, column_type, value) == text
    assert dml_text(data_type, column_type, None) is None


def test_dml_text_of_a_zero_date_and_normalized_zero():
    assert normalizer("datetime")("2024-00-10 00:00:00") == ZERO


@pytest.mark.parametrize("dialect,ph", [("mysql", "%s"), ("postgresql", "%s"), ("sqlite", "?")])
def test_range_clause_composite_key(dialect, ph):
    side = Side(None, dialect)
    where, params = range_clause(side, ["a", "b"], (1, "x"), (5, "y"))
    q = side.q
    assert where == (f"(({q('a')} > {ph}) OR ({q('a')} = {ph} AND {q('b')} > {ph})) AND "
                     f"(({q('a')} < {ph}) OR ({q('a')} = {ph} AND {q('b')} < {ph}) OR "
                     f"({q('a')} = {ph} AND {q('b')} = {ph}))")
    assert params == [1, 1, "x", 5, 5, "y", 5, "y"]
    assert range_clause(side, ["a"], None, None) == ("1=1", [])


def test_a_decimal_of_more_than_28_digits_is_not_rounded():
    """Python's decimal context keeps 28 digits: ``abs()`` and ``normalize()`` rounded a DECIMAL(65,30)
    in verify's expected values (a new user's probe: HBase never verified clean, and repair "repaired"
    the same rows every time)."""
    from decimal import Decimal

    from sluice_common.normalize import _decimal, dml_text

    big = "-99999999999999999999999999999999999.999999999999999999999999999999"
    assert dml_text("decimal", "decimal(65,30)", Decimal(big)) == big
    assert dml_text("decimal", "decimal(65,30)", Decimal("-0.999999999999999999999999999999")) \
        == "-0.999999999999999999999999999999"
    assert _decimal(Decimal(big)) == big and _decimal(Decimal("1.500")) == "1.5" and _decimal("1E+3") == "1000"


def test_json_numbers_compare_by_value():
    """PostgreSQL's jsonb writes MySQL's 1e300 as its 301 digits (and 1.50 as 1.50, -0.0 as 0): a
    document compares by its numbers' values (a new user's probe: such rows never verified clean)."""
    from sluice_common.normalize import _json

    assert _json('{"n": [1e300, 0.1, -0.0, 100, 1.50]}') == _json({"n": [10**300, 0.1, 0, 100, 1.5]})
    assert _json('{"n": 1}') != _json('{"n": "1"}') and _json('{"n": 1}') != _json('{"n": 2}')
