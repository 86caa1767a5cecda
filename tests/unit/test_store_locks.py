"""BatchStore locks: held locks name their holder, stale locks are taken over."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.store.files import BatchStore
from sluice_common.errors import LockHeldError, StoreError

REPO = Path(__file__).resolve().parents[2]

HOLDER = textwrap.dedent("""
    import os, sys, time
    from pipeline.store.files import BatchStore
    root, kind, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    store = BatchStore(root)
    lock = store.capture_lock() if kind == "capture" else store.apply_lock(kind)
    with lock:
        if mode == "fork":  # leave the lock to a child that inherited the file, then die
            pid = os.fork()
            if pid == 0:
                time.sleep(60)
                os._exit(0)
            print(pid, flush=True)
            os._exit(0)
        print("ready", flush=True)
        time.sleep(60)
""")


def spawn_holder(root: Path, kind: str = "capture", mode: str = "hold") -> tuple[subprocess.Popen, str]:
    """Start a process that takes the lock; return it and its first output line."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(root), kind, mode], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip() if proc.stdout else ""
    assert line, "the lock holder did not start"
    return proc, line


@pytest.fixture
def procs() -> Iterator[list[int]]:
    """Pids to SIGKILL at the end of the test."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_held_capture_lock_names_the_holder(tmp_path: Path, procs: list[int]) -> None:
    store = BatchStore(tmp_path)
    proc, _ = spawn_holder(tmp_path)
    procs.append(proc.pid)
    with pytest.raises(LockHeldError) as e, store.capture_lock():
        pass
    msg = str(e.value)
    assert f"the capture lock ({tmp_path / 'locks' / 'capture.lock'}) is held by pid {proc.pid}" in msg
    assert f"on host {socket.gethostname()} since 20" in msg and "-c" in msg
    assert "only one capture may run per source" in msg and f"kill {proc.pid}" in msg
    assert e.value.exit_code == 3
    with pytest.raises(StoreError, match="needs the capture lock"):
        store.append([], start={}, end={})
    proc.kill()
    proc.wait()


def test_stale_lock_of_a_killed_holder_is_taken_over(tmp_path: Path, procs: list[int],
                                                     caplog: pytest.LogCaptureFixture) -> None:
    proc, _ = spawn_holder(tmp_path)
    procs.append(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    store = BatchStore(tmp_path)
    with caplog.at_level(logging.WARNING, logger="sluice.store"), store.capture_lock() as held:
        assert held.stale is not None and held.stale.pid == proc.pid
        assert held.info.pid == os.getpid()
        store.append([], start={"p": 0}, end={"p": 1})
    assert "took over stale capture lock" in caplog.text and f"pid {proc.pid}" in caplog.text
    assert "that process no longer exists" in caplog.text
    with store.capture_lock() as again:  # released cleanly: not stale any more
        assert again.stale is None


def test_recorded_holder_with_a_dead_pid_is_stale(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    pid = int(dead.stdout)
    store = BatchStore(tmp_path)
    info = {"pid": pid, "host": socket.gethostname(), "command": "sluice capture", "since": "2020-01-01"}
    (tmp_path / "locks" / "capture.lock").write_text(json.dumps(info))
    with caplog.at_level(logging.WARNING, logger="sluice.store"), store.capture_lock() as held:
        assert held.stale is not None and (held.stale.pid, held.stale.command) == (pid, "sluice capture")
    assert "no longer exists" in caplog.text


def test_lock_kept_by_a_child_of_a_dead_holder(tmp_path: Path, procs: list[int]) -> None:
    proc, child = spawn_holder(tmp_path, mode="fork")
    procs.append(int(child))
    proc.wait()
    with pytest.raises(LockHeldError) as e, BatchStore(tmp_path).capture_lock():
        pass
    msg = str(e.value)
    assert f"recorded holder pid {proc.pid}" in msg and "no longer exists" in msg and "fuser" in msg
    os.kill(int(child), signal.SIGKILL)
    deadline = time.monotonic() + 10
    while True:  # the child is not ours: wait until the kernel has dropped its flock
        try:
            with BatchStore(tmp_path).capture_lock() as held:
                assert held.stale is not None and held.stale.pid == proc.pid
            break
        except LockHeldError:
            assert time.monotonic() < deadline
            time.sleep(0.05)


def test_apply_locks_are_per_group(tmp_path: Path, procs: list[int]) -> None:
    proc, _ = spawn_holder(tmp_path, kind="es")
    procs.append(proc.pid)
    store = BatchStore(tmp_path)
    with pytest.raises(LockHeldError, match=rf"apply \(es\) lock .* is held by pid {proc.pid}") as e, \
            store.apply_lock("es"):
        pass
    assert "only one job may apply group 'es' at a time" in str(e.value)
    with store.apply_lock("rdb") as held, store.capture_lock():
        assert held.stale is None


def test_lock_is_released_and_cleared_on_exit(tmp_path: Path, procs: list[int]) -> None:
    store = BatchStore(tmp_path)
    lock_file = tmp_path / "locks" / "capture.lock"
    with store.capture_lock():
        assert json.loads(lock_file.read_text())["pid"] == os.getpid()
        with pytest.raises(StoreError, match="already holds the capture lock"), store.capture_lock():
            pass
        with pytest.raises(LockHeldError, match=f"held by pid {os.getpid()}"), \
                BatchStore(tmp_path).capture_lock():
            pass
    assert lock_file.read_text() == ""
    proc, _ = spawn_holder(tmp_path)  # another process can take it now
    procs.append(proc.pid)
    proc.kill()
    proc.wait()


def test_lock_released_when_the_body_raises(tmp_path: Path) -> None:
    store = BatchStore(tmp_path)
    with pytest.raises(RuntimeError), store.capture_lock():
        raise RuntimeError("boom")
    with store.capture_lock() as held:
        assert held.stale is None


BRIEF = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from pipeline.state.locks import acquire
    path, hold, rounds = Path(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    print("ready", flush=True)
    for _ in range(rounds):  # as sluice repair: the lock for one chunk at a time, again and again
        held = acquire(path, "apply (g1)", "wait", brief=True)
        time.sleep(hold)
        held.release()
""")


def test_a_brief_holder_is_waited_for_and_lets_a_waiting_job_go_first(tmp_path: Path, procs: list[int]) -> None:
    """A job meeting a brief holder (sluice repair) waits instead of being refused, and gets the lock
    although the brief holder takes it again at once, chunk after chunk; a normal holder is still
    refused at once, and a brief acquirer waits for it."""
    store = BatchStore(tmp_path / "store")
    path = store.lock_dir / "apply.g1.lock"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", BRIEF, str(path), "0.2", "200"], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, text=True)
    procs.append(proc.pid)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    deadline = time.monotonic() + 10
    while not (path.exists() and json.loads(path.read_text() or "{}").get("brief")):
        assert time.monotonic() < deadline, "the brief holder never took the lock"
        time.sleep(0.01)
    for _ in range(3):
        t0 = time.monotonic()
        with store.apply_lock("g1") as held:   # waits (a sync would have been refused before)
            assert not held.info.brief
            assert time.monotonic() - t0 < 5
            time.sleep(0.3)                    # the brief holder waits meanwhile
            assert json.loads(path.read_text())["pid"] == os.getpid()
    assert proc.poll() is None
    proc.kill()
    proc.wait()
    with store.apply_lock("g1"):              # a normal holder: a brief acquirer waits for it
        from pipeline.state.locks import acquire

        t0 = time.monotonic()
        with pytest.raises(LockHeldError):
            acquire(path, "apply (g1)", "wait", brief=True, wait=0.3)
        assert time.monotonic() - t0 >= 0.3
        holder, _ = spawn_holder(tmp_path / "other", "g1")  # and a normal holder still refuses at once
        procs.append(holder.pid)
        t0 = time.monotonic()
        with pytest.raises(LockHeldError):
            BatchStore(tmp_path / "other").apply_lock("g1").__enter__()
        assert time.monotonic() - t0 < 2
