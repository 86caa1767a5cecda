"""Every MySQL type and edge value through the real MariaDB binlog into the store."""

from __future__ import annotations

import uuid

import pytest

from pipeline.capture import run_capture
from pipeline.config import load_config
from tests.support import sysbench
from tests.support.capture_check import all_records, capture_both, mark_start, write_config

DDL = """CREATE TABLE {db}.types (
  id INT PRIMARY KEY,
  ti TINYINT, tu TINYINT UNSIGNED, tb TINYINT(1), tbu TINYINT(1) UNSIGNED,
  si SMALLINT, su SMALLINT UNSIGNED, mi MEDIUMINT, mu MEDIUMINT UNSIGNED,
  ii INT, iu INT UNSIGNED, bi BIGINT, bu BIGINT UNSIGNED,
  b1 BIT(1), b10 BIT(10), b64 BIT(64),
  dc DECIMAL(65,30), d52 DECIMAL(5,2), d0 DECIMAL(10,0),
  fl FLOAT, db DOUBLE,
  dt DATE, dtm DATETIME, dtm6 DATETIME(6), dtm3 DATETIME(3), tm TIME, tm6 TIME(6), tm2 TIME(2),
  ts6 TIMESTAMP(6) NULL DEFAULT NULL, ts0 TIMESTAMP NULL DEFAULT NULL, yr YEAR,
  en ENUM('a','b','c') NULL, st SET('x','y','z') NULL, js JSON NULL,
  vc VARCHAR(255), ch CHAR(10), tx TEXT, lt LONGTEXT,
  bn BINARY(4), vb VARBINARY(16), bl BLOB, lb LONGBLOB,
  geo GEOMETRY NULL, l1 VARCHAR(20) CHARACTER SET latin1
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"""

ROWS = [
    # id, ti, tu, tb, tbu, si, su, mi, mu, ii, iu, bi, bu
    "(1, -128, 255, 127, 255, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295,"
    " -9223372036854775808, 18446744073709551615,"
    " b'1', b'1111111111', b'1111111111111111111111111111111111111111111111111111111111111111',"
    " '-99999999999999999999999999999999999.999999999999999999999999999999', -999.99, 1234567890,"
    " 3.4028235e38, 1.7976931348623157e308,"
    " '0000-00-00', '0000-00-00 00:00:00', '9999-12-31 23:59:59.999999', '2024-02-29 12:34:56.789',"
    " '-838:59:59', '-00:00:00.000001', '838:59:58.99',"
    " '2038-01-18 22:14:07.999999', '1969-12-31 19:00:01', 0,"
    " '', '', '{\"b\": [1, 2.5, null, true], \"a\": \"\\\\u00e9\"}',"
    " 'héllo 😀 wörld', 'ab', 'multi\\nline\\ttext', REPEAT('x', 70000),"
    " x'00800AFF', x'00FF80', x'000102FEFF', x'',"
    " ST_GeomFromText('POINT(1 2)', 4326), 'caf\xe9')",
    "(2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, b'0', b'0', b'0', 0, 0.01, -1, -0.1, -2.5e-300,"
    " '2020-00-00', '2001-02-03 04:05:06', '2001-02-03 04:05:06.000001', '2001-02-03 04:05:06.100',"
    " '00:00:00', '12:00:00.5', '-01:02:03.04',"
    " '2021-03-14 02:30:00', '2021-11-07 01:30:00', 2155,"
    " 'c', 'x,z', '[]', '', '', '', '', x'', x'', x'', NULL, NULL, '')",
    "(3" + ", NULL" * 43 + ")",
]

ROWS_SQL_START = "INSERT INTO types"
EXPECTED_1 = {
    "id": "1", "ti": "-128", "tu": "255", "tb": "127", "tbu": "255", "si": "-32768", "su": "65535",
    "mi": "-8388608", "mu": "16777215", "ii": "-2147483648", "iu": "4294967295",
    "bi": "-9223372036854775808", "bu": "18446744073709551615",
    "b1": "1", "b10": "1023", "b64": "18446744073709551615",
    "dc": "-99999999999999999999999999999999999.999999999999999999999999999999", "d52": "-999.99",
    "d0": "1234567890", "fl": "3.4028235e+38", "db": "1.7976931348623157e+308",
    "dt": "0000-00-00", "dtm": "0000-00-00 00:00:00", "dtm6": "9999-12-31 23:59:59.999999",
    "dtm3": "2024-02-29 12:34:56.789", "tm": "-838:59:59", "tm6": "-00:00:00.000001", "tm2": "838:59:58.99",
    # TIMESTAMP: written in the session zone (America/New_York), stored and captured as UTC
    "ts6": "2038-01-19 03:14:07.999999", "ts0": "1970-01-01 00:00:01", "yr": "0000",
    "en": "", "st": "", "vc": "héllo 😀 wörld", "ch": "ab", "tx": "multi\nline\ttext", "lt": "x" * 70000,
    "bn": "\x00\x80\x0a\xff", "vb": "\x00\xff\x80", "bl": "\x00\x01\x02\xfe\xff", "lb": "",
    "geo": "E6100000" + "0101000000000000000000F03F0000000000000040", "l1": "café",
}
EXPECTED_2 = {
    "tb": "0", "b1": "0", "dc": "0.000000000000000000000000000000", "d52": "0.01", "d0": "-1",
    "fl": "-0.1", "db": "-2.5e-300", "dt": "2020-00-00", "dtm": "2001-02-03 04:05:06",
    "dtm6": "2001-02-03 04:05:06.000001", "dtm3": "2001-02-03 04:05:06.100", "tm": "00:00:00",
    "tm6": "12:00:00.500000", "tm2": "-01:02:03.04", "ts6": "2021-03-14 07:00:00.000000",  # DST gap
    "ts0": "2021-11-07 05:30:00", "yr": "2155", "en": "c", "st": "x,z", "js": "[]", "bn": "\x00\x00\x00\x00",
    "vb": "", "geo": None,
}


@pytest.fixture()
def types_db(mariadb, tmp_path):
    database = f"cap_types_{uuid.uuid4().hex[:8]}"
    config = write_config(mariadb, tmp_path, f"{database}\\..*")
    sysbench.create_database(mariadb, database)
    start = mark_start(config)
    with sysbench.connect(mariadb, database) as conn, conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode='NO_ENGINE_SUBSTITUTION'")
        cur.execute("SET SESSION time_zone='America/New_York'")
        cur.execute(DDL.format(db=database))
        for row in ROWS:
            cur.execute(f"INSERT INTO types VALUES {row}")
        cur.execute("UPDATE types SET vc='changed', bu=bu-1 WHERE id=1")
        cur.execute("DELETE FROM types WHERE id=3")
    yield mariadb, database, config, start
    sysbench.drop_database(mariadb, database)


def test_every_type_and_edge_value(types_db):
    mariadb, database, config, _ = types_db
    run_capture(load_config(config))
    recs = [r for r in all_records(str(load_config(config).store_dir()), database) if not r["isDdl"]]
    inserts = {r["data"][0]["id"]: r for r in recs if r["type"] == "INSERT"}
    row1, row2, row3 = (inserts[k]["data"][0] for k in ("1", "2", "3"))
    for col, want in EXPECTED_1.items():
        assert row1[col] == want, col
    assert row1["js"] in ('{"b": [1, 2.5, null, true], "a": "\\u00e9"}',)  # MariaDB JSON is text, verbatim
    for col, want in EXPECTED_2.items():
        assert row2[col] == want, col
    assert set(row3.values()) == {None, "3"}
    meta = inserts["1"]
    assert meta["pkNames"] == ["id"]
    mt, sq = meta["mysqlType"], meta["sqlType"]
    assert mt["bu"] == "bigint unsigned" and sq["bu"] == 3
    assert mt["dc"] == "decimal(65,30)" and mt["vc"] == "varchar(255)" and mt["ch"] == "char(10)"
    assert mt["bn"] == "binary(4)" and mt["vb"] == "varbinary(16)" and mt["lb"] == "longblob"
    assert mt["en"] == "enum('a','b','c')" and mt["st"] == "set('x','y','z')" and mt["b10"] == "bit(10)"
    assert mt["dtm6"] == "datetime(6)" and mt["ts6"] == "timestamp(6)" and mt["tm2"] == "time(2)"
    assert sq["tu"] == 5 and sq["ti"] == -6 and sq["bl"] == 2004 and sq["tx"] == 2005 and sq["dtm6"] == 93
    assert list(meta)[:13] == ["id", "database", "table", "pkNames", "isDdl", "type", "es", "ts", "sql",
                               "sqlType", "mysqlType", "data", "old"]
    assert meta["sql"] in ("", ROWS_SQL_START) or meta["sql"].startswith("INSERT INTO types")  # annotate SQL
    upd = next(r for r in recs if r["type"] == "UPDATE")
    assert upd["old"] == [{"vc": "héllo 😀 wörld", "bu": "18446744073709551615"}]
    assert upd["data"][0]["bu"] == "18446744073709551614" and upd["data"][0]["dt"] == "0000-00-00"
    dele = next(r for r in recs if r["type"] == "DELETE")
    assert dele["data"][0]["id"] == "3" and dele["old"] is None


def test_values_match_select(types_db):
    """Besides the fixed expectations: each captured value equals CAST(col AS CHAR) on the source."""
    mariadb, database, config, _ = types_db
    run_capture(load_config(config))
    recs = [r for r in all_records(str(load_config(config).store_dir()), database) if not r["isDdl"]]
    final = {r["data"][0]["id"]: r["data"][0] for r in recs if r["type"] in ("INSERT", "UPDATE")}
    text_cols = [c for c in EXPECTED_1 if c not in {"fl", "db", "geo", "bn", "vb", "bl", "lb", "b1", "b10", "b64"}]
    select = ", ".join(f"CAST(`{c}` AS CHAR)" for c in text_cols)
    with sysbench.connect(mariadb, database) as conn, conn.cursor() as cur:
        cur.execute("SET SESSION time_zone='+00:00'")  # TIMESTAMP is captured in UTC
        cur.execute(f"SELECT {select}, HEX(geo), HEX(bn), HEX(bl), b64+0, b10+0 FROM types WHERE id IN (1, 2)")
        for row in cur.fetchall():
            src = dict(zip(text_cols, row, strict=False))
            got = final[src["id"]]
            for col in text_cols:
                assert got[col] == src[col], col
            geo_hex, bn_hex, bl_hex, b64, b10 = row[len(text_cols):]
            assert got["geo"] == geo_hex
            assert got["bn"].encode("latin-1").hex().upper() == bn_hex
            assert got["bl"].encode("latin-1").hex().upper() == bl_hex
            assert got["b64"] == str(b64) and got["b10"] == str(b10)


def test_every_character_set_decodes_as_the_server_converts(mariadb, tmp_path):
    """Each byte of every single-byte character set as the server converts it (MySQL's latin1 keeps
    0x81..0x9D, its greek/hebrew/cp866 are not Python's, dec8/armscii8/... Python lacks; a byte the
    server has no character for stays ``\\xNN``), and the Unicode sets in their big-endian byte order
    (utf16 came out byte-swapped, ucs2 and utf16le stopped capture: a new user's probe)."""
    database = f"cap_cs_{uuid.uuid4().hex[:8]}"
    config = write_config(mariadb, tmp_path, f"{database}\\..*")
    sysbench.create_database(mariadb, database)
    try:
        every = bytes(range(256)).hex()
        with sysbench.connect(mariadb, database) as conn, conn.cursor() as cur:
            cur.execute("SELECT CHARACTER_SET_NAME FROM information_schema.CHARACTER_SETS WHERE MAXLEN = 1 "
                        "AND CHARACTER_SET_NAME <> 'binary' ORDER BY 1")
            single = [r[0] for r in cur.fetchall()]
            unicode = ["utf16", "utf16le", "utf32", "ucs2", "utf8mb3"]
            cols = ", ".join(f"c_{cs} VARCHAR(300) CHARACTER SET {cs}" for cs in single + unicode)
            cur.execute(f"CREATE TABLE t (id INT PRIMARY KEY, {cols})")
            start = mark_start(config)
            values = [f"CONVERT(UNHEX('{every}') USING {cs})" for cs in single] + ["'héllo wörld ж'"] * len(unicode)
            cur.execute(f"INSERT INTO t VALUES (1, {', '.join(values)})")
            cur.execute(f"SELECT {', '.join(f'HEX(CONVERT(c_{cs} USING utf32))' for cs in single)} FROM t")
            server = cur.fetchone()
        assert start
        run_capture(load_config(config))
        row = next(r for r in all_records(str(load_config(config).store_dir()), database) if not r["isDdl"])["data"][0]
        for cs, text in zip(single, server, strict=True):
            points = [int(text[i:i + 8], 16) for i in range(0, len(text), 8)]
            want = "".join(f"\\x{b:02x}" if (p == 0x3F and b != 0x3F) or p == 0xFFFD else chr(p)
                           for b, p in enumerate(points))
            assert row[f"c_{cs}"] == want, cs
        assert row["c_latin1"][0x81] == "\x81"  # not cp1252's undefined byte
        for cs in unicode:
            assert row[f"c_{cs}"] == "héllo wörld ж", cs
    finally:
        sysbench.drop_database(mariadb, database)


def test_a_timestamp_of_zero_seconds_with_a_fraction_is_the_epoch(mariadb, tmp_path, monkeypatch):
    """MariaDB stores an out-of-range TIMESTAMP(6) under a relaxed sql_mode as 0 seconds with its
    fraction and prints 1970-01-01 00:00:00.999999 (UTC); capture wrote the zero timestamp with that
    fraction, which a mirror refused (1292) and PostgreSQL took as -infinity (a new user's probe)."""
    database = f"cap_ts_{uuid.uuid4().hex[:8]}"
    sysbench.create_database(mariadb, database)
    try:
        with sysbench.connect(mariadb, database) as conn, conn.cursor() as cur:
            cur.execute("CREATE TABLE t (id INT PRIMARY KEY, ts TIMESTAMP(6) NULL, t3 TIMESTAMP(3) NULL)")
            (tmp_path / "mark").mkdir()
            start = mark_start(write_config(mariadb, tmp_path / "mark", "none\\..*"))
            cur.execute("SET SESSION sql_mode='', time_zone='America/New_York'")
            cur.execute("INSERT INTO t VALUES (1, '2038-01-19 03:14:07.999999', '2038-01-19 03:14:07.5'), "
                        "(2, '0000-00-00 00:00:00', '0000-00-00 00:00:00')")
            cur.execute("SET SESSION time_zone='+00:00'")
            cur.execute("SELECT id, CAST(ts AS CHAR), CAST(t3 AS CHAR) FROM t ORDER BY id")
            want = {str(i): (a, b) for i, a, b in cur.fetchall()}
        assert want["1"] == ("1970-01-01 00:00:00.999999", "1970-01-01 00:00:00.500")
        rows = [row for r in capture_both(mariadb, tmp_path, database, start, monkeypatch) if not r["isDdl"]
                for row in r["data"]]
        assert {r["id"]: (r["ts"], r["t3"]) for r in rows} == want
    finally:
        sysbench.drop_database(mariadb, database)
