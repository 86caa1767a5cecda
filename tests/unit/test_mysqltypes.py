"""The source vocabulary (sluice_common/mysqltypes.py): type parsing, the binary and geometry
sets, FLOAT text and identifier quoting, and that capture, ETL, verify and every adapter read a
type the same way."""

from __future__ import annotations

import struct

import pytest

from adapters.es.values import column_kind
from adapters.hbase.values import native_kind
from adapters.rdb.values import source_kind, suggest_type
from sluice_common.dmlvalues import float32_text
from sluice_common.mysqltypes import (
    BINARY_TYPES,
    GEOMETRY_TYPES,
    MysqlType,
    is_binary,
    parse_type,
    quote_ident,
)
from sluice_common.normalize import dml_text

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("text, parsed, width", [
    ("bigint(20) unsigned", MysqlType("bigint", "20", True), 20),
    ("decimal(10,2) unsigned zerofill", MysqlType("decimal", "10,2", True), 10),
    ("  INT UNSIGNED", MysqlType("int", "", True), None),
    ("enum('a','unsigned')", MysqlType("enum", "'a','unsigned'", False), None),
    ("bit(12)", MysqlType("bit", "12", False), 12),
    ("geometrycollection", MysqlType("geometrycollection"), None),
    ("", MysqlType(""), None),
    (None, MysqlType(""), None),
])
def test_parse_type(text, parsed, width):
    assert parse_type(text) == parsed and parse_type(text).width == width


@pytest.mark.parametrize("text", ["varbinary(16)", "blob", "longblob", "binary(4)", "point", "geometry",
                                  "bigint(20) unsigned", "decimal(65,30)", "varchar(10)", "json"])
def test_every_adapter_reads_a_type_the_same_way(text):
    binary, geometry = parse_type(text).binary, parse_type(text).geometry
    assert is_binary(text) == binary == (text.split("(")[0] in BINARY_TYPES)
    assert geometry == (text in GEOMETRY_TYPES)
    assert (source_kind(text) == "binary") == (column_kind(text) == "binary") == binary
    assert (source_kind(text) == "geometry") == (column_kind(text) == "geometry") == geometry
    assert (native_kind(text) == "BYTES") == binary


@pytest.mark.parametrize("x", [0.0, 1.0, -0.1, 3.4028234663852886e38, 1.401298464324817e-45, 16777217.0,
                               123.456, float("inf"), float("-inf")])
def test_float32_text_is_the_shortest_round_trip(x):
    f = struct.unpack("<f", struct.pack("<f", x))[0]
    text = float32_text(f)
    assert struct.unpack("<f", struct.pack("<f", float(text)))[0] == f
    assert dml_text("float", "float", x) == text  # verify renders a source FLOAT as capture does


def test_quote_ident():
    assert quote_ident("a`b") == "`a``b`" and quote_ident("t") == "`t`"


@pytest.mark.parametrize("text, hbase, postgresql, sqlite", [
    ("tinyint(1)", "BYTE", "smallint", "INTEGER"), ("bool", "BYTE", "text", "TEXT"),
    ("tinyint unsigned", "SHORT", "smallint", "INTEGER"), ("smallint", "SHORT", "smallint", "INTEGER"),
    ("smallint unsigned", "INTEGER", "integer", "INTEGER"), ("mediumint", "INTEGER", "integer", "INTEGER"),
    ("mediumint unsigned", "INTEGER", "integer", "INTEGER"), ("int(11)", "INTEGER", "integer", "INTEGER"),
    ("integer unsigned", "LONG", "bigint", "INTEGER"), ("bigint(20)", "LONG", "bigint", "INTEGER"),
    ("bigint(20) unsigned", "LONG", "numeric(20,0)", "TEXT"),
])
def test_an_integer_type_gets_the_smallest_signed_target_that_holds_it(text, hbase, postgresql, sqlite):
    """HBase's NATIVE kind and the suggested RDB column come from one size rule
    (``signed_bytes``), not from a list of the integer types each."""
    assert native_kind(text) == hbase
    assert suggest_type("postgresql", text) == postgresql and suggest_type("sqlite", text) == sqlite
