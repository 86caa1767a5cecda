"""Key folds against the real server: whatever the target's collation calls equal gets one fold
(the partition key may be coarser than the collation, never finer)."""

from __future__ import annotations

import uuid

import pymysql
import pytest

from adapters.rdb import RdbTarget
from adapters.rdb.client import engine_for
from adapters.rdb.collation import ORDERED, Folder, fold_kind, fold_values
from adapters.rdb.schema import ColumnInfo

#: the corpus: case, accents (composed and not), trailing spaces and other blanks, expansions,
#: contractions, ignorables, characters outside the BMP, and ASCII text of the fast path
CORPUS = ["z", "Z", "z ", "Z  ", "a", "A", "á", "Á ", "a\u0301", "A\u0301", "e", "é", "É", "e\u0301", "ss", "SS",
          "ß", "s", "S", "æ", "ae", "AE", "Æ", "ch", "CH", "Ch", "c h", "c", "h", "й", "и\u0306", "и", "Й",
          "😀", "😁", "𝐀", "ａ", "Ａ", "a\u00a0", "a\t", "a\u0000", "a \u0000", "å", "aa", "AA", "ü", "y", "Y",
          "o\u0308", "ö", "ø", "oe", "œ", "", " ", "  ", "\u200b", "a\u200bb", "ab", "AB", "a-b", "a_b", "a.b",
          "user@example.com", "USER@EXAMPLE.COM ", "Straße", "STRASSE", "strasse", "İ", "i", "ı", "I", "ﬁ", "fi",
          "١", "1", "Ǆ", "DŽ", "dž", "Ⅻ", "XII", "½", "1/2", "ᄀ", "가", "각", "\u1100\u1161\u11a8", "0", "00"]
COLLATIONS = ["utf8mb4_general_ci", "utf8mb4_unicode_ci", "utf8mb4_unicode_520_ci", "utf8mb4_uca1400_ai_ci",
              "utf8mb4_uca1400_as_cs", "utf8mb4_uca1400_nopad_ai_ci", "utf8mb4_general_nopad_ci",
              "utf8mb4_unicode_nopad_ci", "utf8mb4_bin", "utf8mb4_nopad_bin", "utf8mb4_czech_ci",
              "utf8mb4_german2_ci", "utf8mb4_danish_ci", "utf8mb3_general_ci", "latin1_swedish_ci",
              "latin1_german2_ci", "latin1_general_cs"]


@pytest.fixture(scope="module")
def server(mariadb_target):
    db = f"coll_{uuid.uuid4().hex[:6]}"
    conn = pymysql.connect(host=mariadb_target["host"], port=mariadb_target["port"], user=mariadb_target["user"],
                           password=mariadb_target["password"], autocommit=True, charset="utf8mb4")
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{db}`")
    target = RdbTarget.from_url(f"mariadb+pymysql://{mariadb_target['user']}@{mariadb_target['host']}:"
                                f"{mariadb_target['port']}/{db}", password=mariadb_target["password"])
    yield conn, db, target
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE `{db}`")
    conn.close()


def _equal_pairs(conn, db: str, collation: str) -> tuple[list[str], list[tuple[int, int]]]:
    """The corpus as the column stores it, and the pairs the server calls equal."""
    charset = collation.split("_", 1)[0]
    t = f"t_{collation}"
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE `{db}`.`{t}` (id INT PRIMARY KEY, v VARCHAR(30) CHARACTER SET {charset} "
                    f"COLLATE {collation})")
        for i, s in enumerate(CORPUS):
            cur.execute("SELECT CONVERT(CONVERT(%s USING " + charset + ") USING utf8mb4) = %s", (s, s))
            if cur.fetchone()[0]:  # representable in the charset
                cur.execute(f"INSERT INTO `{db}`.`{t}` VALUES (%s, %s)", (i, s))
        cur.execute(f"SELECT a.id, b.id FROM `{db}`.`{t}` a JOIN `{db}`.`{t}` b ON a.v = b.v AND a.id < b.id")
        return [s for s in CORPUS], list(cur.fetchall())


@pytest.mark.parametrize("collation", COLLATIONS)
def test_values_the_collation_equates_share_a_fold(server, collation):
    conn, db, target = server
    charset = collation.split("_", 1)[0]
    kind = fold_kind("mysql", ColumnInfo("v", None, charset=charset, collation=collation))
    assert kind not in (None, ORDERED)
    corpus, pairs = _equal_pairs(conn, db, collation)
    folds = fold_values(target, kind, corpus)
    assert pairs or collation.endswith("nopad_bin"), "the corpus has values this collation equates"
    split = [(corpus[a], corpus[b]) for a, b in pairs if folds[a] != folds[b]]
    assert not split, f"{collation}: equal on the server, different folds: {split}"
    # not trivially coarse: the fold still tells most values apart
    assert len(set(folds)) > len(corpus) // 3


@pytest.mark.parametrize("collation", ["utf8mb4_general_ci", "utf8mb4_unicode_ci", "utf8mb4_unicode_520_ci",
                                       "utf8mb4_uca1400_ai_ci", "utf8mb4_general_nopad_ci", "latin1_swedish_ci",
                                       "utf8mb3_general_ci"])
def test_ascii_fast_path_equals_the_server_weights(server, collation):
    """The per-character path for ASCII text is exact: no two ASCII characters contract, so the
    weight string of any ASCII text is its characters' weights in a row (all 128 x 128 pairs)."""
    conn, db, target = server
    charset = collation.split("_", 1)[0]
    one = f"HEX(WEIGHT_STRING(CONVERT(CHAR(%s USING {charset}) USING {charset}) COLLATE {collation}))"
    with conn.cursor() as cur:
        cur.execute(f"USE `{db}`")
        cur.execute(f"SELECT COUNT(*) FROM seq_0_to_127 a JOIN seq_0_to_127 b WHERE "
                    f"HEX(WEIGHT_STRING(CONVERT(CONCAT(CHAR(a.seq USING {charset}), CHAR(b.seq USING {charset})) "
                    f"USING {charset}) COLLATE {collation})) <> CONCAT({one % 'a.seq'}, {one % 'b.seq'})")
        assert cur.fetchone()[0] == 0
    # and the folder's fast path gives what the server path gives
    words = ["Hello World", "a", "Z  ", "user@example.com", "x\ty", "\x00a", "MiXeD CaSe 123"]
    kind = f"w:{charset}:{collation}"
    fast = Folder(lambda: engine_for(target).connect(), charset, collation)
    slow = Folder(lambda: engine_for(target).connect(), charset, collation)
    slow._per_char = False
    assert fast.fold(words) == slow.fold(words) == fold_values(target, kind, words)


def test_fold_kinds_of_other_columns():
    col = ColumnInfo("v", None, charset=None, collation=None)
    assert fold_kind("mysql", col) is None  # numbers, binary strings
    assert fold_kind("mysql", ColumnInfo("v", None, charset="binary", collation="binary")) is None
    assert fold_kind("mysql", ColumnInfo("v", None, charset="utf8mb4", collation="utf8mb4_uca1400_as_cs")) == \
        "w:utf8mb4:utf8mb4_uca1400_ai_ci"
    assert fold_kind("sqlite", ColumnInfo("v", None, collation="NOCASE")) == "lower"
    assert fold_kind("sqlite", ColumnInfo("v", None, collation="RTRIM")) == "rtrim"
    assert fold_values(None, "lower", ["Ab  ", "aB"]) == ["ab", "ab"]


def test_only_root_collations_take_the_ascii_fast_path():
    def fast(name: str) -> bool:
        return Folder(lambda: None, name.split("_")[0], name)._per_char
    assert all(fast(c) for c in ("utf8mb4_general_ci", "utf8mb4_unicode_520_nopad_ci", "utf8mb4_uca1400_ai_ci",
                                 "latin1_swedish_ci", "utf8mb4_0900_ai_ci", "utf8mb3_general_mysql500_ci"))
    assert not any(fast(c) for c in ("utf8mb4_czech_ci", "utf8mb4_swedish_ci", "utf8mb4_danish_ci",
                                     "utf8mb4_uca1400_czech_ai_ci", "latin2_czech_cs", "utf8mb4_spanish2_ci"))
