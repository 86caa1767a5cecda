"""What runs on an executor: apply one partition's changes through the adapters.

The function shipped to executors closes over a :class:`JobContext` (plain frozen data:
mappings and target configs, no open clients). Each partition opens one writer per target,
applies its changes in order in chunks of the mapping's ``commitBatch`` through a
:class:`~pipeline.job.chunks.ChunkRunner` (one transaction per chunk, transient errors retried
with backoff), and yields exactly one result row:
counts, or the first terminal error with its table and key. It never raises for a target
error, so the driver sees every partition's outcome and decides about the ack.
"""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa

from adapters.base import ApplyStats, Change
from pipeline.job.chunks import ChunkRunner
from pipeline.job.feed import Decoded, Feed, Pipe, changes, check_order, group_keys
from sluice_common.errors import SluiceError
from sluice_common.logs import worker_sink

RESULT_FIELDS = [("partition", pa.int32()), ("ok", pa.bool_()), ("rows", pa.int64()), ("stats", pa.string()),
                 ("error", pa.string()), ("error_table", pa.string()), ("error_key", pa.string()),
                 ("seconds", pa.string()), ("error_code", pa.string())]
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
    #: the round's start in the source's binlog (adapters.base.AppliedFrom), recorded by targets that
    #: can with each chunk's rows (adapters/rdb/applied.py); None: nothing recorded (full loads)
    applied_from: object | None = None


def result_batch(pid: int, ok: bool, rows: int, stats: ApplyStats, t0: float, error: str | None = None,
                 table: str | None = None, key: str | None = None, code: str | None = None) -> pa.RecordBatch:
    """A task's one result row (``RESULT_ARROW``): counts, or its first terminal error with the
    table and key; ``pid`` is the partition (sync) or the key range's unit id (etl). ``code``:
    what the driver may say more of (``missing_table``: the target has no table for a change of
    ``table``; the driver names how to bring a mirrored one over)."""
    row = {"partition": pid, "ok": ok, "rows": rows, "stats": json.dumps(stats.as_dict()), "error": error,
           "error_table": table, "error_key": key, "seconds": f"{time.monotonic() - t0:.3f}", "error_code": code}
    return pa.RecordBatch.from_pylist([row], schema=RESULT_ARROW)


def apply_function(ctx: JobContext, counters=None, scan=None):
    """The ``mapInArrow`` function for one job segment.

    ``counters``: an optional Spark accumulator (:mod:`pipeline.job.accumulators`) that each
    partition adds its counts to; the result rows stay the source of truth for the ack.
    ``scan``: a :class:`pipeline.job.scan.ScanPlan`: the task reads its changes from the round's
    files itself (the function then runs over an RDD of ``partitions`` numbers, one per task:
    :func:`pipeline.job.segment.on_rdd`);
    None: its changes arrive as the Arrow batches of the plan's partition."""
    def count(ok: bool, run: ChunkRunner, t0: float) -> None:
        if counters is not None:
            from pipeline.job.accumulators import partition_counts

            counters.add(partition_counts(ok, run.rows, run.stats, time.monotonic() - t0, run.retries))

    def apply_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        worker_sink()  # a line the worker cannot write is dropped, never this task's error
        tc = TaskContext.get()
        pid = tc.partitionId() if tc else 0
        t0 = time.monotonic()
        run = ChunkRunner(ctx, pid)
        pipe = Pipe(run)
        feed = Feed(pipe, [_commit_batch(m) for m in ctx.mappings])
        pks, types = Decoded(()), Decoded({})
        last = (False, "", (-1, -1, -1))
        try:
            for midx, chunk, hks in (_scanned(scan, pid, batches) if scan is not None
                                     else _decoded(batches, pks, types)):
                if chunk:
                    if scan is None:  # scanned pieces are sorted by this very order in this task (scan.py)
                        last = check_order(last, chunk, pid, hks)
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
            missing = bool(getattr(e, "missing_table", False))  # the table's, not a row's: no key
            key = None if missing else getattr(e, "key", None) or (_key_text(current) if current else None)
            count(False, run, t0)
            yield result_batch(pid, False, run.rows, run.stats, t0, str(e), table, key,
                               "missing_table" if missing else None)
            return
        count(True, run, t0)
        yield result_batch(pid, True, run.rows, run.stats, t0)
    return apply_partition


def _decoded(batches: Iterator[pa.RecordBatch], pks: Decoded, types: Decoded):
    """``(midx list, changes, group keys)`` of each Arrow batch the plan's partition delivers."""
    for batch in batches:
        midx, chunk = changes(batch, pks, types)
        yield midx, chunk, group_keys(batch)


def _scanned(scan, pid: int, batches: Iterator[pa.RecordBatch]):
    """The same pieces read from the round's files (:mod:`pipeline.job.scan`)."""
    from pipeline.job.scan import own_changes, pieces

    for _ in batches:  # the task's one number (pipeline/job/segment.py: scan_tasks)
        pass
    rows = own_changes(scan, pid)
    gc.freeze()  # the rows live until the task ends: the apply's collections need not walk them again
    try:
        yield from pieces(rows)
    finally:
        gc.unfreeze()


def _commit_batch(mapping) -> int:
    return int(getattr(mapping.spec, "commitBatch", 3000) or 3000)


def _key_text(change: Change) -> str:
    names = change.pk_names or tuple(change.data)[:1]
    return ", ".join(f"{n}={change.data.get(n)!r}" for n in names)
