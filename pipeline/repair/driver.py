"""The repair job's driver: tables -> key ranges -> executors -> summary (docs/repair.md).

``run_repair`` resolves the chosen tables of one group (:mod:`pipeline.repair.plan`), reads the
source's binlog position (before any chunk is read: what a waiver may cover), runs one Spark task
per key range (:mod:`pipeline.repair.task`, the full load's ``spark.range`` + ``mapInArrow``
split), logs chunks, chunks/s and an ETA while it runs, and sums the tasks' results per table.
A range that failed fails the run (:class:`RepairFailed`) naming table, chunk and error; what the
other ranges repaired stays repaired (each chunk committed on its own), and running the command
again repairs what is left. A table repaired completely is recorded (:mod:`pipeline.repair.record`).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from typing import Any

from pipeline.capture.server_check import current_position, inspect_server
from pipeline.config import Config
from pipeline.etl.progress import ProgressServer
from pipeline.job.partition import JobContext
from sluice_common.errors import SluiceError
from sluice_common.logs import get_logger

from .guard import typed_connection
from .plan import RepairTable, plan_tables
from .task import RESULT_ARROW, RepairContext, RepairUnit, repair_function

log = get_logger("repair")


class RepairFailed(SluiceError):
    """At least one key range could not be compared or repaired."""

    exit_code = 1


@dataclass
class TableReport:
    """One table's totals (summed over its ranges)."""

    mapping: str
    source: str
    target: str
    chunks: int = 0
    differing: int = 0
    repaired: int = 0
    missing: int = 0
    changed: int = 0
    extra: int = 0
    upserted: int = 0
    deleted: int = 0
    ranges: int = 0
    failed: int = 0
    lock_wait: float = 0.0
    lock_held: float = 0.0
    keys: list = field(default_factory=list)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class RepairSummary:
    group: str
    dry_run: bool
    position: dict | None = None
    tables: dict[str, TableReport] = field(default_factory=dict)
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)
    waived: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"group": self.group, "dry_run": self.dry_run, "position": self.position,
                "seconds": round(self.seconds, 3), "errors": self.errors, "waived": self.waived,
                "tables": {k: t.as_dict() for k, t in self.tables.items()}}


class _Progress(ProgressServer):
    """The full load's progress channel, counting chunks (of ``chunk`` rows: rows/s estimated)."""

    chunk = 1000

    def report(self, now: float) -> None:
        done = sum(self.done.values())
        secs = now - self.t0
        rate = done / secs if secs > 0 else 0.0
        eta = round(max(self.total - done, 0) / rate) if rate > 0 else None
        log.info("repair progress", chunks=done, est_chunks=self.total, chunks_per_s=round(rate, 1),
                 rows_per_s=round(rate * self.chunk), eta_s=eta, ranges=f"{len(self.done)}/{self.nunits} started")


def lock_path(cfg: Config, group: str) -> str | None:
    """The group's apply lock file (None: the deployment has no store yet, so nothing applies)."""
    if cfg.store.kind != "kafka" and not cfg.store_dir().exists():
        return None
    from pipeline.store import open_store

    store = open_store(cfg, create=False)
    return str(store.lock_dir / f"apply.{group}.lock")


def run_repair(cfg: Config, plan: Any, spark: Any, *, midxs: list[int] | None = None,
               tables: list[str] | None = None, partitions: int | None = None, chunk: int = 1000,
               dry_run: bool = False, progress_every: float = 5.0) -> RepairSummary:
    """Compare and repair the chosen mappings/tables of one group (see the module docstring)."""
    t0 = time.monotonic()
    parts = partitions or cfg.spark.partitions
    midxs = list(range(len(plan.mappings))) if midxs is None else midxs
    conn = typed_connection(cfg.source)
    try:
        flavor = inspect_server(cfg.source, conn).flavor
        position = current_position(conn, flavor).to_dict()  # before any chunk is read
        chosen = plan_tables(conn, plan, midxs, tables, parts)
    finally:
        conn.close()
    summary = RepairSummary(plan.group_id, dry_run, position)
    units: list[RepairUnit] = []
    for ti, t in enumerate(chosen):
        summary.tables[t.label + _suffix(t, chosen)] = rep = TableReport(t.mapping_file, t.label, t.target_label,
                                                                         ranges=len(t.ranges))
        if t.problem:
            rep.failed += 1
            summary.errors.append(t.problem)
            log.error("table not repaired", table=t.label, error=t.problem.splitlines()[0])
            continue
        for ri in range(len(t.ranges)):
            units.append(RepairUnit(len(units), ti, ri))
        log.info("repair table", group=plan.group_id, mapping=t.mapping_file, table=t.label, target=t.target_label,
                 est_rows=t.meta.est_rows, ranges=len(t.ranges), dry_run=dry_run)
    if not units:
        return _finish(cfg, plan, summary, chosen, position, dry_run, 0, t0)
    est_chunks = sum(max(1, math.ceil(t.meta.est_rows / chunk)) for t in chosen)
    server = _open_progress(spark, est_chunks, len(units), progress_every)
    if server is not None:
        server.chunk = chunk
    ctx = RepairContext(JobContext(plan.mappings, plan.mapping_target, plan.targets), cfg.source, flavor,
                        plan.group_id, None if dry_run else lock_path(cfg, plan.group_id), tuple(chosen),
                        tuple(units), chunk, dry_run, server.addr if server else None)
    from pyspark.sql.types import BooleanType, LongType, StringType, StructField, StructType

    schema = StructType([StructField("uid", LongType()), StructField("ok", BooleanType()),
                         StructField("result", StringType()), StructField("error", StringType())])
    assert [f.name for f in schema.fields] == RESULT_ARROW.names
    df = spark.range(0, len(units), 1, len(units))
    try:
        results = df.mapInArrow(repair_function(ctx), schema).collect()
    except Exception as e:  # noqa: BLE001 - a lost executor, a killed task, a Spark failure
        first = str(e).strip().splitlines()[0][:500] if str(e).strip() else type(e).__name__
        raise RepairFailed(f"the Spark job failed: {first}",
                           hint="fix the cause and run the repair again; chunks already repaired stay so") from None
    finally:
        if server is not None:
            server.report(time.monotonic())
            server.close()
    for r in results:
        unit = units[r["uid"]]
        t = chosen[unit.table]
        rep = summary.tables[t.label + _suffix(t, chosen)]
        got = json.loads(r["result"] or "{}")
        for name in ("chunks", "differing", "repaired", "missing", "changed", "extra", "upserted", "deleted"):
            setattr(rep, name, getattr(rep, name) + int(got.get(name) or 0))
        rep.lock_wait += float(got.get("lock_wait") or 0)
        rep.lock_held += float(got.get("lock_held") or 0)
        rep.keys += (got.get("keys") or [])[: max(0, 20 - len(rep.keys))]
        if not r["ok"]:
            rep.failed += 1
            summary.errors.append(r["error"])
    return _finish(cfg, plan, summary, chosen, position, dry_run, len(units), t0)


def _finish(cfg: Config, plan: Any, summary: RepairSummary, chosen: list[RepairTable], position: dict,
            dry_run: bool, nunits: int, t0: float) -> RepairSummary:
    """Log the tables, record the ones repaired completely (waivers), raise if anything failed."""
    summary.seconds = time.monotonic() - t0
    for name, rep in summary.tables.items():
        log.info("repair table done", group=plan.group_id, table=name, chunks=rep.chunks, differing=rep.differing,
                 repaired=rep.repaired, upserted=rep.upserted, deleted=rep.deleted, failed_ranges=rep.failed)
    if not dry_run:
        from .record import record_repaired

        done: dict[tuple[str, str], list[str]] = {}
        failed = {(t.meta.database, t.meta.table) for t in chosen
                  if summary.tables[t.label + _suffix(t, chosen)].failed}
        for t in chosen:
            key = (t.meta.database, t.meta.table)
            if key not in failed:
                done.setdefault(key, []).append(str(t.mapping_file))
        summary.waived = record_repaired(cfg, plan.group_id, done, position)
    if summary.errors:
        err = RepairFailed(f"{len(summary.errors)} table(s) or key range(s) of {len(chosen)} table(s) failed:\n  "
                           + "\n  ".join(summary.errors[:20]),
                           hint=None if all("fix:" in e for e in summary.errors[:20])  # each says what to do
                           else "fix the cause and run the repair again; chunks already repaired stay so")
        err.summary = summary  # what the other tables and ranges did, for the command's report
        raise err
    return summary


def _suffix(t: RepairTable, chosen: list[RepairTable]) -> str:
    """Two mappings of the group over one table are reported apart."""
    same = [x for x in chosen if x.label == t.label]
    return "" if len(same) == 1 else f" ({t.mapping_file})"


def _open_progress(spark: Any, total: int, units: int, every: float) -> _Progress | None:
    host = spark.conf.get("spark.driver.host", "127.0.0.1") or "127.0.0.1"
    try:
        return _Progress(host, total, units, every).start()
    except OSError:
        return None
