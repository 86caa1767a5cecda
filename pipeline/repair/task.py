"""What runs on an executor in a repair: one Spark task per key range of a table.

The task walks its range in chunks of ``chunk`` source rows by key (each chunk's upper bound is
the key ``chunk`` rows on: one indexed read). Each chunk is compared without a lock; one that
differs is compared again and repaired under the group's apply lock with a source snapshot
(:class:`pipeline.repair.guard.ChunkGuard`), its writes committed before the lock is released.
A transient failure (the target or the source restarting) repeats the chunk from its lock. The
task reports its chunk count to the driver's progress line and returns one result row.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace

import pyarrow as pa

from pipeline.config import SourceConfig
from pipeline.etl.progress import ProgressSink
from pipeline.job.partition import JobContext
from sluice_common.chunksql import Side, range_clause
from sluice_common.errors import SluiceError
from sluice_common.logs import worker_sink

from .guard import ChunkGuard, typed_connection
from .plan import RepairTable
from .rdb import ChunkCounts

RESULT_ARROW = pa.schema([("uid", pa.int64()), ("ok", pa.bool_()), ("result", pa.string()),
                          ("error", pa.string())])
RETRIES = 5
MAX_KEYS = 20


@dataclass(frozen=True)
class RepairUnit:
    """One Spark task: one key range of one table."""

    uid: int
    table: int   # index into RepairContext.tables
    rng: int     # index into that table's ranges


@dataclass(frozen=True)
class RepairContext:
    """Everything an executor needs (picklable)."""

    job: JobContext
    source: SourceConfig
    flavor: str
    group: str
    lock_path: str | None
    tables: tuple[RepairTable, ...]
    units: tuple[RepairUnit, ...]
    chunk: int = 1000
    dry_run: bool = False
    progress_addr: tuple[str, int] | None = None


@dataclass
class UnitResult:
    chunks: int = 0
    differing: int = 0
    repaired: int = 0
    missing: int = 0
    changed: int = 0
    extra: int = 0
    upserted: int = 0
    deleted: int = 0
    lock_wait: float = 0.0
    lock_held: float = 0.0
    retries: int = 0
    seconds: float = 0.0
    keys: list | None = None

    def add(self, c: ChunkCounts) -> None:
        self.missing += c.missing
        self.changed += c.changed
        self.extra += c.extra
        self.upserted += c.upserted
        self.deleted += c.deleted
        for k in (c.keys or [])[: max(0, MAX_KEYS - len(self.keys or []))]:
            self.keys = [*(self.keys or []), _key_text(k)]


def _key_text(k) -> object:
    k = k[0] if isinstance(k, tuple) and len(k) == 1 else k
    if isinstance(k, tuple):
        return [x.decode("latin-1") if isinstance(x, bytes) else x for x in k]
    return k.decode("latin-1") if isinstance(k, bytes) else k


def chunks_of(src: Side, table: str, keys: list[str], lo: tuple | None, hi: tuple | None, size: int
              ) -> Iterator[tuple[tuple | None, tuple | None]]:
    """``(lo, hi)`` bounds of successive chunks of ``size`` source rows covering ``lo < key <= hi``."""
    kc = ", ".join(src.q(k) for k in keys)
    last = lo
    while True:
        where, params = range_clause(src, keys, last, hi)
        rows = src.rows(f"SELECT {kc} FROM {table} WHERE {where} ORDER BY {kc} LIMIT 1 OFFSET {size - 1}", params)
        if not rows or (hi is not None and tuple(rows[0]) == tuple(hi)):
            yield last, hi
            return
        b = tuple(rows[0])
        yield last, b
        last = b


def _comparer(ctx: RepairContext, t: RepairTable, conn):
    from adapters.registry import capabilities

    kind, target = ctx.job.targets[ctx.job.mapping_target[t.midx]]
    if capabilities(kind).compare == "checksums":
        from .rdb import RdbChunks

        return RdbChunks(t, target, conn)
    from .docs import DocChunks

    return DocChunks(t, target, ctx.job.mappings[t.midx], conn)


def _run_unit(ctx: RepairContext, unit: RepairUnit, pid: int) -> pa.RecordBatch:
    from pipeline.job.chunks import options_of
    from pipeline.writers import Writers

    t = ctx.tables[unit.table]
    rng = t.ranges[unit.rng]
    t0 = time.monotonic()
    res = UnitResult(keys=[])
    guard = ChunkGuard(ctx.lock_path, ctx.source, ctx.flavor, ctx.group)
    # the job's lineage and epoch; a chunk's tries are the repair's own (RETRIES, waits up to 10 s),
    # and each begins with ``open`` (the writer's connection also reads between commits)
    runner = Writers(ctx.job, replace(options_of(ctx.job, pid), retries=RETRIES, backoff_max=10.0, begin_each=True))
    progress = ProgressSink(ctx.progress_addr, unit.uid)
    conn = comp = None
    where = f"{t.label} {rng}"
    try:
        conn = typed_connection(ctx.source)
        comp = _comparer(ctx, t, conn)
        src = Side(conn, "mysql")
        st = src.table(t.meta.database, t.meta.table)
        mapping = ctx.job.mappings[t.midx]
        for lo, hi in chunks_of(src, st, list(t.meta.pk), rng.lo, rng.hi, ctx.chunk):
            where = f"{t.label} chunk ({_bound(lo, '-inf')}, {_bound(hi, '+inf')}]"
            res.chunks += 1
            if ctx.dry_run:
                c = comp.diff(lo, hi)
                if c.missing or c.changed or c.extra:
                    res.differing += 1
                    res.add(c)
            elif comp.differs(lo, hi):
                res.differing += 1
                c = _repair_chunk(guard, runner, comp, t.midx, mapping, lo, hi, res)
                if c.upserted or c.deleted:
                    res.repaired += 1
                res.add(c)
            progress.send(res.chunks)
            guard.tick()  # an equal chunk after a repaired one: the lock goes back when its lease is over
        guard.close()
        runner.close()
        progress.send(res.chunks, force=True)
    except Exception as e:  # noqa: BLE001 - every failure becomes this range's result
        runner.abort()
        msg = e.message + (f"\n  fix: {e.hint}" if e.hint else "") if isinstance(e, SluiceError) \
            else f"{type(e).__name__}: {e}"
        return _result(unit.uid, False, res, guard, t0, f"{where}: {msg}")
    finally:
        progress.close()
        guard.close()
        if comp is not None:
            comp.close()
        if conn is not None:
            conn.close()
    return _result(unit.uid, True, res, guard, t0)


def _repair_chunk(guard: ChunkGuard, runner, comp, midx: int, mapping, lo, hi, res: UnitResult) -> ChunkCounts:
    """Repair one chunk under the lock, committed before the lock is released (``hold``); a
    TransientError drops the writer and repeats the chunk from its lock (``RETRIES`` tries, waits
    doubling from 0.5 s up to 10 s, counted in ``res.retries``)."""

    def count(_attempt: int, _e: BaseException, _delay: float) -> None:
        res.retries += 1

    return runner.transaction(midx, lambda w, snap: comp.repair(snap, w, mapping, lo, hi), before_sleep=count,
                              hold=guard.hold)


def _bound(b, open_end: str) -> str:
    if b is None:
        return open_end
    return ",".join(x.decode("latin-1") if isinstance(x, bytes) else str(x) for x in b)


def _result(uid: int, ok: bool, res: UnitResult, guard: ChunkGuard, t0: float, error: str | None = None
            ) -> pa.RecordBatch:
    res.lock_wait, res.lock_held = round(guard.waited, 3), round(guard.held, 3)
    res.seconds = round(time.monotonic() - t0, 3)
    row = {"uid": uid, "ok": ok, "result": json.dumps(asdict(res), default=str), "error": error}
    return pa.RecordBatch.from_pylist([row], schema=RESULT_ARROW)


def repair_function(ctx: RepairContext):
    """The ``mapInArrow`` function: each input row is a unit id."""
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        worker_sink()  # a line the worker cannot write is dropped, never this task's error
        tc = TaskContext.get()
        pid = tc.partitionId() if tc else 0
        for batch in batches:
            for uid in batch.column(0).to_pylist():
                yield _run_unit(ctx, ctx.units[uid], pid)
    return run
