"""A stop asked for by a signal, kept where a lost interrupt cannot take it away.

``sluice run``'s SIGTERM handler raises ``KeyboardInterrupt`` in the main thread, wherever it is.
When that is inside a py4j call to the Spark JVM, py4j turns it into a ``Py4JError`` ("Answer from
Java side is empty"): the round records a failed sync, nothing acked, and a follower went on with
its next round as after any failure (the chaos soak's SIGTERM waited 90 s for it; seen in a
follower's log). So the handler also calls :func:`request`: ``run --follow`` asks
:func:`requested` between rounds (pipeline/ops/follow.py) and a run whose interrupt was eaten is
still recorded as interrupted (pipeline/ops/run.py): exit 130, as for a stop between rounds. The
interrupt can also be lost entirely: raised inside a finalizer (a pymysql result's ``__del__`` run
while the JVM was launching), Python prints "Exception ignored" and goes on; so a sync starts no new
round once a stop was asked for (pipeline/job/driver.py). Here, below both the job and operations.
"""

from __future__ import annotations

import signal
import threading

_STOP = threading.Event()


def interrupt_on_sigterm() -> None:
    """SIGTERM from now on stops the command as Ctrl-C does (``sluice run`` and ``sluice sync``):
    ``KeyboardInterrupt`` in the main thread and :func:`request`, so the command exits 130 with
    nothing unacked lost, and its exit hooks run (pipeline/job/reaper.py ends the Spark JVM it
    started, also one still launching in a thread); without it SIGTERM ends the process at once.
    Ctrl-C (SIGINT) calls :func:`request` too: its ``KeyboardInterrupt`` is as easily eaten by a
    py4j call whose JVM the same Ctrl-C ended ("Answer from Java side is empty")."""
    signal.signal(signal.SIGTERM, _sigterm)
    signal.signal(signal.SIGINT, _sigterm)


def on_sigint() -> None:
    """Ctrl-C as :func:`interrupt_on_sigterm` set it, if it did (a Spark session replaces it)."""
    if signal.getsignal(signal.SIGTERM) is _sigterm:
        signal.signal(signal.SIGINT, _sigterm)
    else:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _sigterm(_signo, _frame) -> None:  # noqa: ANN001 - a signal handler
    request()  # kept if the interrupt below is lost in a finalizer
    raise KeyboardInterrupt


def request() -> None:
    """A signal asked this process to stop (safe in a signal handler: sets an event, no I/O)."""
    _STOP.set()


def requested() -> bool:
    """Has a stop been asked for (and perhaps its interrupt lost)?"""
    return _STOP.is_set()


def clear() -> None:
    """Forget a stop (tests running several followers in one process)."""
    _STOP.clear()
