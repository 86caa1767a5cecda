"""A DDL line's session fields reach the DdlChange a mirror replays (pipeline/job/barriers.py):
its zone, its start microseconds and whether its status variables were read whole."""

from __future__ import annotations

from types import SimpleNamespace as NS

from pipeline.job.barriers import find_barriers

PLAN = NS(mappings_for=lambda database, table: [object()])


def _line(seq: int, **extra) -> dict:
    return {"batchId": 3, "seq": seq, "isDdl": True, "type": "CREATE", "database": "db", "table": f"t{seq}",
            "sql": "CREATE TABLE t (i INT)", "es": 1_700_000_000_000, **extra}


def test_the_session_of_a_ddl_line_is_carried():
    out, positions, _ = find_barriers(None, PLAN, [
        _line(1, timeZone="Asia/Kolkata", usec=7, sessionRead=True),
        _line(2, sessionRead=True),
        _line(3)])  # a store written before sessionRead was recorded
    assert [(d.time_zone, d.usec, d.zone_read) for d in out] == [
        ("Asia/Kolkata", 7, True), ("", None, True), ("", None, False)]
    assert positions == [(3, 1), (3, 2), (3, 3)]
