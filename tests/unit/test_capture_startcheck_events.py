"""`--from` checks on event lists as SHOW BINLOG EVENTS gives them (pipeline/capture/startcheck.py):
Oracle MySQL 8.3+ lists a tagged GTID's event as ``Gtid_tagged_log_event`` (seen on MySQL 9.7.4;
not run against the shared test server, whose executed GTID set would keep the tag), which starts a
transaction like ``Gtid``; the GTID set at a MySQL coordinate, read from the file's events. (Both
servers' untagged events: tests/integration/test_capture_startcheck.py and
tests/integration/test_capture_gtid_partial.py.)"""

from __future__ import annotations

import re

import pymysql
import pytest

from pipeline.capture import startcheck
from pipeline.capture.gtidtext import canonical, intervals
from pipeline.capture.position import Position
from pipeline.capture.startcheck import check_start, mysql_gtid_at
from sluice_common.errors import UsageError

F = "binlog.000013"
EVENTS = [(F, 4, "Format_desc", 1, 126, "Server ver: 9.7.4"), (F, 126, "Previous_gtids", 1, 157, ""),
          (F, 157, "Gtid_tagged_log_event", 1, 239, "SET @@SESSION.GTID_NEXT= 'u:mytag:1'"),
          (F, 239, "Query", 1, 310, "BEGIN"), (F, 310, "Table_map", 1, 371, "table_id: 85 (d.t)"),
          (F, 371, "Write_rows", 1, 411, "table_id: 85 flags: STMT_END_F"), (F, 411, "Xid", 1, 442, "COMMIT"),
          (F, 442, "Gtid", 1, 519, "SET @@SESSION.GTID_NEXT= 'u:9'")]


class _Cursor:
    def __init__(self, events):
        self.events = events

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def execute(self, sql, args):
        if self.events is None:
            raise pymysql.err.OperationalError(1227, "Access denied; you need the REPLICATION SLAVE privilege")
        skip, limit = (int(x) for x in re.search(r"LIMIT (\d+), (\d+)", sql).groups())
        self.rows = [e for e in self.events if e[1] >= args[1]][skip:skip + limit]

    def fetchall(self):
        return self.rows


class _Conn:
    """A connection whose SHOW BINLOG EVENTS lists ``events`` (None: the user may not list them)."""

    def __init__(self, events=EVENTS):
        self.events = events

    def cursor(self):
        return _Cursor(self.events)


def test_a_tagged_gtid_starts_a_transaction():
    for pos in (4, 157, 239, 442):
        check_start(_Conn(), Position(logfile=F, logpos=pos), "sluice.yml")
    for pos in (310, 371, 411):
        with pytest.raises(UsageError) as e:
            check_start(_Conn(), Position(logfile=F, logpos=pos), "sluice.yml")
        assert f"--from {F}:157 (the start of that transaction)" in e.value.hint
        assert f"--from {F}:442 (the transaction after it" in e.value.hint


UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
OTHER = "b" * 8 + UUID[8:]


def test_gtid_set_text_is_read_and_made_canonical():
    assert intervals(f"{UUID}:1-5:7,\n{UUID.upper()}:t1:1-3:9:T2:4") == [
        (UUID, None, 1, 5), (UUID, None, 7, 7), (UUID, "t1", 1, 3), (UUID, "t1", 9, 9), (UUID, "t2", 4, 4)]
    assert canonical(intervals(f"{UUID}:7,{OTHER}:1,{UUID}:1-5:6,{UUID}:t:1")) == f"{UUID}:1-7,{OTHER}:1"
    assert canonical([]) is None


def test_the_gtid_set_at_a_mysql_coordinate_is_read_from_the_files_events(monkeypatch):
    """Previous_gtids and each transaction's GTID before the position, merged; not known (None) past
    the events read, after a tagged GTID, for a GTID event it cannot read, or when events cannot be
    listed."""
    def gtid(n):
        return f"SET @@SESSION.GTID_NEXT= '{UUID}:{n}'"
    events = [("b.1", 4, "Format_desc", 1, 126, "Server ver: 9.7.4"),
              ("b.1", 126, "Previous_gtids", 1, 197, f"{UUID}:1-138,\n{OTHER}:1-2"),
              ("b.1", 197, "Gtid", 1, 276, gtid(139)), ("b.1", 276, "Query", 1, 351, "BEGIN"),
              ("b.1", 351, "Xid", 1, 382, "COMMIT /* xid=9 */"),
              ("b.1", 382, "Anonymous_Gtid", 1, 461, "SET @@SESSION.GTID_NEXT= 'ANONYMOUS'"),
              ("b.1", 461, "Gtid", 1, 540, gtid(140)), ("b.1", 540, "Xid", 1, 571, "COMMIT")]
    at = Position("b.1", 461)
    assert mysql_gtid_at(_Conn(events), at) == f"{UUID}:1-139,{OTHER}:1-2"
    assert mysql_gtid_at(_Conn(events), Position("b.1", 571)) == f"{UUID}:1-140,{OTHER}:1-2"  # the file's end
    assert mysql_gtid_at(_Conn(events[:1]), Position("b.1", 126)) == ""  # nothing before: an empty set
    for header in (4, 126, 197):  # the file's start, its Previous_gtids, its first transaction
        assert mysql_gtid_at(_Conn(events), Position("b.1", header)) == f"{UUID}:1-138,{OTHER}:1-2"
    odd = [*events[:2], ("b.1", 197, "Gtid", 1, 276, "last_committed=1 sequence_number=2")]
    assert mysql_gtid_at(_Conn(odd), at) is None  # a GTID event it cannot read: not known
    tagged = [*events[:2], ("b.1", 197, "Gtid_tagged_log_event", 1, 276, f"SET @@SESSION.GTID_NEXT= '{UUID}:t:1'")]
    assert mysql_gtid_at(_Conn(tagged), at) is None
    assert mysql_gtid_at(_Conn(None), at) is None
    monkeypatch.setattr(startcheck, "_PAGE", 2)
    monkeypatch.setattr(startcheck, "_PAGES", 2)
    assert mysql_gtid_at(_Conn(events), at) is None  # 4 events read, the position not reached
