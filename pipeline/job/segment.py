"""One DML segment of a round as one Spark job (:func:`run_segment`), and its failure."""

from __future__ import annotations

import json
import re
import time
from typing import TYPE_CHECKING

from adapters.base import ApplyStats
from pipeline.job.accumulators import merge, new_counter
from pipeline.job.group import GroupPlan
from pipeline.job.partition import JobContext, apply_function
from pipeline.job.plan import partitioned_changes
from pipeline.job.reload import missing_table_error
from pipeline.job.scan import ScanPlan
from pipeline.job.schema import RESULT_SCHEMA
from sluice_common.errors import SluiceError
from sluice_common.logs import get_logger

if TYPE_CHECKING:
    from pipeline.job.driver import SyncSummary

log = get_logger("sync")


class ApplyFailed(SluiceError):
    """At least one partition did not commit; nothing was acked."""

    exit_code = 1


def run_segment(spark, dml, seg, plan: GroupPlan, ctx: JobContext, nparts: int, summary: SyncSummary,
                keys=None, in_order: bool = True, scan: ScanPlan | None = None) -> None:
    """One Spark job for one DML segment: the plan's partitions (:mod:`pipeline.job.plan`), or with
    ``scan`` one task per partition that reads the round's files itself (:mod:`pipeline.job.scan`)."""
    t0 = time.monotonic()
    changes = partitioned_changes(dml, seg, plan.routes, nparts, keys, in_order) if scan is None else None
    t_plan = time.monotonic() - t0
    counters = new_counter(spark)
    try:
        if scan is None:
            results = changes.mapInArrow(apply_function(ctx, counters), RESULT_SCHEMA).collect()
        else:
            results = scan_tasks(spark, nparts).mapPartitions(on_rdd(apply_function(ctx, counters, scan))).collect()
    except Exception as e:  # noqa: BLE001 - a lost executor, a killed task, a Spark failure
        first = str(e).strip().splitlines()[0][:500] if str(e).strip() else type(e).__name__
        poison = re.search(r"(poison record: [^\n]*?)(?:\. SQLSTATE|\n|$)", str(e))
        if poison:  # a Kafka record that is no Dml (pipeline/store/kafka/frame.py): where it is
            raise ApplyFailed(poison.group(1), hint="remove or fix the record (or move the group past it with "
                              "kafka-consumer-groups --reset-offsets), then sync again") from None
        raise ApplyFailed(f"the Spark job failed, nothing was acked: {first}",
                          hint="fix the cause and run sync again; replays are idempotent") from None
    merge(summary.executor, counters.value if counters is not None else None)
    failed = [r for r in results if not r["ok"]]
    for r in results:
        stats = json.loads(r["stats"] or "{}")
        part = ApplyStats()
        for name, counts in stats.items():
            getattr(part, name).update(counts)
        summary.stats.add(part)
        summary.rows += r["rows"] or 0
    secs = time.monotonic() - t0
    rows = sum(r["rows"] or 0 for r in results)
    worker = max((float(r["seconds"] or 0) for r in results), default=0.0)  # the slowest partition, in its worker
    log.info("segment", rows=rows, partitions=len(results), scan=scan is not None, seconds=round(secs, 2),
             plan_s=round(t_plan, 2),
             worker_s=round(worker, 2),
             rows_per_s=round(rows / secs) if secs else 0, failed=len(failed))
    if failed:
        lines = [_failure(plan, r) for r in failed]
        said = any("fix:" in (r["error"] or "") for r in failed)  # the partition's error says what to do
        raise ApplyFailed(f"{len(failed)} of {len(results)} partitions failed; no batch was acked:\n  "
                          + "\n  ".join(lines),
                          hint=None if said else "fix the cause and run sync again; replays are idempotent")


def _failure(plan: GroupPlan, r: dict) -> str:
    """A failed partition's line: where, and its error (a mirrored table the target lacks: with how
    to bring it over, :mod:`pipeline.job.reload`)."""
    if r["error_code"] == "missing_table":
        return (f"partition {r['partition']}: table {r['error_table']}: "
                + missing_table_error(plan, r["error"] or "", r["error_table"]))
    return f"partition {r['partition']}: table {r['error_table']} key {r['error_key']}: {r['error']}"


def scan_tasks(spark, nparts: int):
    """One task per partition for a scanned segment, as a plain RDD: its tasks read their rows
    themselves, so the job needs none of the SQL engine's planning, code generation or Arrow
    transfer (the driver's JVM spent ~2 CPU s less per backlog sync than with ``spark.range``)."""
    return spark.sparkContext.parallelize(range(nparts), nparts)


def on_rdd(fn):
    """The ``mapInArrow`` function ``fn`` as an RDD partition function: its result rows as dicts."""
    def run(numbers):
        for batch in fn(numbers):  # the scan drains the task's one number (pipeline/job/partition.py)
            yield from batch.to_pylist()
    return run
