"""Retries with back-off, through tenacity: one shape for every call that is tried again.

:func:`retrying` is a :class:`tenacity.Retrying` that

* tries at most ``attempts`` times (the first try included; at least once);
* tries again only after an exception that ``on`` accepts (an exception type, a tuple of types, or
  a predicate); any other exception, and the last one when the attempts are used up, is raised as
  it was (never tenacity's ``RetryError``), so callers catch what they caught before;
* calls ``before_sleep(attempt, error, delay)`` before each wait (a log line, a counter);
* waits ``wait`` seconds (:func:`doubling`, or any tenacity wait) with ``time.sleep``: a signal
  handler that raises (SIGTERM's, Ctrl-C's) ends the wait and the retries with its exception.

Used as ``for attempt in retrying(...): with attempt: ...`` (the body may ``return``), or as
``retrying(...)(fn, *args)``. Adapters do not import this module (imports run one way): the one
adapter that retries (``adapters/es/bulk.py``) uses tenacity itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt

#: what ``on`` may be: which failed attempts are tried again
RetryOn = type[BaseException] | tuple[type[BaseException], ...] | Callable[[BaseException], bool]
#: ``before_sleep(attempt, error, delay)``: the attempt that failed (1-based), its error, the wait
BeforeSleep = Callable[[int, BaseException, float], None]


def doubling(first: float, cap: float | None = None) -> Callable[[RetryCallState], float]:
    """A wait of ``first`` seconds after the first failure, then twice the previous one, each at
    most ``cap`` (the first wait is ``first`` whatever the cap, as in ``delay = min(delay * 2, cap)``)."""

    def wait(rs: RetryCallState) -> float:
        n = rs.attempt_number
        if n <= 1:
            return first
        delay = first * 2.0 ** min(n - 1, 64)
        return delay if cap is None else min(delay, cap)

    return wait


def retrying(*, attempts: int, on: RetryOn, wait: Callable[[RetryCallState], float],
             before_sleep: BeforeSleep | None = None,
             sleep: Callable[[float], None] = time.sleep) -> Retrying:
    """A controller for one retried call (see the module's docstring)."""
    if isinstance(on, type | tuple):
        types = on

        def accepts(e: BaseException) -> bool:
            return isinstance(e, types)
    else:
        accepts = on

    def hook(rs: RetryCallState) -> None:
        assert rs.outcome is not None
        before_sleep(rs.attempt_number, rs.outcome.exception(), rs.upcoming_sleep)

    return Retrying(stop=stop_after_attempt(max(1, attempts)), retry=retry_if_exception(accepts), wait=wait,
                    before_sleep=hook if before_sleep is not None else None, sleep=sleep, reraise=True)


def first_line(e: BaseException, limit: int = 300) -> str:
    """The first line of an error's text (at most ``limit`` characters), for a retry's log line."""
    return (str(e).splitlines() or [""])[0][:limit]
