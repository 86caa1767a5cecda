"""Full-load pieces without services: key-range predicates, etlCondition binding, the
SELECT-side value rules and mysqlType spelling."""

from __future__ import annotations

import itertools
import sqlite3
import struct

import pytest

from pipeline.etl import ranges as R
from pipeline.etl.plan import bind_condition
from pipeline.etl.values import SourceColumn, row_decoder
from sluice_common.errors import ConfigError


def _sqlite(pred: str) -> str:
    return pred.replace("%s", "?")


@pytest.mark.parametrize("width", [1, 2, 3])
def test_ranges_cover_every_key_exactly_once(width):
    """Consecutive ranges from any boundaries partition the key space (checked by SQLite,
    which evaluates the same expanded row comparisons)."""
    cols = tuple(f"k{i}" for i in range(width))
    keys = list(itertools.product(range(9 if width == 1 else 4), repeat=width))
    db = sqlite3.connect(":memory:")
    db.execute(f"CREATE TABLE t ({', '.join(cols)}, PRIMARY KEY ({', '.join(cols)}))")
    db.executemany(f"INSERT INTO t VALUES ({', '.join('?' * width)})", keys)
    for bounds in ([], [keys[5]], [keys[1], keys[len(keys) // 2], keys[-2]], [keys[0], keys[-1]]):
        seen = []
        for r in R._from_bounds(bounds):
            where, params = R.range_predicate(cols, r, "t")
            seen += db.execute(f"SELECT * FROM t WHERE {_sqlite(where)}", params).fetchall()
        assert sorted(seen) == keys, bounds


def test_paging_after_a_key_continues_exactly():
    cols = ("a", "b")
    keys = list(itertools.product(range(5), range(5)))
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE t (a, b, PRIMARY KEY (a, b))")
    db.executemany("INSERT INTO t VALUES (?, ?)", keys)
    r = R.KeyRange((1, 3), (3, 1))
    got, after = [], None
    while True:
        where, params = R.range_predicate(cols, r, "", after)
        page = db.execute(f"SELECT a, b FROM t WHERE {_sqlite(where)} ORDER BY a, b LIMIT 4", params).fetchall()
        got += page
        if len(page) < 4:
            break
        after = page[-1]
    assert got == [k for k in keys if (1, 3) < k <= (3, 1)]


def test_unbounded_range_reads_everything():
    assert R.range_predicate(("id",), R.KeyRange()) == ("1=1", [])
    assert R.range_predicate((), R.KeyRange((1,), (2,))) == ("1=1", [])


def test_condition_binding():
    assert bind_condition("where c_time >= {} and name like 'a%'", ("2024-01-01",), "m.yml", "k") == \
        "c_time >= %s and name like 'a%%'"
    assert bind_condition("  WHERE a.x = {} OR a.y = {}", ("1", "2"), "m.yml", "k") == "a.x = %s OR a.y = %s"
    assert bind_condition("id > 10", (), "m.yml", "k") == "id > 10"
    assert bind_condition(None, (), "m.yml", "k") is None
    with pytest.raises(ConfigError, match=r"m.yml: dbMapping.etlCondition: .* 2 '\{\}' placeholder\(s\) but "
                                          r"--params gave 1"):
        bind_condition("a = {} and b = {}", ("1",), "m.yml", "dbMapping.etlCondition")
    with pytest.raises(ConfigError, match="has no etlCondition"):
        bind_condition(None, ("1",), "m.yml", "k")


@pytest.mark.parametrize(("data_type", "column_type", "want"), [
    ("int", "int(11)", "int"),
    ("tinyint", "tinyint(1)", "tinyint"),
    ("bigint", "bigint(20) unsigned", "bigint unsigned"),
    ("int", "int(10) unsigned zerofill", "int unsigned"),
    ("decimal", "decimal(65,30)", "decimal(65,30)"),
    ("decimal", "decimal(5,2) unsigned", "decimal(5,2) unsigned"),
    ("float", "float(7,3)", "float"),
    ("double", "double", "double"),
    ("year", "year(4)", "year"),
    ("datetime", "datetime(6)", "datetime(6)"),
    ("varchar", "varchar(255)", "varchar(255)"),
    ("binary", "binary(4)", "binary(4)"),
    ("longtext", "longtext", "longtext"),
    ("enum", "enum('a','it''s')", "enum('a','it''s')"),
    ("set", "set('x','y')", "set('x','y')"),
    ("bit", "bit(10)", "bit(10)"),
    ("point", "point", "point"),
])
def test_mysql_type_in_binlog_spelling(data_type, column_type, want):
    assert SourceColumn("c", data_type, column_type).mysql_type() == want


def test_select_side_value_rules():
    cols = (SourceColumn("f", "float", "float"), SourceColumn("d", "double", "double"),
            SourceColumn("b", "bit", "bit(10)"), SourceColumn("v", "varbinary", "varbinary(8)"),
            SourceColumn("g", "point", "point"), SourceColumn("z", "int", "int(5) unsigned zerofill"),
            SourceColumn("s", "varchar", "varchar(5)"), SourceColumn("n", "int", "int(11)"))
    f32_max = struct.unpack("<f", struct.pack("<f", 3.4028234663852886e38))[0]
    dec = row_decoder(cols)
    got = dec(("1.100000023841858", "2.2250738585072014e-308", b"\x03\xff", b"\x00\x80\xff",
               b"\xe6\x10\x00\x00\x01", "00042", "héllo", None))
    assert got == {"f": "1.1", "d": "2.2250738585072014e-308", "b": "1023", "v": "\x00\x80\xff",
                   "g": "E610000001", "z": "42", "s": "héllo", "n": None}
    assert dec((repr(f32_max), "3.4028234663852886e38", b"\x00", b"", b"", "0", "", "7"))["f"] == "3.4028235e+38"
    assert dec(("1.401298464324817e-45", "-0", b"\x00", b"", b"", "0", "", "7"))["f"] == "1e-45"
    assert dec(("0", "-0", b"\x00", b"", b"", "0", "", "7"))["d"] == "-0.0"
    assert cols[0].select_expr("`t`.`f`") == "CAST(`t`.`f` AS DOUBLE)"
    assert cols[6].select_expr("`t`.`s`") == "`t`.`s`"
