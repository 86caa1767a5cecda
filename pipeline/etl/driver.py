"""The full-load Spark job's driver: key ranges -> executors -> result rows -> counts.

``sluice etl`` and ``sluice bootstrap`` load tables through the adapters' writers with the same
apply loop as ``sluice sync``. Here, on the driver: resolve the tables of the chosen mappings,
split each into key ranges (:mod:`pipeline.etl.ranges`, :func:`plan_loads`), and run one Spark
task per range (``spark.range(n, n)`` gives n partitions of one id each, ``mapInArrow`` runs
:func:`pipeline.etl.partition.load_function`, the executor side). While the job runs, the
executors' row counts arrive on :mod:`pipeline.etl.progress`, which logs rows, rows/s and an
ETA from the estimated row counts every few seconds. Final counts come from the tasks' result
rows, summed here per group and table (:class:`EtlSummary`); a range that did not load fails
the run (:class:`EtlFailed`) with its table, range and key.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from adapters.base import ApplyStats
from pipeline.config import Config
from pipeline.etl import keyless
from pipeline.etl import source as S
from pipeline.etl.partition import EtlContext, Unit, load_function
from pipeline.etl.plan import TableLoad, table_loads
from pipeline.etl.progress import open_server
from pipeline.job.group import GroupPlan
from pipeline.job.partition import JobContext
from pipeline.job.schema import RESULT_SCHEMA
from sluice_common.errors import SluiceError
from sluice_common.logs import get_logger

log = get_logger("etl")


class EtlFailed(SluiceError):
    """At least one range did not load."""

    exit_code = 1


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


def _source_database(plan: GroupPlan, midx: int) -> str | None:
    """The database of an ES mapping's main table, as the job's routes resolved it."""
    for r in plan.routes:
        if r.midx == midx:
            return r.database
    return None


def plan_loads(cfg: Config, plan: GroupPlan, midxs: list[int], params: tuple[str, ...], parts: int,
               replace_keyless: bool = False) -> tuple[TableLoad, ...]:
    conn = S.connect(cfg.source)
    try:
        loads: list[TableLoad] = []
        for midx in midxs:
            loads += table_loads(conn, plan.mappings[midx], midx, params, parts, _source_database(plan, midx),
                                 replace_keyless)
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
              partitions: int | None = None, progress_every: float = 5.0, check: bool = True,
              snapshot: Any = None) -> list[EtlSummary]:
    """Load the chosen mappings of several groups in one Spark job (one task per key range);
    one summary per group. Raises EtlFailed naming every range that did not load. ``snapshot``: a
    bootstrap's position P, from which the stream replays: a mirror's key-less tables are then
    loaded whole, and only count as loaded if the source wrote nothing since P (:mod:`.keyless`)."""
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
        for ld in plan_loads(cfg, plan, midxs, params, parts, snapshot is not None):
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
    keyless.check_targets(loads, [plan for plan, _ in groups], units)
    host = spark.conf.get("spark.driver.host", "127.0.0.1") or "127.0.0.1"
    server = open_server(host, sum(x.est_rows for x in loads), len(units), progress_every)
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
    if snapshot is not None:
        keyless.check_quiet(cfg, snapshot, loads)
    return summaries
