"""Batches stored on a thread of their own, so reading and decoding go on while a batch file
is written and fsynced (the fsyncs release the GIL).

``AsyncAppender(store)`` is a drop-in ``sink`` for the Batcher: ``append(lines, ...)`` queues
the batch (blocking while ``depth`` batches are already waiting) and returns; batches are
committed in order by one thread. A failure is raised on the next ``append`` or on ``drain()``;
after a failure nothing more is stored until ``drain()`` (what was queued behind the failed
batch is dropped, also when its error was already raised), so the store never has a gap.
``drain()`` waits until everything queued is durable: the runner drains before it reports,
before it reads the stored position to resume, and at the end.
"""

from __future__ import annotations

import queue
import threading
from typing import Any

from pipeline.store import CaptureLog

_STOP = object()
_KEEP_ALIVE = object()


class AsyncAppender:
    """Store batches in order on a writer thread (see the module docstring)."""

    def __init__(self, store: CaptureLog, depth: int = 2):
        self.store = store
        self._q: queue.Queue[Any] = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None  # the failure not yet raised to the capture thread
        self._failed = False  # a batch failed: nothing queued after it is stored, until drain()
        self._thread = threading.Thread(target=self._run, name="capture-writer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            job = self._q.get()
            try:
                if job is _STOP:
                    return
                if self._failed:  # after a failure: dropped, the capture thread reads the position again
                    continue
                if job is _KEEP_ALIVE:
                    self.store.keep_alive()
                else:
                    lines, kw = job
                    self.store.append_lines(lines, **kw)
            except BaseException as e:  # noqa: BLE001 - handed to the capture thread
                self._error = e
                self._failed = True
            finally:
                self._q.task_done()

    def _raise(self) -> None:
        if self._error is not None:
            err, self._error = self._error, None
            raise err

    def append(self, lines: list[bytes], **kw: Any) -> None:
        """Queue one batch (``CaptureLog.append_lines`` arguments)."""
        self._raise()
        self._q.put((lines, kw))

    def keep_alive(self) -> None:
        """Queue ``store.keep_alive()`` after the queued batches (the store's writes stay on one thread)."""
        self._raise()
        self._q.put(_KEEP_ALIVE)

    def drain(self) -> None:
        """Wait until every queued batch is stored (or, after a failure, dropped); raise the
        writer's error if it was not raised yet. The writer takes batches again afterwards: the
        caller resumes from the store's position, which nothing after the failure moved."""
        self._q.join()
        self._failed = False
        self._raise()

    def close(self) -> None:
        """Stop the thread after the queued batches (errors are left to ``drain``)."""
        if self._thread.is_alive():
            self._q.put(_STOP)
            self._thread.join()
