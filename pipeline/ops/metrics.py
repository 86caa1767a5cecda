"""Metrics of each ``sluice run``: Prometheus text (node-exporter textfile style) and JSON.

Batch jobs report *last-run gauges* (as Prometheus recommends for batch jobs and the
Pushgateway): every sample describes the newest run, plus ``sluice_last_success_timestamp_seconds``
for alerting on a job that stopped succeeding. Both files are replaced atomically (temp file
in the same folder, then rename), so node-exporter never reads half a file. Names and labels:
docs/operations.md.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, generate_latest

from adapters.base import ApplyStats
from pipeline.config import Config
from pipeline.state.runlog import RunLog

from .status import iso_ts

KINDS = ApplyStats.KINDS  # inserted, updated, deleted, skipped, dead_lettered, missed, folded


def registry_for(rec: dict[str, Any], last_success: dict[str, Any] | None = None) -> CollectorRegistry:
    """A registry holding the gauges of one run record."""
    reg = CollectorRegistry()
    src = rec.get("source") or "default"

    def gauge(name: str, doc: str, labels: tuple[str, ...] = ()) -> Gauge:
        return Gauge(name, doc, ("source", *labels), registry=reg)

    def put(g: Gauge, value: Any, **labels: Any) -> None:
        if value is not None:
            g.labels(source=src, **{k: str(v) for k, v in labels.items()}).set(float(value))

    ok = rec.get("status") in ("ok", "nothing")
    put(gauge("sluice_last_run_timestamp_seconds", "When the last run finished (Unix time)."),
        iso_ts(rec.get("finished")))
    put(gauge("sluice_last_run_success", "1 if the last run succeeded (work done or nothing to do), else 0."),
        1 if ok else 0)
    put(gauge("sluice_last_run_exit_code", "Exit code of the last run (docs/operations.md)."), rec.get("exit"))
    put(gauge("sluice_last_run_errors", "Errors recorded by the last run."), len(rec.get("errors") or ()))
    put(gauge("sluice_last_run_duration_seconds", "Wall time of the last run."), rec.get("seconds"))
    succ = rec if ok else last_success
    put(gauge("sluice_last_success_timestamp_seconds", "When the newest successful run finished (Unix time)."),
        iso_ts((succ or {}).get("finished")))

    cap = rec.get("capture") or {}
    if cap:
        put(gauge("sluice_last_run_capture_rows", "Rows captured by the last run."), cap.get("rows"))
        put(gauge("sluice_last_run_capture_batches", "Batches stored by the last run."), cap.get("batches"))
        put(gauge("sluice_last_run_capture_transactions", "Transactions captured by the last run."),
            cap.get("transactions"))
        put(gauge("sluice_last_run_capture_duration_seconds", "Capture time of the last run."), cap.get("seconds"))
        put(gauge("sluice_last_run_capture_rows_per_second", "Capture rate of the last run."), cap.get("rows_per_s"))

    g_rows = gauge("sluice_last_run_sync_rows", "Rows applied by the last run, per group.", ("group",))
    g_batches = gauge("sluice_last_run_sync_batches", "Batches acked by the last run, per group.", ("group",))
    g_secs = gauge("sluice_last_run_sync_duration_seconds", "Sync time of the last run, per group.", ("group",))
    g_rate = gauge("sluice_last_run_sync_rows_per_second", "Apply rate of the last run, per group.", ("group",))
    g_ddl = gauge("sluice_last_run_sync_ddl", "DDL statements applied by the last run, per group.", ("group",))
    g_ok = gauge("sluice_last_run_sync_success", "1 if the group's sync succeeded in the last run.", ("group",))
    g_changes = gauge("sluice_last_run_changes", "Changes by table and kind in the last run (inserted, updated, "
                      "deleted, skipped: applied already (a duplicate key, a replayed position), dead-lettered, "
                      "missed: UPDATE/DELETE matching no row, folded: "
                      "changes folded into a later change of their row).",
                      ("group", "table", "kind"))
    g_exec = gauge("sluice_last_run_executor_count", "Executor-side totals of the last run from Spark accumulators "
                   "(rows, partitions, failed_partitions, inserted, ..., apply_seconds).", ("group", "name"))
    failed = {e.get("group") for e in rec.get("errors") or () if e.get("stage") == "sync"}
    for group, s in (rec.get("sync") or {}).items():
        put(g_rows, s.get("rows"), group=group)
        put(g_batches, s.get("batches"), group=group)
        put(g_secs, s.get("seconds"), group=group)
        put(g_rate, s.get("rows_per_s"), group=group)
        put(g_ddl, s.get("ddl", 0), group=group)
        put(g_ok, 0 if group in failed else 1, group=group)
        for kind in KINDS:
            for table, n in (s.get(kind) or {}).items():
                put(g_changes, n, group=group, table=table, kind=kind)
        for name, n in (s.get("executor") or {}).items():
            put(g_exec, n, group=group, name=name)

    lag = rec.get("lag") or {}
    cl = lag.get("capture") or {}
    put(gauge("sluice_capture_lag_seconds", "Seconds capture is behind the source (0: at the binlog end)."),
        cl.get("lag_s"))
    put(gauge("sluice_capture_behind_bytes", "Binlog bytes not captured yet."), cl.get("behind_bytes"))
    put(gauge("sluice_capture_last_event_age_seconds", "Age of the newest captured binlog event."),
        cl.get("last_event_age_s"))
    gp_b = gauge("sluice_group_pending_batches", "Batches the group has not acked.", ("group",))
    gp_r = gauge("sluice_group_pending_rows", "Rows in the batches the group has not acked.", ("group",))
    gp_l = gauge("sluice_group_lag_seconds", "Age of the oldest batch the group has not acked (0: none).", ("group",))
    gp_c = gauge("sluice_group_cursor", "The newest batch the group acked.", ("group",))
    gp_f = gauge("sluice_group_freshness_seconds", "Now minus the source commit time of the newest row the "
                 "group applied (end-to-end freshness).", ("group",))
    gp_a = gauge("sluice_group_applied_event_timestamp_seconds", "Source commit time (Unix time) of the newest "
                 "row the group applied.", ("group",))
    for group, gs in (lag.get("groups") or {}).items():
        put(gp_f, gs.get("freshness_s"), group=group)
        put(gp_a, iso_ts(gs.get("applied_event_at")), group=group)
        put(gp_b, gs.get("pending_batches"), group=group)
        put(gp_r, gs.get("pending_rows"), group=group)
        put(gp_l, gs.get("lag_s"), group=group)
        put(gp_c, gs.get("cursor"), group=group)
    return reg


def prometheus_text(rec: dict[str, Any], last_success: dict[str, Any] | None = None) -> str:
    """The Prometheus text exposition of one run record."""
    return generate_latest(registry_for(rec, last_success)).decode()


def json_document(rec: dict[str, Any], last_success: dict[str, Any] | None = None) -> dict[str, Any]:
    """The same numbers as JSON: the run record plus the newest success time."""
    return {"format": 1, "run": rec, "last_success_at": (rec if rec.get("status") in ("ok", "nothing")
                                                         else last_success or {}).get("finished")}


def write_atomic(path: Path, data: bytes) -> None:
    """Write a file whole: temp file in the same folder, fsync, rename over the target."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        with tmp.open("wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_metrics(cfg: Config, rec: dict[str, Any], runlog: RunLog | None = None) -> dict[str, str]:
    """Write the configured metrics files for ``rec``; returns ``{"textfile": path, "json": path}``."""
    m = cfg.metrics
    written: dict[str, str] = {}
    if not (m.textfile or m.json_):
        return written
    last_ok = runlog.last_success() if runlog is not None else None
    if m.textfile:
        p = cfg.path(m.textfile)
        write_atomic(p, prometheus_text(rec, last_ok).encode())
        written["textfile"] = str(p)
    if m.json_:
        p = cfg.path(m.json_)
        write_atomic(p, (json.dumps(json_document(rec, last_ok), indent=1, default=str) + "\n").encode())
        written["json"] = str(p)
    return written
