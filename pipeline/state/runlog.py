"""The run history of a store: one JSON object per ``sluice run`` in ``<store>/runs.jsonl``.

Each run is appended as one line with a single ``write()`` on a file opened with
``O_APPEND``, under an ``flock`` on ``<store>/runs.lock``, then fsynced: a reader sees a
run whole or not at all (a line cut short by a crash mid-write has no newline and is
skipped). When the file holds more than ``keep`` runs (plus a margin) the newest ``keep``
are rewritten to a temp file that is fsynced and renamed over it, under the same lock.

A record (docs/operations.md has the full list)::

    {"run": "20260509T073525Z-4242-1a2b", "started": "...", "finished": "...", "seconds": 12.3,
     "source": "shop", "groups": ["g1"], "status": "ok|nothing|failed|locked", "exit": 0,
     "capture": {...CaptureSummary, "seconds": 1.2} | null,
     "sync": {"g1": {...SyncSummary.as_dict(), "pending_before": {"batches": 3, "rows": 900}}},
     "lag": {"capture": {...}, "groups": {"g1": {...}}},
     "errors": [{"stage": "capture|sync|lag|metrics", "group": null, "type": "ApplyFailed",
                 "message": "..."}]}
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pipeline.fsutil import not_writable

RUNS_FILE = "runs.jsonl"
LOCK_FILE = "runs.lock"


def new_run_id(now: float | None = None) -> str:
    """A sortable, unique run id: UTC time, pid and a random suffix."""
    t = time.gmtime(now if now is not None else time.time())
    return f"{time.strftime('%Y%m%dT%H%M%SZ', t)}-{os.getpid()}-{secrets.token_hex(2)}"


class RunLog:
    """The run history in ``<root>/runs.jsonl`` (``root``: the source's store folder)."""

    def __init__(self, root: str | os.PathLike[str], keep: int = 1000):
        self.root = Path(root)
        self.path = self.root / RUNS_FILE
        self.keep = max(1, int(keep))

    @contextmanager
    def _locked(self) -> Iterator[None]:
        fd = os.open(self.root / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing drops the flock

    def append(self, record: dict[str, Any]) -> None:
        """Add one run (one line, written and fsynced whole); trim old runs past ``keep``.
        A file that cannot be written is a StoreError naming it."""
        line = (json.dumps(record, default=str, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        try:
            self._append(line)
        except OSError as e:
            raise not_writable(self.root, e, "the run log") from None

    def _append(self, line: bytes) -> None:
        with self._locked():
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                _write_all(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)
            self._trim()

    def _trim(self) -> None:
        lines = self._lines()
        if len(lines) <= self.keep + max(10, self.keep // 10):
            return
        for stale in self.root.glob(f".{RUNS_FILE}.*.tmp"):  # left by a trim that crashed (we hold the lock)
            stale.unlink(missing_ok=True)
        tmp = self.root / f".{RUNS_FILE}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            _write_all(fd, b"".join(lines[-self.keep:]))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        dfd = os.open(self.root, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    def _lines(self) -> list[bytes]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        return [ln for ln in data.splitlines(keepends=True) if ln.endswith(b"\n")]

    def runs(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The recorded runs, oldest first (the newest ``limit`` if given); bad lines skipped."""
        out = []
        for ln in self._lines():
            try:
                rec = json.loads(ln)
            except ValueError:
                continue
            if isinstance(rec, dict):
                out.append(rec)
        return out[-limit:] if limit else out

    def last(self, group: str | None = None) -> dict[str, Any] | None:
        """The newest run (that included ``group``, if given)."""
        for rec in reversed(self.runs()):
            if group is None or group in (rec.get("groups") or ()):
                return rec
        return None

    def last_success(self) -> dict[str, Any] | None:
        """The newest run that ended ``ok`` or ``nothing``."""
        for rec in reversed(self.runs()):
            if rec.get("status") in ("ok", "nothing"):
                return rec
        return None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
