"""Per-process happybase connections, keyed by target, that survive the gateway's idle drop.

An executor keeps its open Thrift connections between partitions and chunks (a pool of
idle ones per :class:`HbaseTarget`). A connection idle longer than ``idle_seconds`` is
replaced before use: the HBase Thrift server closes sockets idle for 60 s, and a write on
such a socket fails only after the request is sent. A connection that saw a transport
error is thrown away, never pooled again.

It also holds the delete/put spacing rule: HBase stamps cells with the server's clock in
milliseconds, and a delete marker hides every put of the same cell with a timestamp <= its
own; a put sent in the same millisecond as a preceding delete would vanish. After a send
that carried deletes, :func:`settle` waits until two milliseconds have passed before the
next send that carries puts (see docs/hbase.md).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import happybase

from adapters.hbase.config import HbaseTarget

_lock = threading.Lock()
_idle: dict[HbaseTarget, list[PooledConnection]] = {}
_last_delete: dict[HbaseTarget, float] = {}
DELETE_PUT_GAP = 0.002


@dataclass
class PooledConnection:
    """One happybase connection and when it was last used."""

    target: HbaseTarget
    conn: happybase.Connection
    last_used: float = field(default_factory=time.monotonic)
    broken: bool = False

    def touch(self) -> None:
        self.last_used = time.monotonic()

    def close(self) -> None:
        try:
            self.conn.close()
        except Exception:  # noqa: BLE001 - closing a dead socket
            pass


def connect(target: HbaseTarget) -> PooledConnection:
    """A new, open connection (raises the client's exception if the server is unreachable)."""
    conn = happybase.Connection(target.host, target.port, timeout=target.timeout_ms, transport=target.transport,
                                protocol=target.protocol, autoconnect=False)
    conn.open()
    return PooledConnection(target, conn)


def acquire(target: HbaseTarget) -> PooledConnection:
    """An idle pooled connection that is fresh enough, or a new one."""
    while True:
        with _lock:
            pool = _idle.get(target)
            pc = pool.pop() if pool else None
        if pc is None:
            return connect(target)
        if time.monotonic() - pc.last_used < target.idle_seconds:
            return pc
        pc.close()  # the server has dropped it (or will, mid-request): do not risk it


def release(pc: PooledConnection) -> None:
    """Give a connection back to the pool (or close it if it is broken)."""
    if pc.broken:
        pc.close()
        return
    with _lock:
        _idle.setdefault(pc.target, []).append(pc)


def close_all() -> None:
    """Close every pooled connection of this process."""
    with _lock:
        pools = list(_idle.values())
        _idle.clear()
    for pool in pools:
        for pc in pool:
            pc.close()


def note_delete(target: HbaseTarget) -> None:
    """Record that a send with deletes to ``target`` just completed."""
    _last_delete[target] = time.monotonic()


def settle(target: HbaseTarget) -> None:
    """Before a send with puts: make sure the last delete is at least 2 ms old."""
    last = _last_delete.get(target)
    if last is not None:
        wait = last + DELETE_PUT_GAP - time.monotonic()
        if wait > 0:
            time.sleep(wait)
