"""A stop asked for by a signal, kept where a lost interrupt cannot take it away.

``sluice run``'s SIGTERM handler raises ``KeyboardInterrupt`` in the main thread, wherever it is.
If that is inside a finalizer (a ``__del__``: py4j's and PySpark's objects have them, and the
garbage collector runs them at any allocation), CPython prints "Exception ignored in ..." and the
interrupt is gone: a follower then went on round after round (the chaos soak's SIGTERM waited 90 s
for it). So the handler also calls :func:`request`, and ``run --follow`` asks :func:`requested`
between rounds (pipeline/ops/follow.py): a stop lost mid-round still ends the follower after that
round, as a stop between rounds does (exit 130).
"""

from __future__ import annotations

import threading

_STOP = threading.Event()


def request() -> None:
    """A signal asked this process to stop (safe in a signal handler: sets an event, no I/O)."""
    _STOP.set()


def requested() -> bool:
    """Has a stop been asked for (and perhaps its interrupt lost)?"""
    return _STOP.is_set()


def clear() -> None:
    """Forget a stop (tests running several followers in one process)."""
    _STOP.clear()
