"""The writer-session runner: the one place that drives the adapters' :class:`~adapters.base.Writer`
life cycle (issue #41 step 2).

:class:`Writers` holds one writer per target of a plan (anything with ``mappings``,
``mapping_target`` and ``targets``: the job's ``JobContext``, a ``GroupPlan``) and runs units of
work on them, one transaction each::

    ws = Writers(ctx, Options(retries=5, lineage=Lineage(scope), applied_from=..., part=pid))
    ws.transaction(midx, lambda w: w.apply(mapping, chunk))   # open, apply, commit; retried
    ws.close()        # success: close every writer, counts summed in ``ws.stats``
    ws.abort()        # failure: roll back and close every writer, quietly

* **open**: a target's writer is made (``adapters.registry.make_writer``, with all of the target's
  mappings) on its first use; what its :class:`~adapters.base.Capabilities` declare is set up before
  ``open``: ``track`` (``Options.lineage``; None: never, as the dead-letter replay), ``track_position``
  (``Options.applied_from``, with ``Options.part``) and ``source_charsets`` (``Options.source_charsets``,
  a factory called once per writer made: the DDL replay's reader).
* **one transaction**: :meth:`Writers.transaction` gets the writer, calls ``work(writer)``, commits and
  returns ``work``'s value. ``hold`` (a context-manager factory: the repair's chunk lock) is entered
  around each try, the commit inside it; ``Options.begin_each`` calls ``open`` again at each try
  (the repair's writer reads through its connection between commits).
* **retry**: a :class:`~sluice_common.errors.TransientError` (also from ``make``/``open``: a target
  restarting) drops the writer -- rolled back and closed quietly, its counts back to what it had
  committed -- and the transaction is tried again on a new one through :mod:`pipeline.retry`
  (``Options.retries`` tries, waits doubling from 0.5 s up to ``Options.backoff_max``); each retry is
  counted in :attr:`Writers.retries` and handed to the caller's ``before_sleep`` (its log line).
* **rollback**: a row error (:func:`~sluice_common.errors.is_row_error`: the dead-letter halving
  tries the chunk again in parts) rolls the transaction back, sets the writer's counts back, and
  keeps the writer; any other error drops the writer (quietly: the error that got here counts;
  the counts of what it applied so far stay in :attr:`Writers.stats`, as they always did).
* **close**: :meth:`close` after success, :meth:`abort` on every other exit path.

What stays with the callers: which changes make a chunk, dead-letter isolation and its store
(:mod:`pipeline.job.chunks`), the DDL barrier (:mod:`pipeline.job.barriers`), the replay's bookkeeping
(:mod:`pipeline.ops.deadletter`), the repair's compare (:mod:`pipeline.repair.task`). Pipeline code
reaches a writer only through this module (tests/unit/test_capabilities.py).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, TypeVar

from adapters.base import AppliedFrom, ApplyStats, Writer
from pipeline.retry import BeforeSleep, doubling, retrying
from sluice_common.errors import TransientError, is_row_error

T = TypeVar("T")


@dataclass(frozen=True)
class Lineage:
    """What a writer with ``Capabilities.lineage`` records its applies under (``Writer.track``)."""

    scope: str = ""  # the store's id and the group
    generation: int = 0
    recaptures: tuple = ()


@dataclass(frozen=True)
class Options:
    """How a :class:`Writers` opens its writers and retries a transaction (see the module docstring)."""

    retries: int = 5  # tries of one transaction, the first included
    backoff_max: float = 20.0  # the longest wait between two tries (seconds)
    lineage: Lineage | None = None  # None: ``track`` is never called
    applied_from: AppliedFrom | None = None  # None: ``track_position`` is never called
    part: int = 0  # the partition that records ``applied_from``
    source_charsets: Callable[[], Any] | None = None  # a reader per writer made, for replayed DDL
    ddl_time_zone: Callable[[Any], str] | None = None  # a replayed DDL's zone, asked only when it runs
    begin_each: bool = False  # ``open`` again at each try (the writer was opened already)
    #: on an executor: the driver's DDL epoch; the adapters drop their schema caches when it changed
    #: (``adapters.registry.reset_caches``). None: on the driver, whose DDL replay resets them itself
    epoch: int | None = None


class Writers:
    """One writer per target of ``plan``, opened on first use; one transaction per :meth:`transaction`."""

    def __init__(self, plan: Any, options: Options | None = None):
        from adapters.registry import capabilities, make_writer, reset_caches  # adapters load lazily

        self.plan, self.options = plan, options or Options()
        if self.options.epoch is not None:
            reset_caches(self.options.epoch)
        self.writers: dict[str, Writer] = {}
        self.stats = ApplyStats()  # the counts of the writers closed or dropped so far
        self.retries = 0  # transactions tried again after a TransientError
        self._make_writer, self._capabilities = make_writer, capabilities

    def writer(self, midx: int) -> Writer:
        """The open writer of mapping ``midx``'s target (made, set up and opened on first use)."""
        tid = self.plan.mapping_target[midx]
        w = self.writers.get(tid)
        if w is None:
            kind, target = self.plan.targets[tid]
            mappings = tuple(m for i, m in enumerate(self.plan.mappings) if self.plan.mapping_target[i] == tid)
            w = self.writers[tid] = self._make_writer(kind, target, mappings)
            can, o = self._capabilities(kind), self.options
            if o.lineage is not None and can.lineage:
                w.track(o.lineage.scope, o.lineage.generation, o.lineage.recaptures)
            if o.applied_from is not None and can.positions:
                w.track_position(o.applied_from, o.part)
            if o.source_charsets is not None and can.source_charsets:
                w.source_charsets = o.source_charsets()
            if o.ddl_time_zone is not None and can.source_charsets:
                w.ddl_time_zone = o.ddl_time_zone
            w.open()
        return w

    def transaction(self, midx: int, work: Callable[..., T], *, before_sleep: BeforeSleep | None = None,
                    hold: Callable[[], AbstractContextManager] | None = None) -> T:
        """``work(writer)`` (``work(writer, held)`` with ``hold``) and commit, as one transaction on
        mapping ``midx``'s target; a TransientError tries it again on a new writer (module docstring)."""

        def counted(attempt: int, e: BaseException, delay: float) -> None:
            self.retries += 1
            if before_sleep is not None:
                before_sleep(attempt, e, delay)

        o = self.options
        tries = retrying(attempts=o.retries, on=TransientError, wait=doubling(0.5, o.backoff_max), before_sleep=counted)
        return tries(self._once, midx, work, hold)

    def _once(self, midx: int, work: Callable[..., T], hold: Callable[[], AbstractContextManager] | None) -> T:
        with (hold() if hold is not None else nullcontext()) as held:
            w = before = None
            try:
                w = self.writer(midx)  # making or opening it may fail transiently too
                if self.options.begin_each:
                    w.open()
                before = ApplyStats().add(w.stats)
                out = work(w) if hold is None else work(w, held)
                w.commit()
                return out
            except BaseException as e:
                if before is not None and is_row_error(e):
                    w.stats = before
                    w.rollback()  # the writer goes on (the chunk is tried again in parts)
                    raise
                if before is not None and isinstance(e, TransientError):
                    w.stats = before
                self.discard(midx)
                raise

    def discard(self, midx: int) -> None:
        """Roll back, close and forget mapping ``midx``'s writer, quietly (its connection may be gone);
        its counts are kept in :attr:`stats`."""
        w = self.writers.pop(self.plan.mapping_target[midx], None)
        if w is not None:
            self._drop(w)

    def _drop(self, w: Writer) -> None:
        self.stats.add(w.stats)
        for step in (w.rollback, w.close):
            try:
                step()
            except Exception:  # noqa: BLE001 - a lost connection fails its rollback/close too
                pass

    def abort(self) -> None:
        """Roll back and close every writer, quietly (after a failure, or to end a session whatever
        its transactions left)."""
        writers, self.writers = self.writers, {}
        for w in writers.values():
            self._drop(w)

    def close(self, quietly: bool = False) -> ApplyStats:
        """Close every writer (after success) and return the counts of every writer of the session;
        ``quietly``: a close that fails is ignored (what was committed stays)."""
        for tid in list(self.writers):
            w = self.writers.pop(tid)  # one that fails to close is not counted twice by abort()
            self.stats.add(w.stats)
            try:
                w.close()
            except Exception:
                if not quietly:
                    raise
        return self.stats
