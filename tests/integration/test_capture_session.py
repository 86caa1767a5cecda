"""A DDL record carries the session it ran in: its time zone and its start to the microsecond.

Both are in the query event's status variables (pipeline/capture/statusvars.py) and both change
what a mirror's replay of the statement does: a TIMESTAMP literal is an instant in the session's
zone (which need not be the server's), and ``ADD COLUMN ... DEFAULT CURRENT_TIMESTAMP(6)`` fills
the existing rows with the statement's start. Checked on MariaDB and Oracle MySQL, both decoders.
"""

from __future__ import annotations

import uuid

import pytest

from tests.support import sysbench
from tests.support.capture_check import capture_both, mark_start, write_config


@pytest.mark.parametrize("flavor", ["mariadb", "mysql"])
def test_ddl_records_carry_their_sessions_zone_and_clock(flavor, request, tmp_path, monkeypatch):
    info = request.getfixturevalue(flavor)
    db = f"sess_{uuid.uuid4().hex[:8]}"
    sysbench.create_database(info, db)
    try:
        (tmp_path / "mark").mkdir()
        start = mark_start(write_config(info, tmp_path / "mark", "none\\..*"))
        with sysbench.connect(info, db) as c, c.cursor() as cur:
            cur.execute("SET SESSION time_zone = 'Asia/Kolkata'")  # neither the server's zone nor UTC
            cur.execute("CREATE TABLE t (id INT PRIMARY KEY, a TIMESTAMP NOT NULL DEFAULT '2026-03-08 02:30:00')")
            cur.execute("INSERT INTO t (id) VALUES (1), (2)")
            c.commit()
            cur.execute("ALTER TABLE t ADD COLUMN b TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)")
            cur.execute("SET SESSION time_zone = '+00:00'")
            cur.execute("SELECT DISTINCT UNIX_TIMESTAMP(b) FROM t")
            filled = [str(r[0]) for r in cur.fetchall()]
        records = capture_both(info, tmp_path, db, start, monkeypatch)
        create, alter = [r for r in records if r["isDdl"]][-2:]
        assert create["type"] == "CREATE" and create["timeZone"] == "Asia/Kolkata", create
        # every status variable of both servers' events is read: a record without a zone used none
        assert create["sessionRead"] is True and alter["sessionRead"] is True, (create, alter)
        assert alter["type"] == "ALTER" and "usec" in alter, alter
        # the rows the ALTER filled hold its start time, which the record gives to the microsecond
        assert filled == [f"{alter['es'] // 1000}.{alter['usec']:06d}"], (filled, alter)
    finally:
        sysbench.drop_database(info, db)
