"""The executor's chunk runner, shared by the sync job and the full load (``sluice etl``).

:class:`ChunkRunner` applies one task's chunks of changes through the writer-session runner
(:mod:`pipeline.writers`: one writer per target, one transaction per chunk, transient failures
retried with backoff); row errors are isolated by halving and dead-lettered when the mapping has
``deadLetter`` on (docs/deadletter.md). It raises a chunk's terminal error; turning that into the task's result
row is the caller's job.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from adapters.base import ApplyStats, Change
from pipeline.retry import first_line
from pipeline.writers import Lineage, Options, Writers
from sluice_common.errors import TargetError, is_row_error
from sluice_common.logs import get_logger

log = get_logger("job.partition")  # the component name the log lines have always had

if TYPE_CHECKING:
    from pipeline.job.deadletter import DeadLetters
    from pipeline.job.partition import JobContext


def options_of(ctx: JobContext, pid: int) -> Options:
    """The writer-session options of a job's executor task: the context's retries, the store's
    lineage, the round's start position (recorded by partition ``pid``), the DDL epoch."""
    return Options(retries=ctx.retries, backoff_max=ctx.backoff_max, epoch=ctx.epoch,
                   lineage=Lineage(ctx.scope, ctx.generation, ctx.recaptures),
                   applied_from=ctx.applied_from, part=pid)


class ChunkRunner:
    """Applies one executor task's chunks through the adapters' writers, held by a
    :class:`pipeline.writers.Writers` (one writer per target, opened on first use, with the job's
    lineage and the round's start position; one transaction per chunk, transient errors retried
    with backoff); row errors isolated and dead-lettered where the mapping says so. Used by the sync
    job's partitions (:mod:`pipeline.job.partition`) and the full load's key ranges
    (:mod:`pipeline.etl.partition`)."""

    def __init__(self, ctx: JobContext, pid: int):
        self.ctx, self.pid = ctx, pid
        self.session = Writers(ctx, options_of(ctx, pid))
        self.rows = 0
        self.current: Change | None = None  # the first change of the chunk being applied (messages)
        on = any(getattr(m, "deadLetter", False) for m in ctx.mappings)
        self.dead = None
        if on:  # imported only when used: the store's modules cost a cold Python worker time
            from pipeline.job.deadletter import DeadLetters

            self.dead = DeadLetters(ctx.blocked)

    @property
    def stats(self) -> ApplyStats:
        """The counts of the writers closed or dropped so far (all of them after close/abort)."""
        return self.session.stats

    @property
    def retries(self) -> int:
        """Chunks tried again after a TransientError (reported, counted in metrics)."""
        return self.session.retries

    def flush(self, midx: int, chunk: list[Change]) -> None:
        """Apply one chunk in one transaction, retrying transient failures with backoff.

        With the mapping's ``deadLetter`` on, a chunk that fails with a row's data (RowError) is
        rolled back and applied again in halves, in order, so the good rows commit and each bad
        row is isolated and dead-lettered; changes of keys already dead-lettered are not tried
        (per-key order, docs/deadletter.md). Any other error fails the partition as before."""
        mapping = self.ctx.mappings[midx]
        self.current = chunk[0] if chunk else None
        dead = self.dead if getattr(mapping, "deadLetter", False) else None
        if dead is None:
            self._apply(midx, chunk)
            return
        mark = len(dead.entries)
        self._isolate(midx, dead.filter(mapping, chunk), dead)
        for e in dead.entries[mark:]:
            self.stats.dead_lettered[e["table"]] += 1

    def _isolate(self, midx: int, chunk: list[Change], dead: DeadLetters) -> None:
        if not chunk:
            return
        try:
            self._apply(midx, chunk)
            return
        except TargetError as e:
            if not is_row_error(e):
                raise
            if len(chunk) == 1:
                dead.add(self.ctx.mappings[midx], chunk[0], e)
                return
        mid = len(chunk) // 2
        self._isolate(midx, chunk[:mid], dead)
        self._isolate(midx, dead.filter(self.ctx.mappings[midx], chunk[mid:]), dead)

    def _apply(self, midx: int, chunk: list[Change]) -> None:
        """One transaction for ``chunk`` (:meth:`pipeline.writers.Writers.transaction`): transient
        failures retried with backoff; on failure the writer's counts go back to what was committed,
        and a row error rolls the chunk back for the halving."""
        mapping = self.ctx.mappings[midx]

        def retrying_after(attempt: int, e: BaseException, delay: float) -> None:
            log.warning("transient error, retrying the chunk", partition=self.pid, mapping=mapping.file,
                        attempt=attempt, of=self.ctx.retries, delay=delay, error=first_line(e))

        self.session.transaction(midx, lambda w: w.apply(mapping, chunk), before_sleep=retrying_after)
        self.rows += len(chunk)
        self._maybe_pause()

    def _maybe_pause(self) -> None:
        ctx = self.ctx
        if ctx.pause_after_rows is None or self.rows < ctx.pause_after_rows or not ctx.pause_marker:
            return
        try:
            fd = os.open(ctx.pause_marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return  # paused once already (e.g. before the executor was killed)
        os.write(fd, f"{os.getpid()}\n".encode())
        os.close(fd)
        resume = ctx.pause_marker + ".go"  # a test creates it to let the partition go on early
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not os.path.exists(resume):
            time.sleep(0.2)

    def abort(self) -> None:
        """Roll back and release every writer after a failure."""
        self.session.abort()

    def close(self) -> None:
        """Release the writers; then write the dead-lettered rows durably (before success)."""
        self.session.close()
        if self.dead is not None:
            self.dead.publish(self.ctx.dead_letter_dir, self._part_name())

    def _part_name(self) -> str:
        try:
            from pyspark import TaskContext

            tc = TaskContext.get()
        except ImportError:  # pragma: no cover - pyspark is a dependency
            tc = None
        attempt = f"{tc.attemptNumber()}.{tc.taskAttemptId()}" if tc else "0.0"  # unique per task attempt
        return f"s{self.ctx.segment:03d}-p{self.pid:05d}-a{attempt}.jsonl"
