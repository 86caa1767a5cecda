"""`--from` checks on an event list as SHOW BINLOG EVENTS gives it (pipeline/capture/startcheck.py):
Oracle MySQL 8.4+ lists a tagged GTID's event as ``Gtid_tagged_log_event`` (seen on MySQL 9.7.4;
not run against the shared test server, whose executed GTID set would keep the tag), which starts a
transaction like ``Gtid``. (Both servers' untagged events: tests/integration/test_capture_startcheck.py.)"""

from __future__ import annotations

import re

import pytest

from pipeline.capture.position import Position
from pipeline.capture.startcheck import check_start
from sluice_common.errors import UsageError

F = "binlog.000013"
EVENTS = [(F, 4, "Format_desc", 1, 126, "Server ver: 9.7.4"), (F, 126, "Previous_gtids", 1, 157, ""),
          (F, 157, "Gtid_tagged_log_event", 1, 239, "SET @@SESSION.GTID_NEXT= 'u:mytag:1'"),
          (F, 239, "Query", 1, 310, "BEGIN"), (F, 310, "Table_map", 1, 371, "table_id: 85 (d.t)"),
          (F, 371, "Write_rows", 1, 411, "table_id: 85 flags: STMT_END_F"), (F, 411, "Xid", 1, 442, "COMMIT"),
          (F, 442, "Gtid", 1, 519, "SET @@SESSION.GTID_NEXT= 'u:9'")]


class _Cursor:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def execute(self, sql, args):
        skip, limit = (int(x) for x in re.search(r"LIMIT (\d+), (\d+)", sql).groups())
        self.rows = [e for e in EVENTS if e[1] >= args[1]][skip:skip + limit]

    def fetchall(self):
        return self.rows


class _Conn:
    def cursor(self):
        return _Cursor()


def test_a_tagged_gtid_starts_a_transaction():
    for pos in (4, 157, 239, 442):
        check_start(_Conn(), Position(logfile=F, logpos=pos), "sluice.yml")
    for pos in (310, 371, 411):
        with pytest.raises(UsageError) as e:
            check_start(_Conn(), Position(logfile=F, logpos=pos), "sluice.yml")
        assert f"--from {F}:157 (the start of that transaction)" in e.value.hint
        assert f"--from {F}:442 (the transaction after it" in e.value.hint
