"""Trouble on the capture *source* for tests/e2e/test_capture_source_faults.py: restart the
source MariaDB, KILL the binlog dump connections, rotate the binlog fast, purge binlogs; and
the comparison of a store with one uninterrupted capture of the same range.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipeline.capture import run_capture
from pipeline.config import load_config
from pipeline.store.files import BatchStore
from tests.support import sysbench
from tests.support.capture_check import all_records

REPO = Path(__file__).resolve().parents[2]
VOLATILE = ("ts", "batchId", "seq")  # capture time and batch boundaries differ between runs


def restart_source() -> None:
    """``scripts/services restart mariadb`` (a clean shutdown and start, same port and data)."""
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "services"), "restart", "mariadb"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"restart of the source failed:\n{p.stderr[-3000:]}"


def wait_for_source(db: dict[str, Any], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with sysbench.connect(db, connect_timeout=2) as c, c.cursor() as cur:
                cur.execute("SELECT 1")
                return
        except Exception:  # noqa: BLE001 - any failure means not up yet
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def kill_dump_threads(db: dict[str, Any]) -> int:
    """KILL every binlog dump connection on the source; how many there were."""
    with sysbench.connect(db) as c, c.cursor() as cur:
        cur.execute("SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'")
        ids = [r[0] for r in cur.fetchall()]
        for i in ids:
            with contextlib.suppress(Exception):
                cur.execute(f"KILL {int(i)}")
    return len(ids)


def binlog_files(db: dict[str, Any]) -> list[str]:
    with sysbench.connect(db) as c, c.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        return [r[0] for r in cur.fetchall()]


def purge_through(db: dict[str, Any], logfile: str, timeout: float = 60) -> None:
    """Rotate and purge until ``logfile`` is gone from the source. MariaDB keeps a binlog its
    engines may still need for crash recovery (the binlog checkpoint moves on about a second
    after InnoDB flushes its log), and PURGE then skips it silently: so retry."""
    deadline = time.monotonic() + timeout
    with sysbench.connect(db) as c, c.cursor() as cur:
        cur.execute("FLUSH BINARY LOGS")
        while logfile in binlog_files(db):
            assert time.monotonic() < deadline, f"{logfile} could not be purged"
            time.sleep(1.0)
            cur.execute(f"PURGE BINARY LOGS TO '{binlog_files(db)[-1]}'")


@contextlib.contextmanager
def fast_rotation(db: dict[str, Any], every: float = 0.3) -> Iterator[None]:
    """A 4 KB ``max_binlog_size`` and ``FLUSH BINARY LOGS`` every ``every`` seconds, restored after."""
    stop = threading.Event()
    with sysbench.connect(db) as c, c.cursor() as cur:
        cur.execute("SELECT @@GLOBAL.max_binlog_size")
        (old,) = cur.fetchone()
        cur.execute("SET GLOBAL max_binlog_size = 4096")

    def flush() -> None:
        with sysbench.connect(db) as c2, c2.cursor() as cur2:
            while not stop.wait(every):
                cur2.execute("FLUSH BINARY LOGS")

    t = threading.Thread(target=flush, daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join(timeout=30)
        with sysbench.connect(db) as c, c.cursor() as cur:
            cur.execute(f"SET GLOBAL max_binlog_size = {int(old)}")


def with_heartbeat(config: str, seconds: float = 1.0) -> str:
    """The test config with a short heartbeat (an idle --follow stores its last batch sooner)."""
    cfg = json.loads(Path(config).read_text())
    cfg["source"]["heartbeatSeconds"] = seconds
    Path(config).write_text(json.dumps(cfg))
    return config


def reference(config: str, tmp: Path, start: dict[str, Any], database: str) -> tuple[list[dict], dict]:
    """One uninterrupted ``--once`` capture of the same range from ``start`` into a new store:
    its records of ``database`` and its end position."""
    cfg = json.loads(Path(config).read_text())
    cfg["store"]["path"] = str(tmp / "reference-store")
    cfg["source"]["serverId"] = cfg["source"]["serverId"] + 1
    path = tmp / "reference.yml"
    path.write_text(json.dumps(cfg))
    loaded = load_config(path)
    store = BatchStore(loaded.store_dir())
    with store.capture_lock():
        store.set_start_position(start)
    summary = run_capture(loaded)
    return all_records(str(loaded.store_dir()), database), summary.end


def comparable(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k not in VOLATILE} for r in records]


def sluice(config: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    cmd = [str(Path(sys.executable).parent / "sluice"), "capture", "--config", config, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "SLUICE_LOG_LEVEL": "INFO"})


def follow(config: str, log: Path) -> subprocess.Popen:
    cmd = [str(Path(sys.executable).parent / "sluice"), "capture", "--config", config, "--follow"]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log.open("wb"),
                            env={**os.environ, "SLUICE_LOG_LEVEL": "INFO"})


def reached(config: str, end: dict[str, Any]) -> bool:
    """Whether the store's position is at or past ``end`` (same binlog coordinates)."""
    pos = BatchStore(str(load_config(config).store_dir()), create=False).last_position() or {}
    key = lambda p: (p.get("logfile", ""), int(p.get("logpos", 0)))  # noqa: E731 - same-width names
    return not pos.get("skipEvents") and key(pos) >= key(end)
