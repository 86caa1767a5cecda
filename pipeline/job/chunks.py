"""The executor's chunk runner, shared by the sync job and the full load (``sluice etl``).

:class:`ChunkRunner` owns one task's writers (one per target, from the adapters' registry) and
applies chunks of changes: one transaction per chunk, transient failures retried with backoff,
row errors isolated by halving and dead-lettered when the mapping has ``deadLetter`` on
(docs/deadletter.md). It raises a chunk's terminal error; turning that into the task's result
row is the caller's job.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from adapters.base import ApplyStats, Change
from pipeline.retry import doubling, first_line, retrying
from sluice_common.errors import TargetError, TransientError, is_row_error
from sluice_common.logs import get_logger

log = get_logger("job.partition")  # the component name the log lines have always had

if TYPE_CHECKING:
    from pipeline.job.deadletter import DeadLetters
    from pipeline.job.partition import JobContext


class ChunkRunner:
    """Applies one executor task's chunks through the adapters' writers: one writer per target,
    opened on first use; one transaction per chunk (:meth:`flush`), transient errors retried with
    backoff, row errors isolated and dead-lettered where the mapping says so. Used by the sync
    job's partitions (:mod:`pipeline.job.partition`) and the full load's key ranges
    (:mod:`pipeline.etl.partition`)."""

    def __init__(self, ctx: JobContext, pid: int):
        from adapters.registry import capabilities, make_writer, reset_caches

        reset_caches(ctx.epoch)
        self.ctx, self.pid = ctx, pid
        self.writers = {}
        self._make_writer, self._capabilities = make_writer, capabilities
        self.stats = ApplyStats()
        self.rows = 0
        self.retries = 0  # chunks tried again after a TransientError (reported, counted in metrics)
        self.current: Change | None = None  # the first change of the chunk being applied (messages)
        on = any(getattr(m, "deadLetter", False) for m in ctx.mappings)
        self.dead = None
        if on:  # imported only when used: the store's modules cost a cold Python worker time
            from pipeline.job.deadletter import DeadLetters

            self.dead = DeadLetters(ctx.blocked)

    def writer(self, midx: int):
        tid = self.ctx.mapping_target[midx]
        w = self.writers.get(tid)
        if w is None:
            kind, target = self.ctx.targets[tid]
            mappings = tuple(m for i, m in enumerate(self.ctx.mappings) if self.ctx.mapping_target[i] == tid)
            w = self.writers[tid] = self._make_writer(kind, target, mappings)
            can = self._capabilities(kind)
            if can.lineage:
                w.track(self.ctx.scope, self.ctx.generation, self.ctx.recaptures)
            if self.ctx.applied_from is not None and can.positions:
                w.track_position(self.ctx.applied_from, self.pid)
            w.open()
        return w

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
        """One transaction for ``chunk``; transient failures retried with backoff. On failure the
        writer's counts go back to what was committed."""
        mapping = self.ctx.mappings[midx]

        def retrying_after(attempt: int, e: BaseException, delay: float) -> None:
            self.retries += 1
            log.warning("transient error, retrying the chunk", partition=self.pid, mapping=mapping.file,
                        attempt=attempt, of=self.ctx.retries, delay=delay, error=first_line(e))

        for attempt in retrying(attempts=self.ctx.retries, on=TransientError,
                                wait=doubling(0.5, self.ctx.backoff_max), before_sleep=retrying_after):
            with attempt:
                self._apply_once(midx, mapping, chunk)

    def _apply_once(self, midx: int, mapping, chunk: list[Change]) -> None:
        """One try of :meth:`_apply`: on a TransientError the writer is dropped (the next try opens
        a new one); on a row error the transaction is rolled back for the halving."""
        w = before = None
        try:
            w = self.writer(midx)  # opening may fail transiently too (target restarting)
            before = ApplyStats().add(w.stats)
            w.apply(mapping, chunk)
            w.commit()
            self.rows += len(chunk)
            self._maybe_pause()
        except TransientError:
            if before is not None:
                w.stats = before
            self._discard(midx)
            raise
        except TargetError as e:
            if before is not None and is_row_error(e):
                w.stats = before
                w.rollback()  # the chunk is tried again in parts (dead-letter isolation)
            raise

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

    def _discard(self, midx: int) -> None:
        tid = self.ctx.mapping_target[midx]
        w = self.writers.pop(tid, None)
        if w is not None:
            self.stats.add(w.stats)  # what it committed before (flush resets a failed chunk's counts)
            for step in (w.rollback, w.close):
                try:
                    step()
                except Exception:  # noqa: BLE001 - the connection is already broken
                    pass

    def abort(self) -> None:
        """Roll back and release every writer after a failure."""
        for midx in range(len(self.ctx.mappings)):
            self._discard(midx)

    def close(self) -> None:
        """Release the writers; then write the dead-lettered rows durably (before success)."""
        for w in self.writers.values():
            self.stats.add(w.stats)
            w.close()
        self.writers = {}
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
