"""pipeline/source/catalog.py against real MariaDB and MySQL sources: the one place the source's
information_schema is read (ETL, pre-flight, cascades, verify, repair), on text and raw-bytes
cursors alike."""

from __future__ import annotations

import uuid

import pymysql
import pytest

from pipeline.etl.values import RAW_CONV
from pipeline.source import catalog
from pipeline.source.catalog import Column, ForeignKey
from tests.support.sysbench import connect


@pytest.fixture(params=["mariadb", "mysql"])
def source(request):
    db = request.getfixturevalue(request.param)
    name = f"cat_{uuid.uuid4().hex[:8]}"
    with connect(db) as c, c.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}`")
        cur.execute(f"CREATE TABLE `{name}`.parent (b INT NOT NULL, a INT NOT NULL, u VARCHAR(10) NOT NULL, "
                    "n INT NULL, txt VARCHAR(10) CHARACTER SET latin1 COLLATE latin1_bin, "
                    "PRIMARY KEY (b, a), UNIQUE KEY u1 (u), UNIQUE KEY un (n), UNIQUE KEY ua (u, a))")
        cur.execute(f"CREATE TABLE `{name}`.child (id INT NOT NULL PRIMARY KEY, pb INT, pa INT, j JSON, "
                    "CONSTRAINT fk_p FOREIGN KEY (pb, pa) REFERENCES parent (b, a) "
                    "ON DELETE CASCADE ON UPDATE RESTRICT)")
        cur.execute(f"INSERT INTO `{name}`.parent VALUES (1, 2, 'x', NULL, 't')")
        cur.execute(f"ANALYZE TABLE `{name}`.parent")
        if request.param == "mariadb":
            cur.execute(f"CREATE TABLE `{name}`.versioned (k INT NOT NULL PRIMARY KEY, v INT) WITH SYSTEM VERSIONING")
    yield request.param, db, name
    with connect(db) as c, c.cursor() as cur:
        cur.execute(f"DROP DATABASE `{name}`")


@pytest.mark.parametrize("raw", [False, True], ids=["text", "raw-bytes"])
def test_what_the_catalog_says_about_a_source_table(source, raw):
    flavor, db, name = source
    with connect(db, **({"conv": RAW_CONV} if raw else {})) as c, c.cursor(pymysql.cursors.Cursor) as cur:
        cols = catalog.columns(cur, name, "parent")
        assert [(c.name, c.data_type, c.key) for c in cols] == [
            ("b", "int", "PRI"), ("a", "int", "PRI"), ("u", "varchar", "UNI"), ("n", "int", "UNI"),
            ("txt", "varchar", "")]
        assert all(isinstance(x, str) for c in cols for x in c)
        assert cols[2].column_type == "varchar(10)"
        assert catalog.columns(cur, name, "missing") == []
        every = catalog.columns_by_table(cur, name)
        assert every["parent"] == cols and [c.name for c in every["child"]] == ["id", "pb", "pa", "j"]
        assert catalog.primary_key(cur, name, "parent") == ["b", "a"]  # key order, not table order
        # the nullable unique key cannot identify a row; the shortest key first
        assert catalog.unique_keys(cur, name, "parent") == [("u",), ("b", "a"), ("u", "a")]
        assert catalog.foreign_keys(cur, {name}) == [
            ForeignKey("fk_p", name, "child", ("pb", "pa"), name, "parent", ("b", "a"), "CASCADE", "RESTRICT")]
        assert catalog.foreign_keys(cur, set()) == []
        assert catalog.row_estimate(cur, name, "parent") >= 0 and catalog.row_estimate(cur, name, "missing") == 0
        assert name in catalog.databases_with(cur, "parent")
        assert dict((n, (cs, co)) for n, cs, co in catalog.column_charsets(cur, name, "parent"))["txt"] == \
            ("latin1", "latin1_bin")
        assert catalog.tables(cur, name)[:2] == ["child", "parent"]
        # MariaDB's JSON is LONGTEXT with a json_valid() check; MySQL's is a type of its own
        json_type = next(c.data_type for c in catalog.columns(cur, name, "child") if c.name == "j")
        if flavor == "mariadb":
            assert json_type == "longtext" and catalog.json_checked_columns(cur, name, "child") == {"j"}
            # a system-versioned table's key as its index has it: KEY_COLUMN_USAGE adds row_end
            assert catalog.primary_key(cur, name, "versioned") == ["k"]
            assert [c.name for c in catalog.columns(cur, name, "versioned")] == ["k", "v"]
        else:
            assert json_type == "json" and catalog.json_checked_columns(cur, name, "child") == set()
    assert Column("a", "int", "int", "") == ("a", "int", "int", "")
