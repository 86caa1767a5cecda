"""`capture --from FILE:POS` must name a transaction's start (pipeline/capture/startcheck.py), on both
servers' binlogs as SHOW BINLOG EVENTS lists them: MariaDB's GTID events, Oracle MySQL's GTID and
BEGIN events start one; a table map, rows or the commit are inside it, and
the refusal names the transaction's start and the next one's. (Through the CLI, followed to the end:
tests/integration/test_operator_store.py.)"""

from __future__ import annotations

import uuid

import pytest

from pipeline.capture import startcheck
from pipeline.capture.position import Position
from pipeline.capture.startcheck import check_start
from sluice_common.errors import UsageError
from tests.support import sysbench


@pytest.mark.parametrize("flavor", ["mariadb", "mysql"])
def test_only_a_transactions_start_is_a_start(flavor, request, monkeypatch):
    info = request.getfixturevalue(flavor)
    db = f"start_{uuid.uuid4().hex[:8]}"
    sysbench.create_database(info, db)
    try:
        with sysbench.connect(info, db) as c, c.cursor() as cur:
            cur.execute("CREATE TABLE t (id INT PRIMARY KEY)")
            cur.execute("FLUSH BINARY LOGS")  # a new file: its start is found within the pages read
            cur.execute("SHOW BINARY LOG STATUS" if flavor == "mysql" else "SHOW MASTER STATUS")
            logfile, first = cur.fetchone()[:2]
            cur.execute("INSERT INTO t VALUES (1)")  # (no tagged GTID here: it would stay in the shared
            # server's gtid_executed, which python-mysql-replication, the tests' reference decoder, cannot
            # parse; the tagged event's name: tests/unit/test_capture_startcheck_events.py)
            cur.execute("BEGIN")
            cur.execute("INSERT INTO t VALUES (2)")
            cur.execute("INSERT INTO t VALUES (3)")
            cur.execute("COMMIT")
            cur.execute("SHOW BINLOG EVENTS IN %s FROM %s", (logfile, first))
            events = [(r[1], r[2], str(r[5])) for r in cur.fetchall()]
            starts = [p for p, kind, _ in events if kind.startswith("Gtid") or kind == "Anonymous_Gtid"]
            for pos, kind, _ in events:
                inside = kind in ("Table_map", "Annotate_rows", "Xid") or "rows" in kind.lower()
                if not inside:
                    check_start(c, Position(logfile=logfile, logpos=pos), "sluice.yml")
                    continue
                with pytest.raises(UsageError, match="is inside a transaction") as e:
                    check_start(c, Position(logfile=logfile, logpos=pos), "sluice.yml")
                own = max(p for p in starts if p < pos)
                assert f"--from {logfile}:{own} (the start of that transaction)" in e.value.hint, (kind, e.value.hint)
            # a file longer than the pages read (CI's binlogs: 48 MB): the start is not found, and not guessed
            # (the pages end inside the first transaction: its start is no start of the second's)
            monkeypatch.setattr(startcheck, "_PAGE", 4)
            monkeypatch.setattr(startcheck, "_PAGES", 1)
            last = max(p for p, kind, _ in events if kind == "Table_map")
            with pytest.raises(UsageError) as e:
                check_start(c, Position(logfile=logfile, logpos=last), "sluice.yml")
            assert "(the start of that transaction)" not in e.value.hint, e.value.hint
            assert f"its GTID event or BEGIN before {last} in SHOW BINLOG EVENTS IN '{logfile}'" in e.value.hint
    finally:
        sysbench.drop_database(info, db)
