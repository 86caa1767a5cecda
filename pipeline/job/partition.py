"""What runs on an executor: apply one partition's changes through the adapters.

The function shipped to executors closes over a :class:`JobContext` (plain frozen data:
mappings and target configs, no open clients). Each partition opens one writer per target,
applies its changes in order in chunks of the mapping's ``commitBatch`` (one transaction
per chunk, transient errors retried with backoff), and yields exactly one result row:
counts, or the first terminal error with its table and key. It never raises for a target
error, so the driver sees every partition's outcome and decides about the ack.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa

from adapters.base import ApplyStats, Change
from pipeline.errors import SluiceError, TargetError, TransientError, is_row_error
from pipeline.job.feed import Decoded, Feed, Pipe, changes, check_order
from pipeline.logs import get_logger

log = get_logger("job.partition")

if TYPE_CHECKING:
    from pipeline.job.deadletter import DeadLetters

RESULT_FIELDS = [("partition", pa.int32()), ("ok", pa.bool_()), ("rows", pa.int64()), ("stats", pa.string()),
                 ("error", pa.string()), ("error_table", pa.string()), ("error_key", pa.string()),
                 ("seconds", pa.string())]
RESULT_ARROW = pa.schema(RESULT_FIELDS)


@dataclass(frozen=True)
class JobContext:
    """Everything an executor needs, picklable: mappings, which target each uses, retries."""

    mappings: tuple                      # pipeline.mapping.Mapping, by midx
    mapping_target: tuple[str, ...]      # target id per midx
    targets: dict                        # target id -> (kind, frozen target config)
    epoch: int = 0                       # bumps after each DDL: executors drop schema caches
    retries: int = 5
    backoff_max: float = 20.0
    #: fault-injection hook for the crash tests (SLUICE_TEST_PAUSE_AFTER_ROWS / _MARKER): after
    #: committing that many rows a partition writes the marker file and sleeps (120 s, or until
    #: ``<marker>.go`` exists), once per marker
    pause_after_rows: int | None = field(default=None)
    pause_marker: str | None = field(default=None)
    #: dead-letter store (docs/deadletter.md): this round's folder, the segment number (part of
    #: the file names), and the (mapping, table, key) of live entries that later changes wait behind
    dead_letter_dir: str | None = field(default=None)
    segment: int = 0
    blocked: frozenset = field(default=frozenset())
    #: where ordered groups record their positions in the targets (adapters/rdb/progress.py):
    #: the store's id and the group, and the store's lineage (generation, recaptures)
    scope: str = ""
    generation: int = 0
    recaptures: tuple = ()


class _PartitionRun:
    def __init__(self, ctx: JobContext, pid: int):
        from adapters.registry import make_writer, reset_caches

        reset_caches(ctx.epoch)
        self.ctx, self.pid = ctx, pid
        self.writers = {}
        self._make_writer = make_writer
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
            if hasattr(w, "track"):
                w.track(self.ctx.scope, self.ctx.generation, self.ctx.recaptures)
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
        delay = 0.5
        for attempt in range(1, self.ctx.retries + 1):
            w = before = None
            try:
                w = self.writer(midx)  # opening may fail transiently too (target restarting)
                before = ApplyStats().add(w.stats)
                w.apply(mapping, chunk)
                w.commit()
                self.rows += len(chunk)
                self._maybe_pause()
                return
            except TransientError as e:
                if before is not None:
                    w.stats = before
                self._discard(midx)
                if attempt == self.ctx.retries:
                    raise
                self.retries += 1
                log.warning("transient error, retrying the chunk", partition=self.pid, mapping=mapping.file,
                            attempt=attempt, of=self.ctx.retries, delay=delay, error=str(e).splitlines()[0][:300])
                time.sleep(delay)
                delay = min(delay * 2, self.ctx.backoff_max)
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


def _result(pid: int, ok: bool, rows: int, stats: ApplyStats, t0: float, error: str | None = None,
            table: str | None = None, key: str | None = None) -> pa.RecordBatch:
    row = {"partition": pid, "ok": ok, "rows": rows, "stats": json.dumps(stats.as_dict()), "error": error,
           "error_table": table, "error_key": key, "seconds": f"{time.monotonic() - t0:.3f}"}
    return pa.RecordBatch.from_pylist([row], schema=RESULT_ARROW)


def apply_function(ctx: JobContext, counters=None):
    """The ``mapInArrow`` function for one job segment.

    ``counters``: an optional Spark accumulator (:mod:`pipeline.ops.accumulators`) that each
    partition adds its counts to; the result rows stay the source of truth for the ack."""
    def count(ok: bool, run: _PartitionRun, t0: float) -> None:
        if counters is not None:
            from pipeline.ops.accumulators import partition_counts

            counters.add(partition_counts(ok, run.rows, run.stats, time.monotonic() - t0, run.retries))

    def apply_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        tc = TaskContext.get()
        pid = tc.partitionId() if tc else 0
        t0 = time.monotonic()
        run = _PartitionRun(ctx, pid)
        pipe = Pipe(run)
        feed = Feed(pipe, [_commit_batch(m) for m in ctx.mappings])
        pks, types = Decoded(()), Decoded({})
        last = (-1, -1, -1)
        try:
            for batch in batches:
                midx, chunk = changes(batch, pks, types)
                if chunk:
                    check_order(last, chunk, pid)
                    last = chunk[-1].seq
                    feed.add(midx, chunk)
            feed.drain()
            pipe.finish()
            run.close()
        except Exception as e:  # noqa: BLE001 - every failure becomes this partition's result
            pipe.stop()
            run.abort()
            if not isinstance(e, SluiceError):
                e = SluiceError(f"{type(e).__name__}: {e}")
            current = run.current
            table = getattr(e, "table", None) or (f"{current.database}.{current.table}" if current else None)
            key = getattr(e, "key", None) or (_key_text(current) if current else None)
            count(False, run, t0)
            yield _result(pid, False, run.rows, run.stats, t0, str(e), table, key)
            return
        count(True, run, t0)
        yield _result(pid, True, run.rows, run.stats, t0)
    return apply_partition


def _commit_batch(mapping) -> int:
    return int(getattr(mapping.spec, "commitBatch", 3000) or 3000)


def _key_text(change: Change) -> str:
    names = change.pk_names or tuple(change.data)[:1]
    return ", ".join(f"{n}={change.data.get(n)!r}" for n in names)
