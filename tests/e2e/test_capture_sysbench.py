"""Capture under a sysbench workload: every committed row change exactly once, in commit order,
also when the capture process is SIGKILLed at random moments and restarted."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from pipeline.capture import run_capture
from pipeline.config import load_config
from pipeline.store.files import BatchStore
from tests.support import sysbench
from tests.support.capture_check import (
    all_records,
    check_order_and_gtids,
    mark_start,
    raw_counts,
    replay,
    source_rows,
    write_config,
)

TABLES = 2


def _verify(mariadb: dict, config: str, database: str, start: dict) -> list[dict]:
    cfg = load_config(config)
    store_dir = str(cfg.store_dir())
    records = all_records(store_dir, database)
    check_order_and_gtids(records)
    tables = replay(records)
    with sysbench.connect(mariadb) as conn:
        for i in range(1, TABLES + 1):
            want = source_rows(conn, database, f"sbtest{i}", ["id"])
            got = tables.get(f"{database}.sbtest{i}", {})
            assert got.keys() == want.keys()
            assert got == want
    end = BatchStore(store_dir, create=False).last_position()
    assert not end.get("skipEvents")
    events, rows = raw_counts(mariadb, start, end, database)
    dml = [r for r in records if not r["isDdl"]]
    assert len(dml) == events
    assert sum(len(r["data"]) for r in dml) == rows
    return records


def test_sysbench_exactly_once_in_commit_order(mariadb, tmp_path):
    database = f"cap_sb_{uuid.uuid4().hex[:8]}"
    config = write_config(mariadb, tmp_path, f"{database}\\..*", max_rows=300)
    start = mark_start(config)
    try:
        sysbench.prepare(mariadb, database, tables=TABLES, table_size=1000)
        sysbench.run(mariadb, database, seconds=4, threads=3, tables=TABLES, table_size=1000)
        summary = run_capture(load_config(config))
        assert summary.rows > 2000
        records = _verify(mariadb, config, database, start)
        metas = BatchStore(str(load_config(config).store_dir()), create=False).batches()
        assert any(m.split for m in metas), "the 1000-row prepare transactions should have been split"
        assert {r["type"] for r in records} >= {"INSERT", "UPDATE", "DELETE", "CREATE"}
    finally:
        sysbench.drop_database(mariadb, database)


def test_sigkill_during_follow_loses_and_duplicates_nothing(mariadb, tmp_path):
    database = f"cap_kill_{uuid.uuid4().hex[:8]}"
    config = write_config(mariadb, tmp_path, f"{database}\\..*", max_rows=150, max_seconds=0.3)
    start = mark_start(config)
    rng = random.Random(os.environ.get("SLUICE_TEST_SEED", "7"))
    env = {**os.environ, "SLUICE_LOG_LEVEL": "WARNING"}
    cmd = [str(Path(sys.executable).parent / "sluice"), "capture", "--config", config]
    try:
        sysbench.prepare(mariadb, database, tables=TABLES, table_size=600)
        bench = sysbench.start(mariadb, database, seconds=14, threads=3, tables=TABLES, table_size=600)
        kills = 0
        try:
            while kills < 8:
                proc = subprocess.Popen([*cmd, "--follow"], env=env, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE)
                time.sleep(rng.uniform(0.4, 2.0))
                assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                kills += 1
        finally:
            bench.wait(timeout=120)
        done = subprocess.run([*cmd, "--once"], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        st = BatchStore(str(load_config(config).store_dir()), create=False)
        assert len(st.batches()) > kills
        for meta in st.batches():
            st.verify(meta)
        _verify(mariadb, config, database, start)
    finally:
        sysbench.drop_database(mariadb, database)
