"""adapters/rdb/narrowing.py: target columns that keep fewer fractional digits than the source's."""

from __future__ import annotations

from sqlalchemy import types as sa
from sqlalchemy.dialects import mysql as my
from sqlalchemy.dialects import postgresql as pg

from adapters.rdb.narrowing import alter_statement, lost_digits, widened_type


def test_fractional_seconds_and_decimal_scales_a_target_would_round():
    assert lost_digits("mysql", my.DATETIME(), "datetime(3)") == (3, 0)
    assert lost_digits("mysql", my.DATETIME(fsp=3), "datetime(3)") is None
    assert lost_digits("mysql", my.DATETIME(fsp=6), "datetime(3)") is None
    assert lost_digits("mysql", my.TIMESTAMP(fsp=2), "timestamp(6)") == (6, 2)
    assert lost_digits("mysql", my.TIME(), "time(1)") == (1, 0)
    assert lost_digits("mysql", my.DATETIME(), "datetime") is None
    assert lost_digits("mysql", my.DECIMAL(10, 2), "decimal(10,4)") == (4, 2)
    assert lost_digits("mysql", my.DECIMAL(12, 4), "decimal(10,4) unsigned") is None
    assert lost_digits("mysql", my.DOUBLE(), "decimal(10,4)") is None  # a float: another kind of column
    assert lost_digits("mysql", my.VARCHAR(40), "datetime(6)") is None
    assert lost_digits("postgresql", pg.TIMESTAMP(), "datetime(6)") is None  # PostgreSQL's default: 6
    assert lost_digits("postgresql", pg.TIMESTAMP(precision=0), "datetime(3)") == (3, 0)
    assert lost_digits("postgresql", pg.NUMERIC(), "decimal(10,4)") is None  # no scale: keeps any
    assert lost_digits("sqlite", sa.DateTime(), "datetime(6)") is None


def test_the_fix_widens_the_column_and_keeps_its_integer_digits():
    assert widened_type("mysql", my.DATETIME(), "datetime(3)") == "DATETIME(3)"
    assert widened_type("mysql", my.DECIMAL(20, 2), "decimal(10,4)") == "DECIMAL(22,4)"
    assert widened_type("mysql", my.DECIMAL(6, 2), "decimal(10,4)") == "DECIMAL(10,4)"
    assert widened_type("postgresql", pg.TIMESTAMP(precision=0, timezone=True), "timestamp(3)") == \
        "timestamp(3) with time zone"
    assert alter_statement("mysql", "db.t", "d", "DATETIME(3)", False) == \
        "ALTER TABLE db.t MODIFY d DATETIME(3) NOT NULL"
    assert alter_statement("postgresql", "s.t", "d", "timestamp(3)", True) == \
        "ALTER TABLE s.t ALTER COLUMN d TYPE timestamp(3)"
