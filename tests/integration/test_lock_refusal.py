"""Two real ``sluice`` processes at once: the second capture of a source, and the second sync
of a group, are refused with exit code 3 and a message naming the holder (pid, host, command);
once the holder is gone the same command runs."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.support import sysbench
from tests.support.deploy import REPO, rdb_adapter, sluice, write_deployment


def _popen(*args: str, env: dict | None = None) -> subprocess.Popen:
    e = {**os.environ, "PYSPARK_PYTHON": sys.executable, **(env or {})}
    return subprocess.Popen([sys.executable, "-m", "pipeline.cli", *args], cwd=REPO, env=e, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def _wait_holder(lock: Path, proc: subprocess.Popen, timeout: float = 120) -> dict:
    """Wait until ``proc`` has written itself into ``lock``; return the holder info."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the first process ended early ({proc.returncode}):\n{proc.stderr.read()[-3000:]}")
        try:
            info = json.loads(lock.read_text())
            if info.get("pid") == proc.pid:
                return info
        except (OSError, ValueError):
            pass
        time.sleep(0.2)
    raise AssertionError(f"{lock} never named pid {proc.pid}")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    for stream in (proc.stdout, proc.stderr):
        if stream:
            stream.close()


def _assert_refused(proc: subprocess.CompletedProcess, holder: subprocess.Popen, lock: Path, what: str) -> None:
    out = proc.stdout + proc.stderr
    assert proc.returncode == 3, out[-3000:]
    assert "Traceback" not in out
    msg = [line for line in proc.stderr.splitlines() if line.startswith("sluice: error:")]
    assert len(msg) == 1, proc.stderr[-3000:]
    assert f"the {what} lock ({lock}) is held by pid {holder.pid} on host {socket.gethostname()}" in msg[0]
    assert "pipeline.cli" in msg[0]                      # the holder's command line
    assert f"kill {holder.pid}" in proc.stderr           # and what to do about it


@pytest.fixture()
def deployment(tmp_path, mariadb, mariadb_target):
    db = f"lck_{uuid.uuid4().hex[:6]}"
    tdb = f"{db}_m"
    sysbench.create_database(mariadb_target, tdb)
    mapping = {"dataSourceKey": "defaultDS", "groupId": "g1", "outerAdapterKey": "t",
               "dbMapping": {"mirrorDb": True, "database": db, "targetDb": tdb}}
    cfg = write_deployment(tmp_path, mariadb, name=db, include=rf"{db}\..*", master="local[1]", partitions=1,
                           groups=[{"groupId": "g1", "outerAdapters": [rdb_adapter(mariadb_target, "t", tdb)],
                                    "mappings": ["mappings/*.yml"]}], mappings={"m.yml": mapping})
    sluice("capture", "--config", str(cfg), "--once")
    with sysbench.connect(mariadb) as c, c.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{db}`")
        cur.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v VARCHAR(20))")
        cur.execute(f"INSERT INTO `{db}`.t VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    yield {"cfg": cfg, "db": db, "tdb": tdb, "store": tmp_path / "store" / db}
    sysbench.drop_database(mariadb, db)
    sysbench.drop_database(mariadb_target, tdb)


def test_second_capture_of_a_source_is_refused(deployment):
    d = deployment
    lock = d["store"] / "locks" / "capture.lock"
    first = _popen("capture", "--config", str(d["cfg"]), "--follow")
    try:
        info = _wait_holder(lock, first)
        assert info["host"] == socket.gethostname() and "capture" in info["command"]
        second = sluice("capture", "--config", str(d["cfg"]), "--once", check=False, timeout=120)
        assert first.poll() is None, "the holder must still be running"
        _assert_refused(second, first, lock, "capture")
    finally:
        _stop(first)
    sluice("capture", "--config", str(d["cfg"]), "--once")   # the kernel dropped the flock: runs again


def test_second_sync_of_a_group_is_refused(deployment, mariadb, mariadb_target, tmp_path):
    d = deployment
    sluice("capture", "--config", str(d["cfg"]), "--once")
    lock = d["store"] / "locks" / "apply.g1.lock"
    marker = tmp_path / "paused"
    first = _popen("sync", "--config", str(d["cfg"]), "--group", "g1",
                   env={"SLUICE_TEST_PAUSE_AFTER_ROWS": "1", "SLUICE_TEST_PAUSE_MARKER": str(marker)})
    try:
        _wait_holder(lock, first, timeout=300)
        deadline = time.time() + 300
        while not marker.exists():                       # the first run is inside its apply
            assert first.poll() is None and time.time() < deadline, "the first sync never reached the pause"
            time.sleep(0.5)
        second = sluice("sync", "--config", str(d["cfg"]), "--group", "g1", check=False, timeout=600)
        assert first.poll() is None, "the holder must still be running"
        _assert_refused(second, first, lock, "apply (g1)")
        assert "log4j" not in second.stderr, "refused before starting Spark, not after"
        status = json.loads(sluice("store", "status", "--config", str(d["cfg"]), "--json").stdout)
        assert status["groups"]["g1"]["cursor"] == 0     # the refused run acked nothing either
        assert status["locks"]["apply:g1"]["pid"] == first.pid
    finally:
        _stop(first)
    sluice("sync", "--config", str(d["cfg"]), "--group", "g1")
    with sysbench.connect(mariadb_target, d["tdb"]) as c, c.cursor() as cur:
        cur.execute("SELECT id, v FROM t ORDER BY id")
        assert cur.fetchall() == ((1, "a"), (2, "b"), (3, "c"))
