"""Query-event status variables: the session's time zone and start microseconds are found after
every variable a server writes before them, and an unknown code ends the block without guessing.
(The real servers' blocks: tests/integration/test_capture_session.py.)"""

from __future__ import annotations

from pipeline.capture.statusvars import Session, session_of


def _tz(name: str) -> bytes:
    return bytes([5, len(name)]) + name.encode()


FLAGS2 = bytes([0]) + (0x04000000).to_bytes(4, "little")
SQL_MODE = bytes([1]) + (0x40000000).to_bytes(8, "little")
CHARSET = bytes([4]) + bytes(6)
CATALOG_NZ = bytes([6, 3]) + b"std"
INVOKER = bytes([11, 4]) + b"root" + bytes([9]) + b"localhost"


def test_mariadb_block():
    usec = (123456).to_bytes(3, "little")
    block = FLAGS2 + SQL_MODE + CATALOG_NZ + CHARSET + _tz("Asia/Kolkata") + bytes([7, 0, 0, 8, 33, 0]) + INVOKER \
        + bytes([128]) + usec + bytes([129]) + bytes(8)
    assert session_of(block) == Session("Asia/Kolkata", 123456, True)


def test_mysql_block_with_updated_databases():
    dbs = bytes([12, 2]) + b"a\0" + b"bb\0"
    block = FLAGS2 + SQL_MODE + CATALOG_NZ + CHARSET + _tz("+05:30") + bytes([8, 255, 0]) + dbs \
        + bytes([13]) + (7).to_bytes(3, "little") + bytes([16, 1, 18, 255, 0])
    assert session_of(block) == Session("+05:30", 7, True)
    over = bytes([12, 254]) + bytes([13]) + (8).to_bytes(3, "little")  # too many databases: no names follow
    assert session_of(over) == Session(None, 8, True)


def test_absent_and_unknown():
    assert session_of(b"") == Session(None, None, True)
    assert session_of(FLAGS2 + SQL_MODE + CHARSET) == Session(None, None, True)
    # an unknown code: its size is unknown, so nothing after it is read
    assert session_of(FLAGS2 + bytes([200, 1, 2]) + _tz("UTC")) == Session(None, None)
    assert session_of(_tz("UTC") + bytes([200]) + bytes([13, 1, 0, 0])) == Session("UTC", None)
    assert session_of(bytes([5, 40]) + b"short") == Session(None, None)  # a block shorter than it says
    assert session_of(_tz("UTC") + bytes([128, 1])) == Session("UTC", None)


def test_a_block_read_whole_says_so_and_mariadb_11s_collations_come_before_the_zone():
    """MariaDB 11.5+ writes Q_CHARACTER_SET_COLLATIONS (131: a count, then 4 bytes per pair) before
    Q_CHARSET and the zone: read past it, the zone is found; only a block read to its end is whole
    (then a missing zone means the statement used none: adapters/rdb/ddl.py)."""
    collations = bytes([131, 2]) + bytes(8)
    block = FLAGS2 + SQL_MODE + CATALOG_NZ + collations + CHARSET + _tz("America/New_York")
    assert session_of(block) == Session("America/New_York", None, True)
    assert session_of(FLAGS2 + SQL_MODE + CHARSET) == Session(None, None, True)
    assert not session_of(FLAGS2 + bytes([200, 1, 2]) + _tz("UTC")).whole   # an unknown code
    assert not session_of(bytes([5, 40]) + b"short").whole                   # cut short
    assert not session_of(_tz("UTC") + bytes([128, 1])).whole
