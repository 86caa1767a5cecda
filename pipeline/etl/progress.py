"""The full load's live progress channel: executors tell the driver how many rows each key range
has loaded, and the driver logs rows, rows/s and an ETA every few seconds.

Two ends: :class:`ProgressServer` on the driver (``open_server`` binds it; its ``addr`` goes to
the executors in the job's context) and :class:`ProgressSink` in each task (``send(rows)``,
``close()``). Transport: ``<range id> <rows>`` UDP datagrams, best effort: a lost datagram
only delays the progress line, and a driver that cannot bind a socket runs without one. Final
counts never come from here but from the tasks' result rows.
"""

from __future__ import annotations

import socket
import threading
import time

from sluice_common.logs import get_logger

log = get_logger("etl")


class ProgressSink:
    """A task's end: sends its running row count at most every half second (``force``: now)."""

    def __init__(self, addr: tuple[str, int] | None, uid: int):
        self.addr, self.uid = addr, uid
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM) if addr else None
        self.last = 0.0

    def send(self, rows: int, force: bool = False) -> None:
        if self.sock is None:
            return
        now = time.monotonic()
        if not force and now - self.last < 0.5:
            return
        self.last = now
        try:
            self.sock.sendto(f"{self.uid} {rows}".encode(), self.addr)
        except OSError:
            pass  # progress is best effort

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()


class ProgressServer:
    """The driver's end: receives the tasks' counts and logs a line every ``every`` seconds,
    against ``total`` estimated rows in ``ranges`` key ranges."""

    def __init__(self, host: str, total: int, ranges: int, every: float):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((host, 0))
        self.sock.settimeout(0.5)
        self.addr = (host, self.sock.getsockname()[1])
        self.total = total
        self.nunits = ranges
        self.every = every
        self.done: dict[int, int] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="etl-progress", daemon=True)
        self.t0 = time.monotonic()

    def start(self) -> ProgressServer:
        self.thread.start()
        return self

    def _loop(self) -> None:
        last = time.monotonic()
        while not self.stop.is_set():
            try:
                data = self.sock.recv(256)
                uid, rows = (int(x) for x in data.split())
                self.done[uid] = max(self.done.get(uid, 0), rows)
            except (TimeoutError, ValueError, OSError):
                pass
            now = time.monotonic()
            if now - last >= self.every:
                last = now
                self.report(now)

    def report(self, now: float) -> None:
        rows = sum(self.done.values())
        secs = now - self.t0
        rate = rows / secs if secs > 0 else 0.0
        left = max(self.total - rows, 0)
        eta = round(left / rate) if rate > 0 else None
        log.info("etl progress", rows=rows, est_rows=self.total, rows_per_s=round(rate),
                 eta_s=eta, ranges=f"{len(self.done)}/{self.nunits} started")

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=2)
        self.sock.close()


def open_server(host: str, total: int, ranges: int, every: float) -> ProgressServer | None:
    """A started server on ``host`` (any free port), or None when no socket can be bound there."""
    try:
        return ProgressServer(host, total, ranges, every).start()
    except OSError:
        return None
