"""What runs on an executor in a full load: one task per key range.

Each task pages through its range by key (:class:`~pipeline.etl.plan.TableLoad`), reading the
next pages on a second thread while the current one is written, turns each row into
``Change(kind="UPSERT")`` with capture's value strings, and applies chunks of ``commitBatch``
through the sync job's :class:`~pipeline.job.chunks.ChunkRunner` (writers from the registry,
one transaction per chunk, transient errors retried with backoff). A broken source connection
is reopened and the range continues after the last key read. It reports its running row
count to the driver (:mod:`pipeline.etl.progress`) and returns exactly one result row
(:func:`pipeline.job.partition.result_batch`): counts, or the error with its table and key.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa

from adapters.base import Change
from pipeline.config import SourceConfig
from pipeline.etl import source as S
from pipeline.etl.plan import TableLoad
from pipeline.etl.progress import ProgressSink
from pipeline.etl.values import row_decoder
from pipeline.job.chunks import ChunkRunner
from pipeline.job.partition import JobContext, result_batch
from pipeline.retry import doubling, retrying
from sluice_common.errors import SluiceError, TransientError
from sluice_common.logs import worker_sink

READ_RETRIES = 5


@dataclass(frozen=True)
class Unit:
    """One Spark task: one key range of one table load."""

    uid: int
    load: int      # index into the job's loads
    rng: int       # index into that load's ranges
    group: int = 0  # index into the job's groups (EtlContext.jobs)


@dataclass(frozen=True)
class EtlContext:
    """Everything an executor needs (picklable)."""

    jobs: tuple[JobContext, ...]   # one per group (mappings and targets), by Unit.group
    source: SourceConfig
    loads: tuple[TableLoad, ...]
    units: tuple[Unit, ...]
    progress_addr: tuple[str, int] | None = None


def read_pages(ctx: EtlContext, load: TableLoad, rng) -> Iterator[list[tuple]]:
    """Pages of raw rows of one range, by key. A broken connection is reopened and the page read
    again, ``READ_RETRIES`` times in a row at most (waits 1, 2, 4, 8, 10 s); a table without a key
    is one streaming read, not tried again (it could not resume)."""
    nk = len(load.meta.pk)
    conn = None

    def read_page(after: tuple | None) -> list[tuple]:
        nonlocal conn
        try:
            if conn is None:
                conn = S.connect(ctx.source, stream=True)
            sql, params = load.select_sql(rng, after, paged=True)
            with conn.cursor() as cur:
                cur.execute(sql, params)
                return cur.fetchall()
        except Exception:
            _close(conn)  # the next try opens a new connection
            conn = None
            raise

    try:
        if not nk:  # no key: one streaming read of the whole table
            try:
                conn = S.connect(ctx.source, stream=True)
                sql, params = load.select_sql(rng, None, paged=False)
                with conn.cursor() as cur:
                    cur.execute(sql, params)
                    while page := cur.fetchmany(load.read_batch):
                        yield page
                return
            except Exception as e:  # noqa: BLE001 - classified here
                raise _read_error(load, rng, e) from None
        reads = retrying(attempts=READ_RETRIES + 1, on=_broken, wait=doubling(1.0, 10.0))
        after = None
        while True:
            try:
                page = reads(read_page, after)
            except Exception as e:  # noqa: BLE001 - classified here
                raise _read_error(load, rng, e) from None
            if not page:
                return
            yield page
            if len(page) < load.read_batch:
                return
            after = tuple(page[-1][:nk])
    finally:
        if conn is not None:
            conn.close()


def _broken(e: BaseException) -> bool:
    """A source read worth another try on a new connection (the connection broke)."""
    return isinstance(e, Exception) and (S.is_transient(e) or isinstance(e, TransientError))


def _read_error(load: TableLoad, rng, e: Exception) -> SluiceError:
    if isinstance(e, SluiceError):
        return e
    return SluiceError(f"reading {load.meta.label} {rng} from the source failed: {e}")


def _close(conn) -> None:
    if conn is not None:
        try:
            conn.close()
        except Exception:  # noqa: BLE001 - the connection is already broken
            pass


def _prefetched(pages: Iterator[list[tuple]], depth: int = 2) -> Iterator[list[tuple]]:
    """Read the next pages in a thread while the caller writes the current one: the source's
    and the target's round trips overlap (both release the GIL while waiting)."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    end = object()

    def produce() -> None:
        try:
            for page in pages:
                while not stop.is_set():
                    try:
                        q.put(page, timeout=0.2)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    break
            q.put(end)
        except BaseException as e:  # noqa: BLE001 - handed to the consumer
            q.put(e)
        finally:
            close = getattr(pages, "close", None)
            if close is not None and stop.is_set():
                close()

    t = threading.Thread(target=produce, name="etl-reader", daemon=True)
    t.start()
    try:
        while True:
            item = q.get()
            if item is end:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        while t.is_alive():
            try:
                q.get_nowait()
            except queue.Empty:
                t.join(timeout=0.2)


def _load_unit(ctx: EtlContext, unit: Unit, pid: int) -> pa.RecordBatch:
    load = ctx.loads[unit.load]
    rng = load.ranges[unit.rng]
    meta = load.meta
    nk = len(meta.pk)
    decode = row_decoder(meta.columns)
    types = meta.mysql_types()
    db, table, pk = meta.database, meta.table, meta.pk
    t0 = time.monotonic()
    run = ChunkRunner(ctx.jobs[unit.group], pid)
    progress = ProgressSink(ctx.progress_addr, unit.uid)
    read = 0
    current: Change | None = None
    kind = "INSERT" if load.replace else "UPSERT"
    try:
        buf: list[Change] = []
        if load.replace:  # a mirror's key-less table: emptied, then every row inserted (TableLoad.replace)
            run.flush(load.midx, [Change("TRUNCATE", db, table, {})])
        for page in _prefetched(read_pages(ctx, load, rng)):
            for raw in page:
                current = Change(kind, db, table, decode(raw[nk:]), None, pk, types)
                buf.append(current)
                if len(buf) >= load.commit_batch:
                    run.flush(load.midx, buf)
                    buf = []
                    progress.send(run.rows)
            read += len(page)
        if buf:
            run.flush(load.midx, buf)
        run.close()
        progress.send(run.rows, force=True)
    except Exception as e:  # noqa: BLE001 - every failure becomes this range's result
        run.abort()
        if not isinstance(e, SluiceError):
            e = SluiceError(f"{type(e).__name__}: {e}")
        key = getattr(e, "key", None) or (", ".join(f"{n}={current.data.get(n)!r}" for n in pk) if current else None)
        table = getattr(e, "table", None) or meta.label
        return result_batch(unit.uid, False, run.rows, run.stats, t0, str(e), table, key)
    finally:
        progress.close()
    return result_batch(unit.uid, True, read, run.stats, t0)


def load_function(ctx: EtlContext):
    """The ``mapInArrow`` function: each input row is a unit id."""
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        worker_sink()  # a line the worker cannot write is dropped, never this task's error
        tc = TaskContext.get()
        pid = tc.partitionId() if tc else 0
        for batch in batches:
            for uid in batch.column(0).to_pylist():
                yield _load_unit(ctx, ctx.units[uid], pid)
    return run
