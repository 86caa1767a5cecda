"""Process locks for the batch store: non-blocking ``fcntl.flock`` plus holder info.

The flock is the truth: the kernel releases it when the holder dies (kill -9 included),
so nothing ever has to "clean up" a lock. The holder also writes who it is (pid, host,
command, since) into the lock file so a refused acquirer can name it. A lock file that
still names a holder but whose flock can be taken is stale (the holder died): we take
it over and say so. Lock files are never deleted (deleting a flocked file lets two
processes lock two different inodes).

A *brief* holder (``sluice repair``, which holds a group's apply lock for one chunk at a time)
says so in the lock file. Another job that meets a brief holder waits for it (up to
:data:`BRIEF_WAIT` seconds) instead of being refused, and leaves a ``<lock>.wait`` file while it
waits; a brief acquirer waits for the lock, and lets such a waiter go first.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.fsutil import now_iso
from sluice_common.errors import LockHeldError, StoreError

log = logging.getLogger("sluice.store")

#: how long a job waits for a lock whose holder is brief before it is refused as held
BRIEF_WAIT = 300.0
#: how long a job waits for a holder that has not recorded itself (yet, or any more)
UNRECORDED_WAIT = 5.0
#: a ``.wait`` file touched within this many seconds means a job waits for the lock
WAITER_FRESH = 1.0
_POLL = 0.02


@dataclass(frozen=True)
class LockInfo:
    """Who holds (or held) a lock, as written into the lock file."""

    pid: int
    host: str
    command: str
    since: str
    #: the holder keeps the lock for moments at a time (sluice repair): others wait for it
    brief: bool = False

    @classmethod
    def current(cls, brief: bool = False) -> LockInfo:
        """Info describing this process."""
        return cls(os.getpid(), socket.gethostname(), _command_line()[:300], now_iso(), brief)

    @classmethod
    def parse(cls, text: str) -> LockInfo | None:
        """Parse lock file content; None for an empty or half-written file."""
        try:
            raw = json.loads(text)
            return cls(int(raw["pid"]), str(raw["host"]), str(raw["command"]), str(raw["since"]),
                       bool(raw.get("brief", False)))
        except (ValueError, KeyError, TypeError):
            return None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        out: dict[str, Any] = {"pid": self.pid, "host": self.host, "command": self.command, "since": self.since}
        if self.brief:
            out["brief"] = True
        return out

    def describe(self) -> str:
        """``pid 123 on host db1 since 2026-...Z (sluice capture)``."""
        return f"pid {self.pid} on host {self.host} since {self.since} ({self.command})"

    def on_this_host(self) -> bool:
        """True when the holder ran on this machine (so its pid can be checked)."""
        return self.host == socket.gethostname()


def _command_line() -> str:
    try:
        with open("/proc/self/cmdline", "rb") as f:
            parts = f.read().split(b"\0")
        return " ".join(b" ".join(parts).decode("utf-8", "replace").split())
    except OSError:
        return " ".join([sys.executable, *sys.argv])


def pid_exists(pid: int) -> bool:
    """True if a process with ``pid`` exists on this host."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_holder(path: Path) -> LockInfo | None:
    """The holder info recorded in lock file ``path`` (without taking the lock)."""
    try:
        return LockInfo.parse(path.read_text(encoding="utf-8", errors="replace"))
    except FileNotFoundError:
        return None


def held_by(path: Path) -> LockInfo | None:
    """Who holds lock file ``path`` now, found without taking the lock or writing to the file
    (a shared flock probe, which conflicts only with a holder); None when nobody holds it."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return read_holder(path) or LockInfo(0, "?", "(a process that has not recorded itself yet)", "?")
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


@dataclass
class HeldLock:
    """A lock this process holds; returned by the store's lock context managers.

    ``stale`` is the previous holder's info when the lock was taken over from a holder
    that had died without releasing it, else None. ``cleaned`` lists files a recovery
    step removed after acquiring (orphan batch files, stray temp files).
    """

    name: str
    path: Path
    info: LockInfo
    stale: LockInfo | None
    fd: int
    cleaned: list[str]

    def release(self) -> None:
        """Clear the holder info and drop the flock (idempotent)."""
        if self.fd < 0:
            return
        try:
            os.ftruncate(self.fd, 0)
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = -1


def acquire(path: Path, name: str, what_to_do: str, *, brief: bool = False,
            wait: float | None = None) -> HeldLock:
    """Take lock file ``path``, or raise LockHeldError naming the holder.

    Without waiting, except for a holder that marked itself brief: then for up to
    :data:`BRIEF_WAIT` seconds. ``brief``: this process holds it for moments and marks itself so;
    it waits for the lock (up to ``wait`` seconds, None: as long as it takes) and lets a job that
    waits for it go first."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise StoreError(f"{path}: cannot open the {name} lock file: {e}",
                         hint="check that the store directory exists and is writable") from e
    waiter = path.with_name(path.name + ".wait")
    started = None
    waited = False
    try:
        while True:
            if brief and _waiter_fresh(waiter):
                time.sleep(_POLL)  # a job waits for this lock: it goes first
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                now = time.monotonic()
                started = now if started is None else started
                if brief:
                    limit = wait
                else:
                    holder = read_holder(path)
                    if holder is None:  # between flock() and recording itself, or clearing and unlocking
                        limit = UNRECORDED_WAIT
                    elif holder.brief:
                        limit = BRIEF_WAIT
                        if not waited:
                            log.info("waiting for the %s lock %s: its holder keeps it briefly", name, path)
                    else:
                        raise _held_error(path, name, what_to_do) from None
                    _touch(waiter)
                    waited = True
                if limit is not None and now - started >= limit:
                    raise _held_error(path, name, what_to_do) from None
                time.sleep(_POLL)
            except OSError as e:
                raise StoreError(f"{path}: cannot lock: {e}",
                                 hint="the store's file system must support flock") from e
    except BaseException:
        os.close(fd)
        raise
    if waited:
        _remove(waiter)
    try:
        previous = LockInfo.parse(os.pread(fd, 65536, 0).decode("utf-8", errors="replace"))
        info = LockInfo.current(brief)
        data = (json.dumps(info.to_dict()) + "\n").encode("utf-8")
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
        os.fsync(fd)
    except BaseException:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        raise
    if previous is not None:
        _log_takeover(name, path, previous)
    return HeldLock(name, path, info, previous, fd, [])


def _waiter_fresh(waiter: Path) -> bool:
    try:
        return time.time() - waiter.stat().st_mtime < WAITER_FRESH
    except OSError:
        return False


def _touch(waiter: Path) -> None:
    try:
        waiter.touch()
    except OSError:
        pass  # the wait still works, only without priority over the brief holder


def _remove(waiter: Path) -> None:
    try:
        waiter.unlink()
    except OSError:
        pass


def _log_takeover(name: str, path: Path, previous: LockInfo) -> None:
    if previous.on_this_host() and pid_exists(previous.pid) and previous.pid != os.getpid():
        why = "that pid still exists but no longer holds the lock (pid reused, or released uncleanly)"
    elif previous.on_this_host():
        why = "that process no longer exists"
    else:
        why = "its flock was released, so it has exited"
    log.warning("took over stale %s lock %s from %s: %s", name, path, previous.describe(), why)


def _held_error(path: Path, name: str, what_to_do: str) -> LockHeldError:
    holder = None
    for _ in range(5):  # the new holder may be between flock() and writing its info
        holder = read_holder(path)
        if holder is not None:
            break
        time.sleep(0.02)
    if holder is None:
        return LockHeldError(
            f"the {name} lock ({path}) is held by a process that has not recorded itself yet",
            hint=f"retry in a moment; find the holder with `fuser -v {path}`",
        )
    if holder.on_this_host() and not pid_exists(holder.pid):
        return LockHeldError(
            f"the {name} lock ({path}) is held, but its recorded holder {holder.describe()} no "
            "longer exists: a process it forked still holds the lock file open",
            hint=f"find and stop that process with `fuser -v {path}` (or `lsof {path}`), then retry",
        )
    return LockHeldError(
        f"the {name} lock ({path}) is held by {holder.describe()}",
        hint=f"{what_to_do}; or stop it (`kill {holder.pid}` on {holder.host}) and retry — "
        "the lock is released as soon as that process exits",
    )


def lock_holders(lock_dir: Path) -> dict[str, Any]:
    """Who holds the locks in ``lock_dir`` (capture, each group's apply, a follower's), for the
    ``status`` of every store kind."""
    holders: dict[str, Any] = {}
    try:
        names = sorted(os.listdir(lock_dir))
    except FileNotFoundError:
        return holders
    for name in names:
        if not name.endswith(".lock"):
            continue
        info = read_holder(lock_dir / name)
        if info is None:
            continue
        key = name[: -len(".lock")]
        for kind in ("apply", "follow"):  # a group's apply lock; a follower's claim on the group
            if key.startswith(kind + "."):
                key = f"{kind}:{key[len(kind) + 1:]}"
        entry = info.to_dict()
        entry["alive"] = pid_exists(info.pid) if info.on_this_host() else None
        holders[key] = entry
    return holders
