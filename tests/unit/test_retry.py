"""pipeline/retry.py: the retry helper every retried call goes through (no services)."""

from __future__ import annotations

import pytest

from pipeline.retry import doubling, first_line, retrying
from sluice_common.errors import TargetError, TransientError


class Flaky:
    """Fails with ``errors`` in turn, then returns ``"done"``."""

    def __init__(self, *errors: BaseException):
        self.errors, self.calls = list(errors), 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


def _waits(first: float, cap: float | None, n: int) -> list[float]:
    slept: list[float] = []
    fn = Flaky(*[TransientError("down")] * n)
    retrying(attempts=n + 1, on=TransientError, wait=doubling(first, cap), sleep=slept.append)(fn)
    return slept


def test_doubling_waits_as_the_hand_written_loops_did():
    assert _waits(0.5, 20.0, 8) == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 20.0, 20.0]
    assert _waits(0.25, 2.0, 6) == [0.25, 0.5, 1.0, 2.0, 2.0, 2.0]
    assert _waits(0.5, None, 5) == [0.5, 1.0, 2.0, 4.0, 8.0]
    # ``delay = 0.5; ...; delay = min(delay * 2, cap)``: the first wait is 0.5 whatever the cap
    assert _waits(0.5, 0.0, 3) == [0.5, 0.0, 0.0]


def test_a_call_that_recovers_returns_its_result_after_the_calls_before_sleep_saw():
    seen: list[tuple[int, str, float]] = []
    slept: list[float] = []
    fn = Flaky(TransientError("one"), TransientError("two\nmore"))
    r = retrying(attempts=5, on=TransientError, wait=doubling(0.5, 20.0), sleep=slept.append,
                 before_sleep=lambda a, e, d: seen.append((a, first_line(e), d)))(fn)
    assert r == "done" and fn.calls == 3
    assert seen == [(1, "one", 0.5), (2, "two", 1.0)] and slept == [0.5, 1.0]


def test_the_last_error_is_raised_as_it_was_after_the_attempts():
    last = TransientError("still down", hint="check the target")
    fn = Flaky(TransientError("down"), TransientError("down"), last, TransientError("never tried"))
    slept: list[float] = []
    with pytest.raises(TransientError) as got:
        retrying(attempts=3, on=TransientError, wait=doubling(0.5), sleep=slept.append)(fn)
    assert got.value is last and fn.calls == 3 and slept == [0.5, 1.0]


def test_an_error_it_does_not_accept_is_raised_at_once():
    terminal = TargetError("no such table")
    fn = Flaky(TransientError("down"), terminal)
    slept: list[float] = []
    with pytest.raises(TargetError) as got:
        retrying(attempts=5, on=TransientError, wait=doubling(0.5), sleep=slept.append)(fn)
    assert got.value is terminal and fn.calls == 2 and slept == [0.5]


def test_a_predicate_decides_and_a_base_exception_is_never_retried():
    fn = Flaky(ValueError("leader not available"), ValueError("other"))
    with pytest.raises(ValueError, match="other"):
        retrying(attempts=5, on=lambda e: "leader" in str(e), wait=doubling(0.1), sleep=lambda s: None)(fn)
    assert fn.calls == 2
    fn = Flaky(KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        retrying(attempts=5, on=Exception, wait=doubling(0.1), sleep=lambda s: None)(fn)
    assert fn.calls == 1


def test_a_signal_during_the_wait_ends_the_retries():
    def interrupted(_s: float) -> None:
        raise KeyboardInterrupt  # what SIGINT's (or a SIGTERM handler's) exception does to time.sleep

    fn = Flaky(TransientError("down"))
    with pytest.raises(KeyboardInterrupt):
        retrying(attempts=5, on=TransientError, wait=doubling(0.5), sleep=interrupted)(fn)
    assert fn.calls == 1


def test_the_iterator_form_retries_a_block_and_at_least_one_attempt_is_made():
    fn = Flaky(TransientError("down"))
    out = []
    for attempt in retrying(attempts=3, on=(TransientError, OSError), wait=doubling(0.0), sleep=lambda s: None):
        with attempt:
            out.append(fn())
    assert out == ["done"] and fn.calls == 2
    with pytest.raises(TransientError):
        retrying(attempts=0, on=TransientError, wait=doubling(0.0), sleep=lambda s: None)(Flaky(TransientError("x")))


def test_first_line():
    assert first_line(RuntimeError("a\nb")) == "a"
    assert first_line(RuntimeError("")) == ""
    assert first_line(RuntimeError("x" * 400)) == "x" * 300
