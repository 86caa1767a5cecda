"""Which statements copy a table of a database the mirror does not cover (adapters/rdb/like.py)."""

from __future__ import annotations

import pytest

from adapters.base import DdlChange
from adapters.rdb.like import foreign, without_foreign_keys
from sluice_common.mysqlddl import like_source


@pytest.mark.parametrize(("sql", "want"), [
    ("CREATE TABLE dbz_104_customers LIKE connector_test.customers", ("connector_test", "customers")),
    ("create table if not exists `a` (like `o``x`.`t`);", ("o`x", "t")),
    ("/* c */ CREATE OR REPLACE TABLE shop.a LIKE b", (None, "b")),
    ("CREATE TABLE a (id INT) LIKE b", None),
    ("CREATE TABLE a AS SELECT * FROM other.b", None),
])
def test_like_source(sql, want):
    found = like_source(sql)
    assert (found[:2] if found else None) == want
    if found:
        assert sql[found[2]:found[3]].replace("`", "").replace(" ", "").endswith(found[1].replace("`", ""))


def test_foreign_is_a_database_outside_the_mirrors():
    ddl = DdlChange("CREATE", "shop", "a", "CREATE TABLE a LIKE tmpl.t")
    assert foreign(ddl, {"shop"})[:2] == ("tmpl", "t")
    assert foreign(ddl, {"shop", "tmpl"}) is None  # mirrored on this target: rewritten like any name
    assert foreign(DdlChange("CREATE", "shop", "a", "CREATE TABLE a LIKE shop.t"), {"shop"}) is None
    assert foreign(DdlChange("CREATE", "shop", "a", "CREATE TABLE a LIKE t"), {"shop"}) is None


def test_without_foreign_keys():
    text = ("CREATE TABLE `t` (\n  `id` int(11) NOT NULL,\n  `p` int(11) DEFAULT NULL,\n  PRIMARY KEY (`id`),\n"
            "  KEY `p` (`p`),\n  CONSTRAINT `t_ibfk_1` FOREIGN KEY (`p`) REFERENCES `p` (`id`)\n) ENGINE=InnoDB")
    assert without_foreign_keys(text) == ("CREATE TABLE `t` (\n  `id` int(11) NOT NULL,\n  `p` int(11) DEFAULT NULL,"
                                          "\n  PRIMARY KEY (`id`),\n  KEY `p` (`p`)\n) ENGINE=InnoDB")
    assert without_foreign_keys("CREATE TABLE `t` (\n  `id` int\n)") == "CREATE TABLE `t` (\n  `id` int\n)"
