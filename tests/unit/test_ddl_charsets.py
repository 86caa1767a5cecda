"""The rewrite that makes a replayed CREATE/ALTER say which collation each character column had at
the source (adapters/rdb/charsets.py), and the names it gives MySQL's and MariaDB's collations on
the other flavour."""

from __future__ import annotations

import pytest

from adapters.rdb.charsets import SourceCharsets, candidates, rewrite, translate
from sluice_common.errors import TargetMismatchError

MYSQL = SourceCharsets({"d": ("utf8mb4", "utf8mb4_0900_ai_ci")},
                       {"utf8mb4": "utf8mb4_0900_ai_ci", "latin1": "latin1_swedish_ci"})
MARIADB_10_11 = frozenset({"utf8mb4_general_ci", "utf8mb4_unicode_ci", "utf8mb4_bin", "utf8mb4_nopad_bin",
                           "utf8mb4_uca1400_nopad_ai_ci", "utf8mb4_uca1400_nopad_as_ci", "latin1_swedish_ci"})


@pytest.mark.parametrize("sql, want", [
    # plain columns: the source database's default, as a table option after the column list
    ("CREATE TABLE b (k VARCHAR(10) NOT NULL PRIMARY KEY) /* c */ PARTITION BY KEY(k)",
     "CREATE TABLE b (k VARCHAR(10) NOT NULL PRIMARY KEY) DEFAULT CHARSET=utf8mb4 "
     "COLLATE=utf8mb4_uca1400_nopad_ai_ci /* c */ PARTITION BY KEY(k)"),
    # a named collation the target lacks: its equivalent
    ("CREATE TABLE u (e VARCHAR(40) COLLATE `utf8mb4_0900_as_ci`) DEFAULT CHARSET=utf8mb4",
     "CREATE TABLE u (e VARCHAR(40) COLLATE `utf8mb4_uca1400_nopad_as_ci`) DEFAULT CHARSET=utf8mb4 "
     "COLLATE utf8mb4_uca1400_nopad_ai_ci"),
    # CHARSET alone: the source server's default collation of it; not inside CAST(...)
    ("CREATE TABLE t (a VARCHAR(3) CHARSET latin1, b ENUM('x') CHARACTER SET utf8mb4, "
     "g VARCHAR(5) AS (CAST(a AS CHAR(5) CHARACTER SET utf8mb4))) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
     "CREATE TABLE t (a VARCHAR(3) CHARSET latin1 COLLATE latin1_swedish_ci, b ENUM('x') CHARACTER SET utf8mb4 "
     "COLLATE utf8mb4_uca1400_nopad_ai_ci, g VARCHAR(5) AS (CAST(a AS CHAR(5) CHARACTER SET utf8mb4))) "
     "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE utf8mb4_uca1400_nopad_ai_ci"),
    ("CREATE TABLE t2 LIKE t", "CREATE TABLE t2 LIKE t"),
    ("CREATE TABLE t3 (x INT) DEFAULT COLLATE=utf8mb4_bin", "CREATE TABLE t3 (x INT) DEFAULT COLLATE=utf8mb4_bin"),
])
def test_create_table(sql, want):
    assert rewrite(sql, "CREATE", "d", MYSQL, MARIADB_10_11) == want


def test_alter_table_clauses():
    sql = ("ALTER TABLE t ADD COLUMN x VARCHAR(3) CHARSET utf8mb4, CONVERT TO CHARACTER SET utf8mb4, "
           "MODIFY y VARCHAR(3) CHARSET utf8mb4 NOT NULL COLLATE utf8mb4_bin, ADD COLUMN z VARCHAR(2)")
    assert rewrite(sql, "ALTER", "d", MYSQL, MARIADB_10_11) == (
        "ALTER TABLE t ADD COLUMN x VARCHAR(3) CHARSET utf8mb4 COLLATE utf8mb4_uca1400_nopad_ai_ci, CONVERT TO "
        "CHARACTER SET utf8mb4 COLLATE utf8mb4_uca1400_nopad_ai_ci, MODIFY y VARCHAR(3) CHARSET utf8mb4 NOT NULL "
        "COLLATE utf8mb4_bin, ADD COLUMN z VARCHAR(2)")


def test_without_the_source_only_names_are_translated():
    sql = "CREATE TABLE b (k VARCHAR(10) COLLATE utf8mb4_0900_ai_ci, c VARCHAR(3) CHARSET utf8mb4)"
    assert rewrite(sql, "CREATE", "d", None, MARIADB_10_11) == (
        "CREATE TABLE b (k VARCHAR(10) COLLATE utf8mb4_uca1400_nopad_ai_ci, c VARCHAR(3) CHARSET utf8mb4)")


def test_a_collation_without_an_equivalent_is_refused_by_name():
    with pytest.raises(TargetMismatchError, match=r"d\.z: .*utf8mb4_ja_0900_as_cs"):
        rewrite("CREATE TABLE z (a VARCHAR(3) COLLATE utf8mb4_ja_0900_as_cs)", "CREATE", "d", MYSQL, MARIADB_10_11,
                "z")


def test_names_across_flavours():
    assert candidates("utf8mb4_de_pb_0900_as_cs") == ["utf8mb4_uca1400_german2_nopad_as_cs"]
    assert candidates("utf8mb4_uca1400_german2_nopad_as_cs") == ["utf8mb4_de_pb_0900_as_cs"]
    assert candidates("utf8mb4_uca1400_ai_ci") == ["utf8mb4_0900_ai_ci"]  # PAD SPACE -> NO PAD: finer
    assert candidates("utf8mb4_0900_bin") == ["utf8mb4_nopad_bin"]
    assert candidates("utf8mb4_general_nopad_ci") == []  # MySQL has nothing that compares like it
    assert translate("utf8mb4_general_ci", MARIADB_10_11) == "utf8mb4_general_ci"


def test_utf8_alias_of_utf8mb3_is_known_to_a_target_listing_utf8mb3():
    # Debezium's enum_column_test: COLLATE utf8_unicode_ci on MariaDB 10.11, whose
    # information_schema.COLLATIONS lists utf8mb3_unicode_ci only (the replay was refused)
    have = MARIADB_10_11 | {"utf8mb3_unicode_ci", "utf8mb3_general_ci"}
    assert translate("utf8_unicode_ci", have) == "utf8_unicode_ci"
    assert translate("utf8_unicode_ci", MARIADB_10_11) is None
    assert rewrite("CREATE TABLE s (a VARCHAR(3) CHARACTER SET utf8 COLLATE utf8_unicode_ci)", "CREATE", "d", None,
                   have, "s") == "CREATE TABLE s (a VARCHAR(3) CHARACTER SET utf8 COLLATE utf8_unicode_ci)"
