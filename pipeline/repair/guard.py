"""What makes a repaired chunk safe while replication runs: the group's apply lock and a source
read that is newer than everything the group has applied (docs/repair.md, "Why it is exact").

:class:`ChunkGuard` is used on an executor, one chunk at a time::

    with guard.hold() as snap:      # the group's apply lock (brief), then a source snapshot
        rows = snap.read(...)        # the chunk as the source has it now
        ... write the target's rows of that key range ...

While the lock is held no sync of the group applies anything (a sync holds the same lock from
before it reads its batches until after its ack), so everything the target has received --
acked batches, and a batch a crashed sync applied but never acked -- was captured from the
binlog before the lock was taken: it lies before the binlog's end read right after taking it
(``end``). The snapshot must see all of that: on MariaDB ``START TRANSACTION WITH CONSISTENT
SNAPSHOT`` reports the binlog position of its snapshot (``binlog_snapshot_file/position``), and
a snapshot before ``end`` (a transaction in the binlog whose engine commit has not finished yet)
is taken again. MySQL reports no such position: there the snapshot is taken after ``end`` was
read, which the binlog's commit order makes newer than every transaction captured before it
except one whose engine commit is still in flight (docs/repair.md says so).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pymysql

from pipeline.capture.position import binlog_key
from pipeline.capture.server_check import master_status
from pipeline.config import SourceConfig
from pipeline.etl.values import session_sql
from pipeline.source.connect import connect
from sluice_common.errors import SourceError

#: how long a chunk waits for the group's apply lock (a sync round can take minutes)
LOCK_WAIT = 1800.0
#: a task keeps the lock for its next chunks as long as it waited for it, within these bounds (a
#: waiting sync waits MAX_LEASE and a chunk at most; against a follower whose rounds take seconds
#: the repair then gets about half of the lock's time instead of a sliver of it)
LEASE, MAX_LEASE = 0.5, 5.0
SNAPSHOT_TRIES = 200


def lease_for(waited: float) -> float:
    """How long a task keeps the lock it waited ``waited`` seconds for."""
    return min(MAX_LEASE, max(LEASE, waited))


def typed_connection(src: SourceConfig) -> pymysql.connections.Connection:
    """A source connection with pymysql's converters (typed values, as ``sluice verify`` reads),
    UTC session, ``sql_mode`` as the full load reads (no padded CHAR)."""
    return connect(src, session=session_sql(), transient=True)


class Snapshot:
    """One consistent read of the source, open while the lock is held."""

    def __init__(self, conn: pymysql.connections.Connection):
        self.conn = conn

    def rows(self, sql: str, params: list | tuple = (), raw: bool = False) -> list[tuple]:
        """Rows of ``sql`` in this snapshot; ``raw``: the server's text (the full load's reading,
        :mod:`pipeline.etl.values`) instead of typed values."""
        saved = self.conn.decoders
        if raw:
            self.conn.decoders = {}
        try:
            with self.conn.cursor(pymysql.cursors.Cursor) as cur:
                cur.execute(sql, list(params) or None)
                return list(cur.fetchall())
        finally:
            self.conn.decoders = saved


class ChunkGuard:
    """The group's apply lock (``lock_path``), held for one chunk at a time, and the snapshot."""

    def __init__(self, lock_path: str | None, source: SourceConfig, flavor: str, group: str):
        self.lock_path, self.source, self.flavor, self.group = lock_path, source, flavor, group
        self.conn: pymysql.connections.Connection | None = None
        self._lock = None  # the held lock (kept across chunks for LEASE seconds)
        self._since = 0.0
        self._lease = LEASE
        self.waited = 0.0  # seconds spent waiting for the lock (reported)
        self.held = 0.0    # seconds of chunk work under the lock

    def _conn(self) -> pymysql.connections.Connection:
        if self.conn is None:
            self.conn = typed_connection(self.source)
        return self.conn

    @contextmanager
    def hold(self) -> Iterator[Snapshot]:
        """The lock, then a snapshot that sees everything the group applied (see the module doc).
        The lock is kept for the task's next chunks for a lease (:func:`lease_for` the wait;
        :meth:`tick` gives it back): each chunk still reads its own snapshot under it."""
        self.take()
        t1 = time.monotonic()
        conn = self._conn()
        try:
            self._begin(conn)
            try:
                yield Snapshot(conn)
            finally:
                _end(conn)
        except BaseException:
            self.close()  # a connection in an unknown state is not used again; the lock goes back
            raise
        finally:
            self.held += time.monotonic() - t1
            self.tick()

    def take(self) -> None:
        """The group's apply lock, unless this task holds it (its lease is not over)."""
        from pipeline.state.locks import acquire

        if self.lock_path is not None and self._lock is None:
            t0 = time.monotonic()
            self._lock = acquire(Path(self.lock_path), f"apply ({self.group})",
                                 f"sluice repair waits for the group's apply lock between chunks; {self.group!r} "
                                 "is applied by another job", brief=True, wait=LOCK_WAIT)
            self._since = time.monotonic()
            self._lease = lease_for(self._since - t0)
            self.waited += self._since - t0

    def tick(self) -> None:
        """Give the lock back when the lease is over (after each chunk): a sync that waits for it gets
        it within a lease and a chunk, and each turn of the repair does a lease's worth of chunks
        (one chunk per turn, or a fixed 0.5 s, made the repair as slow as the follower's rounds)."""
        if self._lock is not None and time.monotonic() - self._since >= self._lease:
            self._release()

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def _begin(self, conn: pymysql.connections.Connection) -> None:
        with conn.cursor(pymysql.cursors.Cursor) as cur:
            end = master_status(cur)
            end_key = binlog_key(str(end[0]), int(end[1]))
            for _ in range(SNAPSHOT_TRIES):
                cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
                if self.flavor != "mariadb":
                    return
                cur.execute("SHOW SESSION STATUS LIKE 'binlog_snapshot_%'")
                status = {str(k).lower(): str(v) for k, v in cur.fetchall()}
                logfile, logpos = status.get("binlog_snapshot_file"), status.get("binlog_snapshot_position")
                if not logfile or not logpos:
                    raise SourceError("the source reports no binlog_snapshot_file/position",
                                      hint="enable log_bin on the source")
                if binlog_key(logfile, int(logpos)) >= end_key:
                    return
                cur.execute("COMMIT")  # a transaction before `end` is not committed in the engine yet
                time.sleep(0.005)
        raise SourceError(f"the source's snapshots stayed behind its binlog end {end[0]}:{end[1]} for "
                          f"{SNAPSHOT_TRIES} tries", hint="run the repair again when the source's commits complete")

    def close(self) -> None:
        self._release()
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:  # noqa: BLE001 - already broken
                pass
            self.conn = None


def _end(conn: Any) -> None:
    with conn.cursor() as cur:
        cur.execute("COMMIT")
