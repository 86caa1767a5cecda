"""Positions name their server and their file's creation time (pipeline/capture/identity.py): the
keys round-trip, positions stored before them still read, and the decisions that need no server."""

from __future__ import annotations

import pytest

from pipeline.capture.events import FormatEv
from pipeline.capture.identity import Resume, _agrees, _failover, check_file, same_server
from pipeline.capture.position import Position
from pipeline.capture.reader import BinlogReader, ReaderOptions
from pipeline.capture.server_check import ServerId
from sluice_common.errors import PositionError

OLD = {"logfile": "mysql-bin.000002", "logpos": 126914, "gtid": "0-101-144", "nextId": 77}


def test_position_keys_round_trip_and_old_positions_still_read():
    p = Position.from_dict(OLD)
    assert (p.server_id, p.server_uuid, p.file_ts) == (None, None, None)
    assert p.to_dict() == OLD  # an old position is written back as it was
    q = p.with_(server_id=101, server_uuid="3e11fa47-71ca-11e1-9e33-c80aa9429562", file_ts=1700000000)
    d = q.to_dict()
    assert (d["serverId"], d["serverUuid"], d["fileTs"]) == (101, q.server_uuid, 1700000000)
    assert Position.from_dict(d) == q


def test_same_server_by_uuid_then_by_server_id():
    mysql = ServerId(1, "aaaa")
    assert same_server(Position("b.1", 4, server_id=1, server_uuid="aaaa"), mysql) is True
    assert same_server(Position("b.1", 4, server_id=1, server_uuid="bbbb"), mysql) is False  # a clone's server_id
    assert same_server(Position("b.1", 4, server_id=2), ServerId(2)) is True
    assert same_server(Position("b.1", 4, server_id=2), ServerId(3)) is False
    assert same_server(Position("b.1", 4), ServerId(3)) is None  # stored before positions named their server


def test_the_start_files_format_description_must_be_the_stored_files():
    start = Position("binlog.000001", 66289, "0-311-179", file_ts=1_795_000_000)
    check_file(start, "binlog.000001", 1_795_000_000, "/etc/sluice/shop.yml")   # the same file
    check_file(start, "binlog.000002", 1_795_000_999, "/etc/sluice/shop.yml")   # a later file
    check_file(start.with_(file_ts=None), "binlog.000001", 1, "/etc/sluice/shop.yml")  # nothing to compare
    with pytest.raises(PositionError) as e:
        check_file(start, "binlog.000001", 1_795_000_600, "/etc/sluice/shop.yml")
    msg = str(e.value)
    assert "binlog binlog.000001 on the source is not the file the stored position binlog.000001:66289" in msg
    assert "dated 2026-11-18 11:16:40 UTC, the stored file's 2026-11-18 11:06:40 UTC" in msg and "RESET" in msg
    assert "fix: take a new snapshot: sluice bootstrap --config /etc/sluice/shop.yml --force" in msg


def test_mariadb_gtid_state_at_the_coordinates_agrees_in_every_stored_domain():
    assert _agrees("0-1-5", "0-1-5")
    assert _agrees("0-1-5", "0-1-5,1-2-9")  # a domain the position does not track
    assert not _agrees("0-1-5", "0-1-4")
    assert not _agrees("0-1-5,1-2-9", "0-1-5")
    assert not _agrees("0-1-5", None)  # not an event boundary


def test_the_reader_checks_the_start_files_format_description_when_it_resumes_by_file():
    """The format description event of the start file is compared before anything of that file is
    handed on; resuming by GTID (a failover) there is no stored file to compare with."""
    start = Position("binlog.000001", 66289, "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-179", file_ts=1_795_000_000)
    fde = FormatEv(ts=1_795_000_600, start=-1, next=0, server_version="9.7.4")
    reader = BinlogReader(None, "mysql", start, ReaderOptions(resume_by="file", config_file="s.yml"))
    with pytest.raises(PositionError, match="binlog binlog.000001 on the source is not the file"):
        reader.on_format(fde, "binlog.000001")
    by_gtid = BinlogReader(None, "mysql", start, ReaderOptions(resume_by="gtid"))
    by_gtid.on_format(fde, "binlog.000001")
    assert by_gtid.formats == {"binlog.000001": 1_795_000_600}


def test_a_failover_reads_by_gtid_from_no_coordinate_of_the_old_server():
    stored = Position("mysql-bin.000002", 126914, "0-101-144", server_id=101, file_ts=1_795_000_000)
    resume = Resume(stored, "gtid", ServerId(102), failover=True)
    assert (resume.read_from().logfile, resume.read_from().logpos, resume.read_from().gtid) == ("", 4, "0-101-144")
    assert Resume(stored, "file", ServerId(101)).read_from() == stored


def test_a_failover_refuses_positions_it_cannot_resume_by_gtid_naming_why():
    server = ServerId(102)
    base = Position("mysql-bin.000002", 126914, "0-101-144", server_id=101)
    cases = [
        (base.with_(gtid=None), "the position has no GTID to resume by"),
        (base.with_(skip_events=3, split_gtid="0-101-145"), "inside transaction 0-101-145 (3 of its rows events"),
        (base.with_(xa=({"xid": "00", "logfile": "mysql-bin.000002", "logpos": 4},)),
         "holds 1 prepared XA transaction(s) whose XA PREPARE groups are in the old server's binlog files"),
    ]
    for pos, why in cases:
        with pytest.raises(PositionError) as e:
            _failover(None, "mariadb", pos, server, "s.yml")  # refused before the server is asked
        assert "the source is another server (server_id 102) than the one the stored position" in str(e.value)
        assert why in str(e.value)


UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"


def test_a_tagged_gtid_marks_every_later_position_as_one_that_cannot_resume_by_gtid():
    """MySQL 8.4+ tagged GTIDs (``uuid:tag:n``, event 42) are framed by their BEGIN/XID but not added to
    the stored set: the positions say so, round-trip it, and pass it on to the next capture's."""
    from types import SimpleNamespace as NS

    from pipeline.capture.events import OtherEv, QueryEv, XidEv
    from pipeline.capture.framer import Framer
    from pipeline.capture.items import Commit
    from pipeline.capture.position import GtidState
    from pipeline.capture.runner import _stamper
    from pipeline.capture.xa import XaBook

    start = Position("binlog.000003", 4, f"{UUID}:1-7", server_id=1, server_uuid=UUID)
    reader = NS(gtids=GtidState("mysql", start.gtid), start=start, opts=NS(stop_at=None), codecs_by_id={},
                events=0, last_ts=None, logfile=start.logfile, logpos=4, formats={})
    plain = list(Framer(reader, XaBook()).run([[QueryEv(1, 4, 90, b"", b"BEGIN"), XidEv(1, 90, 121)]]))
    stamped = _stamper(Resume(start, "file", ServerId(1, UUID)), reader)
    assert not stamped(Position("binlog.000003", 121, start.gtid)).gtid_partial
    tagged = [OtherEv(42, 1, 121, 200), QueryEv(1, 200, 280, b"", b"BEGIN"), XidEv(1, 280, 311)]
    items = list(Framer(reader, XaBook()).run([tagged]))
    assert [type(i) for i in plain] == [type(i) for i in items[-2:]] and isinstance(items[-1], Commit)
    assert items[-1].gtid == f"{UUID}:1-7"  # the set does not hold the tagged GTID ...
    end = stamped(Position("binlog.000003", 311, items[-1].gtid))
    assert end.gtid_partial and end.to_dict()["gtidPartial"] is True  # ... and the position says so
    assert Position.from_dict(end.to_dict()) == end
    assert "gtidPartial" not in start.to_dict()
    again = BinlogReader(None, "mysql", end, ReaderOptions())
    assert again.gtids.gtid_partial  # a resumed capture keeps marking its positions
    # a start marked so (capture --from FILE:POS on MySQL: the set holds only what is read) marks its
    # positions; a start without a GTID set is no partial one (an empty set: a server that ran nothing)
    marked = Position("binlog.000003", 4, gtid_partial=True)
    assert BinlogReader(None, "mysql", marked, ReaderOptions()).gtids.gtid_partial
    assert not BinlogReader(None, "mysql", Position("binlog.000003", 4), ReaderOptions()).gtids.gtid_partial
    assert not BinlogReader(None, "mysql", start, ReaderOptions()).gtids.gtid_partial


def test_a_position_with_a_partial_gtid_set_is_not_resumed_by_gtid():
    """Resumed by GTID the server would send the tagged transactions again: refused by name, on a
    failover and with ``source.resumeBy: gtid``; by file on its own server it resumes."""
    from pipeline.capture.identity import resolve_start

    pos = Position("binlog.000003", 311, f"{UUID}:1-7", server_id=1, server_uuid=UUID, gtid_partial=True)
    with pytest.raises(PositionError) as e:
        _failover(None, "mysql", pos, ServerId(2, "b" * 36), "s.yml")
    assert "has a partial GTID set: it lacks transactions before the position (tagged GTIDs" in str(e.value)
    assert "point source.host/port at the server the position was read from" in str(e.value)

    class Cur:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def execute(self, sql, args=None):
            assert "server_id" in sql or "GTID_SUBTRACT(@@GLOBAL.gtid_executed" in sql, sql
            self.last = sql

        def fetchone(self):
            return (1, UUID) if "server_id" in self.last else ("",)

    conn = _Conn(Cur)
    with pytest.raises(PositionError) as e:
        resolve_start(conn, "mysql", pos, "gtid", "s.yml")
    assert "source.resumeBy: gtid, but the stored position binlog.000003:311" in str(e.value)
    assert "set source.resumeBy: file (or auto) in s.yml" in str(e.value)


class _Conn:  # a stand-in for a pymysql connection's cursor() only
    def __init__(self, cur):
        self._cur = cur

    def cursor(self):
        return self._cur()


def test_from_takes_a_coordinate_with_or_without_its_gtid_set_or_now():
    from pipeline.capture.fresh import parse_from
    from sluice_common.errors import UsageError

    assert parse_from(" now ") is None
    assert parse_from("binlog.000003:4") == Position("binlog.000003", 4)
    assert parse_from(f"binlog.000003:4 gtid={UUID}:1-7,{UUID[:-1]}a:1") == \
        Position("binlog.000003", 4, f"{UUID}:1-7,{UUID[:-1]}a:1")
    with pytest.raises(UsageError, match="neither FILE:POS"):
        parse_from("binlog.000003:4 gtid=")
