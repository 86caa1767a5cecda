"""adapters/rdb/lossy.py: target columns of another kind that would change some source values."""

from __future__ import annotations

from sqlalchemy import types as sa
from sqlalchemy.dialects import mysql as my
from sqlalchemy.dialects import postgresql as pg

from adapters.rdb.lossy import loss


def _changes(family, target, mysql_type, *values):
    found = loss(family, target, mysql_type)
    assert found is not None, (target, mysql_type)
    return [found.changes(v) for v in values]


def test_a_date_column_drops_the_time_of_day():
    assert _changes("postgresql", pg.DATE(), "datetime(3)", "2024-11-03 00:00:00.000", "2024-11-03 01:30:00",
                    "0000-00-00 00:00:00") == [False, True, False]
    assert _changes("mysql", my.DATE(), "timestamp", "2024-11-04 03:30:00") == [True]
    assert loss("postgresql", pg.TIMESTAMP(), "datetime") is None and loss("mysql", my.DATE(), "date") is None


def test_a_fixed_width_column_loses_trailing_spaces():
    assert _changes("postgresql", sa.CHAR(10), "varchar(40)", "ab", "ab  ", " ab") == [False, True, False]
    assert _changes("mysql", my.CHAR(10), "text", "x ") == [True]
    assert loss("mysql", my.CHAR(10), "char(10)") is None  # the source strips them too
    assert loss("mysql", my.VARCHAR(10), "varchar(40)") is None


def test_floats_that_would_be_rounded():
    assert _changes("postgresql", pg.REAL(), "double", "1.0000000000000002", "0.5", "1e39") == [True, False, True]
    assert loss("postgresql", pg.REAL(), "float") is None  # a FLOAT's values are 4-byte floats already
    assert _changes("mysql", my.FLOAT(), "bigint", "16777217", "16777216") == [True, False]
    assert _changes("postgresql", pg.DOUBLE_PRECISION(), "bigint", "9007199254740993", "9007199254740992",
                    "-5", str(-2**63), str(2**63)) == [True, False, False, False, False]  # held exactly
    assert _changes("postgresql", pg.DOUBLE_PRECISION(), "decimal(40,31)",
                    "0.1000000000000000000000000000001") == [True]  # past a Decimal context's 28 digits
    assert _changes("mysql", my.DOUBLE(), "decimal(30,10)", "0.1", "12345678901234567890.1") == [False, True]
    assert loss("mysql", my.DOUBLE(), "double") is None and loss("mysql", my.DOUBLE(), "float") is None


def test_a_float_into_a_scaled_numeric():
    assert _changes("postgresql", pg.NUMERIC(10, 2), "float", "0.125", "0.25", "1e-05", "3") == \
        [True, False, True, False]
    assert loss("postgresql", pg.NUMERIC(), "double") is None  # no scale: keeps any
    assert loss("sqlite", sa.Numeric(10, 2), "double") is None


def test_json_with_a_duplicate_key_into_a_normalizing_json_column():
    assert _changes("postgresql", pg.JSONB(), "json", '{"a":1,"a":2}', '{"a":{"b":1,"b":1}}', '{"a":1,"b":2}',
                    '[{"a":1},{"a":2}]', "not json") == [True, True, False, False, False]
    assert _changes("mysql", my.JSON(), "json", '{"k": [1, {"x": 0, "x": 0}]}') == [True]
    assert loss("postgresql", pg.JSON(), "json") is None  # json keeps the text as written
    assert loss("mysql", my.LONGTEXT(), "json") is None  # MariaDB's JSON
    # MariaDB's JSON is a longtext to capture: the same guard; jsonb cannot hold \u0000 either
    assert _changes("postgresql", pg.JSONB(), "longtext", '{"a":1,"a":2}', '{"s":"a\\u0000b"}',
                    '{"s":"a\\\\u0000b"}', '{"s":"\\u00e9"}') == [True, True, False, False]
    assert _changes("mysql", my.JSON(), "longtext", '{"a":1,"a":2}', '{"s":"a\\u0000b"}') == [True, False]


def test_the_fix_is_a_type_that_holds_every_value():
    """The ALTER of a refusal gives the column the suggested type of the source's, unless that type is
    the column's own (a normalizing JSON column) or one MySQL cannot index (a TEXT key: error 1170)."""
    assert loss("postgresql", pg.JSONB(), "json").fix == "json"
    assert loss("mysql", my.JSON(), "json").fix == "longtext"
    assert loss("mysql", my.CHAR(10), "text").fix == "varchar(10)"  # the values fit the CHAR's length
    assert loss("mysql", my.VARCHAR(10), "text") is None
    assert loss("mysql", my.CHAR(10), "varchar(40)").fix is None  # the source's varchar(40)
    assert loss("postgresql", sa.CHAR(10), "mediumtext").fix is None  # text: PostgreSQL indexes it
