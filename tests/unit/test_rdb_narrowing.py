"""adapters/rdb/narrowing.py: target columns that keep fewer fractional digits than the source's."""

from __future__ import annotations

from sqlalchemy import types as sa
from sqlalchemy.dialects import mysql as my
from sqlalchemy.dialects import postgresql as pg

from adapters.rdb.narrowing import alter_statement, guard, lost_digits, widened_type


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
    assert lost_digits("mysql", my.INTEGER(), "decimal(10,2)") == (2, 0)  # rounded silently, strict or not
    assert lost_digits("mysql", my.BIGINT(unsigned=True), "decimal(20,4) unsigned") == (4, 0)
    assert lost_digits("mysql", my.INTEGER(), "decimal(10,0)") is None
    assert lost_digits("postgresql", pg.INTEGER(), "decimal(8,1)") == (1, 0)
    assert lost_digits("sqlite", sa.Integer(), "decimal(8,1)") is None


def test_the_fix_widens_the_target_s_own_type_and_keeps_its_integer_digits():
    assert widened_type("mysql", my.DATETIME(), "datetime(3)") == "DATETIME(3)"
    assert widened_type("mysql", my.TIMESTAMP(), "datetime(3)") == "TIMESTAMP(3)"  # its type, not the source's
    assert widened_type("mysql", my.DECIMAL(20, 2), "decimal(10,4)") == "DECIMAL(22,4)"
    assert widened_type("mysql", my.DECIMAL(6, 2), "decimal(10,4)") == "DECIMAL(10,4)"
    assert widened_type("postgresql", pg.TIMESTAMP(precision=0, timezone=True), "timestamp(3)") == \
        "timestamp(3) with time zone"
    assert widened_type("postgresql", pg.NUMERIC(8, 2), "decimal(8,4)") == "numeric(10,4)"
    assert widened_type("mysql", my.INTEGER(), "decimal(8,2)") == "DECIMAL(12,2)"  # INT's 10 digits kept
    assert widened_type("mysql", my.SMALLINT(), "decimal(8,2)") == "DECIMAL(8,2)"
    assert widened_type("postgresql", pg.BIGINT(), "decimal(30,4)") == "numeric(30,4)"
    assert widened_type("mysql", my.BIGINT(unsigned=True), "decimal(10,2)") == "DECIMAL(22,2)"
    assert alter_statement("mysql", ("db", "t"), "d", "DATETIME(3)", False) == \
        "ALTER TABLE `db`.`t` MODIFY `d` DATETIME(3) NOT NULL"
    assert alter_statement("mysql", ("db", "t"), "ts", "TIMESTAMP(3)", True) == \
        "ALTER TABLE `db`.`t` MODIFY `ts` TIMESTAMP(3) NULL"  # else the server may make it NOT NULL DEFAULT now
    assert alter_statement("postgresql", (None, "T"), "CreatedAt", "timestamp(3)", True) == \
        'ALTER TABLE "T" ALTER COLUMN "CreatedAt" TYPE timestamp(3)'


def test_a_value_passes_unless_the_target_would_round_it():
    """Digits beyond the target's that are all zero lose nothing (a DECIMAL(10,4) of 2-place values
    into DECIMAL(10,2) went on working) and are left out; any other is refused; the inner converter
    runs after."""
    import pytest

    check = guard(2, None, lambda v: ValueError(f"rounded: {v}"))
    assert check("1.2300") == "1.23" and check("-7") == "-7" and check(None) is None and check("1.23") == "1.23"
    with pytest.raises(ValueError, match="rounded: 1.2345"):
        check("1.2345")
    seconds = guard(0, str.upper, lambda v: ValueError(v))
    assert seconds("2026-11-29 10:00:00.000") == "2026-11-29 10:00:00"
    assert guard(0, int, lambda v: ValueError(v))("-3.00") == -3  # into an integer column
    with pytest.raises(ValueError):
        seconds("2026-11-29 10:00:00.999")
