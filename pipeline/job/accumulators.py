"""Spark accumulators for executor-side counts of a sync.

Each partition adds one flat ``{name: number}`` dict when it finishes (committed or not):
``partitions``, ``failed_partitions``, ``rows`` (changes committed), ``inserted``,
``updated``, ``deleted``, ``skipped``, ``dead_lettered``, ``missed``, ``retries`` (chunks
applied again after a transient error) and ``apply_seconds`` (time spent in partitions,
summed). The driver reads the merged value after the job.

The per-partition result rows stay the source of truth for the ack decision and for the
per-table counts: Spark applies accumulator updates made inside a transformation (here
``mapInArrow``, or a scanned segment's RDD) once per *successful task attempt*, so a stage
that is re-run (a lost executor's shuffle output, speculation) can count a partition twice, while the driver
collects exactly one result row per partition of the job that succeeded. The accumulator
totals are reported next to them (``executor`` in the sync summary and the metrics) as the
executors' own view; a difference means tasks were re-run.
"""

from __future__ import annotations

from typing import Any

from pyspark.accumulators import AccumulatorParam

from adapters.base import ApplyStats

KINDS = ApplyStats.KINDS  # inserted, updated, deleted, skipped, dead_lettered, missed, folded


class CountsParam(AccumulatorParam):
    """Adds flat ``{name: number}`` dicts key by key (picklable: executors import this module)."""

    def zero(self, value: dict) -> dict:
        return {}

    def addInPlace(self, value1: dict, value2: dict) -> dict:  # noqa: N802 - PySpark's name
        for k, v in (value2 or {}).items():
            value1[k] = value1.get(k, 0) + v
        return value1


def new_counter(spark: Any):
    """A fresh accumulator on the driver (None when there is no SparkContext, e.g. in unit tests)."""
    sc = getattr(spark, "sparkContext", None)
    return sc.accumulator({}, CountsParam()) if sc is not None else None


def partition_counts(ok: bool, rows: int, stats: Any, seconds: float, retries: int = 0) -> dict[str, float]:
    """What one partition adds: committed rows, changes by kind (summed over tables), chunks
    retried after a transient error, time."""
    out: dict[str, float] = {"partitions": 1, "failed_partitions": 0 if ok else 1, "rows": rows,
                             "retries": retries, "apply_seconds": round(seconds, 3)}
    for kind in KINDS:
        out[kind] = sum((getattr(stats, kind, None) or {}).values())
    return out


def merge(into: dict, value: dict | None) -> dict:
    """Add an accumulator's value to a running total (the summary's ``executor`` dict)."""
    return CountsParam().addInPlace(into, dict(value or {}))
