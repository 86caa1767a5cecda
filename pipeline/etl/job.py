"""The full-load Spark job: key ranges -> executors -> SELECT pages -> UPSERT changes ->
the adapters' writers (the same apply loop as ``sluice sync``).

Driver: resolve the tables of the chosen mappings, split each into key ranges
(:mod:`pipeline.etl.ranges`), and run one Spark task per range (``spark.range(n, n)`` gives
n partitions of one id each, ``mapInArrow`` runs the loader). Executors: page through the
range by key (:class:`~pipeline.etl.plan.TableLoad`), turn each row into
``Change(kind="UPSERT")`` with capture's value strings, and apply chunks of ``commitBatch``
through :class:`pipeline.job.chunks.ChunkRunner` (writers from the registry, one
transaction per chunk, transient errors retried with backoff). A broken source connection
is reopened and the range continues after the last key read.

Progress: executors send ``<range id> <rows>`` UDP datagrams to the driver (best effort:
a lost datagram only delays the progress line); the driver logs rows, rows/s and an ETA
from the estimated row counts every few seconds. Final counts come from the task results.
"""

from __future__ import annotations

import json
import queue
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa

from adapters.base import ApplyStats, Change
from pipeline.config import Config, SourceConfig
from pipeline.errors import SluiceError, TransientError
from pipeline.etl import source as S
from pipeline.etl.plan import TableLoad, table_loads
from pipeline.etl.values import row_decoder
from pipeline.job.chunks import ChunkRunner
from pipeline.job.group import GroupPlan
from pipeline.job.partition import RESULT_ARROW, JobContext
from pipeline.job.schema import RESULT_SCHEMA
from pipeline.logs import get_logger

log = get_logger("etl")
READ_RETRIES = 5


class EtlFailed(SluiceError):
    """At least one range did not load."""

    exit_code = 1


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


@dataclass
class TableCount:
    rows: int = 0
    written: int = 0
    est_rows: int = 0
    ranges: int = 0
    seconds: float = 0.0


@dataclass
class EtlSummary:
    """What one load did: per-table counts (``db.table`` -> counts), totals and time."""

    group: str
    tables: dict[str, TableCount] = field(default_factory=dict)
    seconds: float = 0.0
    stats: ApplyStats = field(default_factory=ApplyStats)

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.tables.values())

    def as_dict(self) -> dict:
        return {"group": self.group, "rows": self.rows, "seconds": round(self.seconds, 3),
                "rows_per_s": round(self.rows / self.seconds, 1) if self.seconds else 0.0,
                "tables": {k: {"rows": t.rows, "written": t.written, "ranges": t.ranges}
                           for k, t in sorted(self.tables.items())},
                **self.stats.as_dict()}


# -- executor side -------------------------------------------------------------------------------
class _Progress:
    def __init__(self, addr: tuple[str, int] | None, uid: int):
        self.addr, self.uid = addr, uid
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM) if addr else None
        self.last = 0.0

    def send(self, rows: int, force: bool = False) -> None:
        if self.sock is None:
            return
        now = time.monotonic()
        if not force and now - self.last < 0.5:
            return
        self.last = now
        try:
            self.sock.sendto(f"{self.uid} {rows}".encode(), self.addr)
        except OSError:
            pass  # progress is best effort

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()


def _pages(ctx: EtlContext, load: TableLoad, rng) -> Iterator[list[tuple]]:
    """Pages of raw rows of one range, by key; reconnects after a broken connection."""
    nk = len(load.meta.pk)
    after = None
    attempt = 0
    conn = None
    try:
        while True:
            try:
                if conn is None:
                    conn = S.connect(ctx.source, stream=True)
                sql, params = load.select_sql(rng, after, paged=bool(nk))
                with conn.cursor() as cur:
                    cur.execute(sql, params)
                    if not nk:  # no key: one streaming read of the whole table
                        while page := cur.fetchmany(load.read_batch):
                            yield page
                        return
                    page = cur.fetchall()
                attempt = 0
            except Exception as e:  # noqa: BLE001 - classified here
                if not (S.is_transient(e) or isinstance(e, TransientError)) or attempt >= READ_RETRIES or not nk:
                    if isinstance(e, SluiceError):
                        raise
                    raise SluiceError(f"reading {load.meta.label} {rng} from the source failed: {e}") from None
                attempt += 1
                if conn is not None:
                    try:
                        conn.close()
                    except Exception:  # noqa: BLE001
                        pass
                conn = None
                time.sleep(min(10.0, 0.5 * 2 ** attempt))
                continue
            if not page:
                return
            yield page
            if len(page) < load.read_batch:
                return
            after = tuple(page[-1][:nk])
    finally:
        if conn is not None:
            conn.close()


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


def _load_unit(ctx: EtlContext, unit: Unit, pid: int) -> dict:
    load = ctx.loads[unit.load]
    rng = load.ranges[unit.rng]
    meta = load.meta
    nk = len(meta.pk)
    decode = row_decoder(meta.columns)
    types = meta.mysql_types()
    db, table, pk = meta.database, meta.table, meta.pk
    t0 = time.monotonic()
    run = ChunkRunner(ctx.jobs[unit.group], pid)
    progress = _Progress(ctx.progress_addr, unit.uid)
    read = 0
    current: Change | None = None
    try:
        buf: list[Change] = []
        for page in _prefetched(_pages(ctx, load, rng)):
            for raw in page:
                current = Change("UPSERT", db, table, decode(raw[nk:]), None, pk, types)
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
        return _row(unit.uid, False, run.rows, run.stats, t0, str(e), getattr(e, "table", None) or meta.label, key)
    finally:
        progress.close()
    return _row(unit.uid, True, read, run.stats, t0)


def _row(uid: int, ok: bool, rows: int, stats: ApplyStats, t0: float, error: str | None = None,
         table: str | None = None, key: str | None = None) -> dict:
    return {"partition": uid, "ok": ok, "rows": rows, "stats": json.dumps(stats.as_dict()), "error": error,
            "error_table": table, "error_key": key, "seconds": f"{time.monotonic() - t0:.3f}"}


def load_function(ctx: EtlContext):
    """The ``mapInArrow`` function: each input row is a unit id."""
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        tc = TaskContext.get()
        pid = tc.partitionId() if tc else 0
        for batch in batches:
            for uid in batch.column(0).to_pylist():
                row = _load_unit(ctx, ctx.units[uid], pid)
                yield pa.RecordBatch.from_pylist([row], schema=RESULT_ARROW)
    return run


# -- driver side ---------------------------------------------------------------------------------
class _ProgressServer:
    """Receives the executors' progress datagrams and logs a line every ``every`` seconds."""

    def __init__(self, host: str, loads: tuple[TableLoad, ...], units: tuple[Unit, ...], every: float):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((host, 0))
        self.sock.settimeout(0.5)
        self.addr = (host, self.sock.getsockname()[1])
        self.total = sum(x.est_rows for x in loads)
        self.nunits = len(units)
        self.every = every
        self.done: dict[int, int] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="etl-progress", daemon=True)
        self.t0 = time.monotonic()

    def start(self) -> _ProgressServer:
        self.thread.start()
        return self

    def _loop(self) -> None:
        last = time.monotonic()
        while not self.stop.is_set():
            try:
                data = self.sock.recv(256)
                uid, rows = (int(x) for x in data.split())
                self.done[uid] = max(self.done.get(uid, 0), rows)
            except (TimeoutError, ValueError, OSError):
                pass
            now = time.monotonic()
            if now - last >= self.every:
                last = now
                self.report(now)

    def report(self, now: float) -> None:
        rows = sum(self.done.values())
        secs = now - self.t0
        rate = rows / secs if secs > 0 else 0.0
        left = max(self.total - rows, 0)
        eta = round(left / rate) if rate > 0 else None
        log.info("etl progress", rows=rows, est_rows=self.total, rows_per_s=round(rate),
                 eta_s=eta, ranges=f"{len(self.done)}/{self.nunits} started")

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=2)
        self.sock.close()


def _source_database(plan: GroupPlan, midx: int) -> str | None:
    """The database of an ES mapping's main table, as the job's routes resolved it."""
    for r in plan.routes:
        if r.midx == midx:
            return r.database
    return None


def plan_loads(cfg: Config, plan: GroupPlan, midxs: list[int], params: tuple[str, ...], parts: int
               ) -> tuple[TableLoad, ...]:
    conn = S.connect(cfg.source)
    try:
        loads: list[TableLoad] = []
        for midx in midxs:
            loads += table_loads(conn, plan.mappings[midx], midx, params, parts, _source_database(plan, midx))
        return tuple(loads)
    finally:
        conn.close()


def run_etl(cfg: Config, plan: GroupPlan, spark, *, midxs: list[int] | None = None,
            params: tuple[str, ...] = (), partitions: int | None = None, progress_every: float = 5.0,
            check: bool = True) -> EtlSummary:
    """Load the chosen mappings of a group (all when ``midxs`` is None) through Spark."""
    return run_loads(cfg, [(plan, midxs)], spark, params=params, partitions=partitions,
                     progress_every=progress_every, check=check)[0]


def run_loads(cfg: Config, groups: list[tuple[GroupPlan, list[int] | None]], spark, *, params: tuple[str, ...] = (),
              partitions: int | None = None, progress_every: float = 5.0, check: bool = True) -> list[EtlSummary]:
    """Load the chosen mappings of several groups in one Spark job (one task per key range);
    one summary per group. Raises EtlFailed naming every range that did not load."""
    if check:
        for plan, _ in groups:
            plan.check()
    parts = partitions or cfg.spark.partitions
    t0 = time.monotonic()
    loads: list[TableLoad] = []
    units: list[Unit] = []
    summaries = [EtlSummary(plan.group_id) for plan, _ in groups]
    for gi, (plan, midxs) in enumerate(groups):
        midxs = list(range(len(plan.mappings))) if midxs is None else midxs
        for ld in plan_loads(cfg, plan, midxs, params, parts):
            for ri in range(len(ld.ranges)):
                units.append(Unit(len(units), len(loads), ri, gi))
            loads.append(ld)
            tc = summaries[gi].tables.setdefault(ld.meta.label, TableCount())
            tc.est_rows += ld.est_rows
            tc.ranges += len(ld.ranges)
            log.info("etl table", group=plan.group_id, mapping=ld.mapping_file, table=ld.meta.label,
                     est_rows=ld.est_rows, ranges=len(ld.ranges), condition=ld.condition)
    if not units:
        return summaries
    host = spark.conf.get("spark.driver.host", "127.0.0.1") or "127.0.0.1"
    try:
        server = _ProgressServer(host, tuple(loads), tuple(units), progress_every).start()
    except OSError:
        server = None
    jobs = tuple(JobContext(plan.mappings, plan.mapping_target, plan.targets) for plan, _ in groups)
    ctx = EtlContext(jobs, cfg.source, tuple(loads), tuple(units), server.addr if server else None)
    df = spark.range(0, len(units), 1, len(units))
    try:
        results = df.mapInArrow(load_function(ctx), RESULT_SCHEMA).collect()
    except Exception as e:  # noqa: BLE001 - a lost executor, a killed task, a Spark failure
        first = str(e).strip().splitlines()[0][:500] if str(e).strip() else type(e).__name__
        raise EtlFailed(f"the Spark job failed: {first}",
                        hint="fix the cause and run the load again; it overwrites rows (upsert)") from None
    finally:
        if server is not None:
            server.report(time.monotonic())
            server.close()
    failed = []
    for r in results:
        unit = units[r["partition"]]
        ld = loads[unit.load]
        summary = summaries[unit.group]
        tc = summary.tables[ld.meta.label]
        st = ApplyStats()
        for name, counts in json.loads(r["stats"] or "{}").items():
            getattr(st, name).update(counts)
        summary.stats.add(st)
        if r["ok"]:
            tc.rows += r["rows"] or 0
        else:
            failed.append(f"group {summary.group} table {r['error_table']} range {ld.ranges[unit.rng]} "
                          f"key {r['error_key']}: {r['error']}")
        tc.written += sum(st.inserted.values()) + sum(st.updated.values())
        tc.seconds = max(tc.seconds, float(r["seconds"] or 0))
    secs = time.monotonic() - t0
    for summary in summaries:
        summary.seconds = secs
        for name, tc in sorted(summary.tables.items()):
            log.info("etl table done", group=summary.group, table=name, rows=tc.rows, written=tc.written,
                     ranges=tc.ranges)
    rows = sum(s.rows for s in summaries)
    log.info("etl done", groups=",".join(s.group for s in summaries), rows=rows, seconds=round(secs, 2),
             rows_per_s=round(rows / secs) if secs else 0, failed=len(failed))
    if failed:
        raise EtlFailed(f"{len(failed)} of {len(units)} key ranges failed to load:\n  " + "\n  ".join(failed[:20]),
                        hint="fix the cause and run the load again; it overwrites rows (upsert)")
    return summaries
