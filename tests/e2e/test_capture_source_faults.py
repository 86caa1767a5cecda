"""Capture resumes exactly across trouble on the source, under sysbench load (issue 23, item 1).

For ``--follow`` (one process that must ride out every fault) and for ``--once`` (runs
repeated while the fault happens; a run the fault breaks exits non-zero and the next resumes),
with each fault: the source MariaDB restarted, the binlog dump connection KILLed again and
again, the binlog rotated many times (4 KB ``max_binlog_size`` and ``FLUSH BINARY LOGS``).
Afterwards the store must hold exactly what one uninterrupted capture of the same range holds:
the same records (ids, positions, GTIDs, rows, old values) in the same order, so no row is
lost or doubled; and replaying it gives the source's tables. A purged start position is a
clear error, not a silent jump.
"""

from __future__ import annotations

import signal
import threading
import time
import uuid

import pytest

from pipeline.config import load_config
from tests.support import source_faults as sf
from tests.support import sysbench
from tests.support.capture_check import (
    all_records,
    check_order_and_gtids,
    mark_start,
    replay,
    source_rows,
    write_config,
)
from tests.support.matrix import FULL

TABLES, SIZE = 2, 300


def _inject(fault: str, db: dict, stop: threading.Event, seen: dict) -> None:
    """Cause ``fault`` until ``stop`` (KILLs) or once (restart); count what happened in ``seen``."""
    if fault == "restart":
        time.sleep(2.5)
        sf.restart_source()
        seen["restarts"] = 1
    elif fault == "kill":  # a dump connection that shows up is killed, at most one a second,
        time.sleep(0.5)     # during the load and after it until there were three kills at least
        deadline = time.monotonic() + 120
        while not (stop.is_set() and seen.get("kills", 0) >= 3) and time.monotonic() < deadline:
            if sf.kill_dump_threads(db):
                seen["kills"] = seen.get("kills", 0) + 1
                time.sleep(1.0)
            time.sleep(0.02)


def _once_loop(config: str, stop: threading.Event, runs: list) -> None:
    while not stop.is_set():
        t0 = time.monotonic()
        p = sf.sluice(config, "--once")
        runs.append((p.returncode, round(time.monotonic() - t0, 1), p.stderr[-300:] if p.returncode else ""))
        time.sleep(0.2)


#: every fault in both modes with SLUICE_E2E_FULL=1; by default each fault once, both modes (CI budget)
TROUBLE = [(f, m) for m in ("follow", "once") for f in ("restart", "kill", "rotate")] if FULL else \
    [("restart", "once"), ("kill", "follow"), ("rotate", "follow")]


@pytest.mark.parametrize("fault,mode", TROUBLE)
def test_capture_resumes_exactly_across_source_trouble(mariadb, tmp_path, fault, mode):
    database = f"cap_src_{fault}_{uuid.uuid4().hex[:6]}"
    config = sf.with_heartbeat(write_config(mariadb, tmp_path, f"{database}\\..*", max_rows=100, max_seconds=0.3))
    files_before = len(sf.binlog_files(mariadb))
    start = mark_start(config)
    sysbench.create_database(mariadb, database)
    stop, writes_done, seen, runs = threading.Event(), threading.Event(), {}, []
    proc = sf.follow(config, tmp_path / "follow.log") if mode == "follow" else None
    loop = None if proc else threading.Thread(target=_once_loop, args=(config, writes_done, runs), daemon=True)
    try:
        rotation = sf.fast_rotation(mariadb) if fault == "rotate" else None
        if rotation:
            rotation.__enter__()
        if loop:
            loop.start()
        try:
            sysbench.prepare(mariadb, database, tables=TABLES, table_size=SIZE, create=False)  # split transactions
            injector = threading.Thread(target=_inject, args=(fault, mariadb, stop, seen), daemon=True)
            injector.start()
            for _round in range(4):  # short --once runs are KILLed by chance: load until three were
                bench = sysbench.start(mariadb, database, seconds=8, threads=2, tables=TABLES, table_size=SIZE)
                bench.wait(timeout=180)
                if fault != "kill" or seen.get("kills", 0) >= 3:
                    break
            stop.set()
            injector.join(timeout=300)
            sf.wait_for_source(mariadb)
            # writes after the fault too (sysbench may have died with a restarted server)
            sysbench.run(mariadb, database, seconds=3, threads=2, tables=TABLES, table_size=SIZE)
        finally:
            stop.set()
            writes_done.set()
            if rotation:
                rotation.__exit__(None, None, None)
            if loop:
                loop.join(timeout=600)
        want, end = sf.reference(config, tmp_path, start, database)
        if proc:
            deadline = time.monotonic() + 180
            while not sf.reached(config, end) and time.monotonic() < deadline:
                assert proc.poll() is None, (tmp_path / "follow.log").read_text()[-3000:]
                time.sleep(0.5)
            assert sf.reached(config, end), (tmp_path / "follow.log").read_text()[-3000:]
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=60) == 130
            log = (tmp_path / "follow.log").read_text()
        else:
            last = sf.sluice(config, "--once")
            assert last.returncode == 0, last.stderr[-3000:]
            log = last.stderr
        got = all_records(str(load_config(config).store_dir()), database)
        # the fault really happened, and capture noticed where it should
        if fault == "restart":
            assert seen.get("restarts") == 1
        elif fault == "kill":
            assert seen.get("kills", 0) >= 3
        else:
            assert len(sf.binlog_files(mariadb)) - files_before >= 10
        if mode == "follow" and fault != "rotate":
            assert "binlog connection lost" in log, log[-3000:]
        if mode == "once" and fault != "rotate":  # the fault fell between or into runs (two at least,
            assert len(runs) >= 2, runs            # more on a quiet machine), and the next run resumed
        # the store equals one uninterrupted capture, which itself replays to the source's tables
        assert len(got) == len(want) and len(want) > 500
        assert sf.comparable(got) == sf.comparable(want)
        check_order_and_gtids(got)
        tables = replay(want)
        with sysbench.connect(mariadb) as conn:
            for i in range(1, TABLES + 1):
                assert tables[f"{database}.sbtest{i}"] == source_rows(conn, database, f"sbtest{i}", ["id"])
    finally:
        stop.set()
        if proc and proc.poll() is None:
            proc.kill()
            proc.wait()
        sysbench.drop_database(mariadb, database)


@pytest.mark.parametrize("mode", ["--once", "--follow"] if FULL else ["--follow"])  # CI budget
def test_purged_position_is_a_clear_error(mariadb, tmp_path, mode):
    """Capture some, then the binlog holding the stored position is purged: the next capture
    refuses with the purged file named and the fix, and stores nothing."""
    database = f"cap_purge_{uuid.uuid4().hex[:6]}"
    config = write_config(mariadb, tmp_path, f"{database}\\..*", max_rows=100)
    mark_start(config)
    sysbench.create_database(mariadb, database)
    try:
        sysbench.prepare(mariadb, database, tables=1, table_size=200, create=False)
        assert sf.sluice(config, "--once").returncode == 0
        store_dir = str(load_config(config).store_dir())
        stored = all_records(store_dir)
        position = all_records(store_dir)[-1]["logfile"]
        with sysbench.connect(mariadb) as c, c.cursor() as cur:
            cur.execute(f"INSERT INTO `{database}`.sbtest1 (k, c, pad) VALUES (1, 'after', 'purge')")
        sf.purge_through(mariadb, position)
        p = sf.sluice(config, mode, timeout=120)
        assert p.returncode != 0
        err = p.stderr
        assert "is not on the source" in err and position in err and "purged" in err, err[-2000:]
        assert "new snapshot" in err
        assert all_records(store_dir) == stored
    finally:
        sysbench.drop_database(mariadb, database)
