"""A stop asked for by a signal, kept where a lost interrupt cannot take it away.

``sluice run``'s SIGTERM handler raises ``KeyboardInterrupt`` in the main thread, wherever it is.
When that is inside a py4j call to the Spark JVM, py4j turns it into a ``Py4JError`` ("Answer from
Java side is empty"): the round records a failed sync, nothing acked, and a follower went on with
its next round as after any failure (the chaos soak's SIGTERM waited 90 s for it; seen in a
follower's log). So the handler also calls :func:`request`: ``run --follow`` asks
:func:`requested` between rounds (pipeline/ops/follow.py) and a run whose interrupt was eaten is
still recorded as interrupted (pipeline/ops/run.py): exit 130, as for a stop between rounds.
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
