"""``sluice run``: capture up to the source's current end, then sync every group, record it.

One call = one scheduled run (cron, Airflow). It never stops half-way on an error: a failed
capture still lets the groups apply what is already stored, a failed group does not stop
the others. Every outcome, errors included, is appended to the run log
(:mod:`pipeline.ops.runlog`) and written as metrics (:mod:`pipeline.ops.metrics`).

Exit codes (docs/operations.md): 0 work done, 1 a stage failed, 3 another run holds a lock
(nothing else failed), 4 nothing to do (no new rows captured and no group had pending rows;
``nothing_exit`` changes it, e.g. to 0 for schedulers that fail on any non-zero code),
130 interrupted.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pipeline.config import Config
from pipeline.errors import LockHeldError, SluiceError
from pipeline.logs import get_logger
from pipeline.store import BatchStore

from .runlog import RunLog, new_run_id
from .status import _iso, capture_lag, group_status

log = get_logger("run")

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_LOCKED = 3
EXIT_NOTHING = 4
EXIT_INTERRUPTED = 130


@dataclass
class RunResult:
    """The run record (what the run log holds) and the exit code."""

    record: dict[str, Any]
    exit_code: int


def _error(stage: str, e: BaseException, group: str | None = None) -> dict[str, Any]:
    msg = e.message if isinstance(e, SluiceError) else (str(e).strip().splitlines() or [""])[0][:2000]
    if isinstance(e, SluiceError) and e.hint:
        msg = f"{msg}\n  fix: {e.hint}"
    return {"stage": stage, "group": group, "type": type(e).__name__, "message": msg}


def run_once(cfg: Config, *, groups: list[str] | None = None, spark_factory: Callable[[], Any] | None = None,
             capture: bool = True, max_batches: int = 50, partitions: int | None = None,
             nothing_exit: int = EXIT_NOTHING, with_source_lag: bool = True, write_metrics: bool = True,
             capture_fn: Callable[..., Any] | None = None, sync_fn: Callable[..., Any] | None = None) -> RunResult:
    """One scheduled run (see the module docstring). ``spark_factory`` is called only when a
    group has pending batches; ``capture_fn``/``sync_fn`` replace run_capture/run_sync in tests."""
    from pipeline.capture import run_capture

    capture_fn = capture_fn or run_capture
    if sync_fn is None:
        from pipeline.job.driver import run_sync as sync_fn
    group_ids = list(groups) if groups else [g.groupId for g in cfg.groups]
    for g in group_ids:
        cfg.group(g)  # unknown group: ConfigError before anything runs
    t_wall, t0 = time.time(), time.monotonic()
    rec: dict[str, Any] = {"run": new_run_id(t_wall), "started": _iso(t_wall), "finished": None, "seconds": None,
                           "source": cfg.source.name, "groups": group_ids, "status": None, "exit": None,
                           "capture": None, "sync": {}, "lag": {}, "errors": []}
    errors: list[dict[str, Any]] = rec["errors"]
    interrupted = False
    store: BatchStore | None = None
    log.info("run starting", run=rec["run"], source=cfg.source.name, groups=",".join(group_ids), capture=capture)
    try:
        if capture:
            tc = time.monotonic()
            try:
                summary = capture_fn(cfg, follow=False)
                rec["capture"] = {**summary.to_dict(), "seconds": round(time.monotonic() - tc, 3)}
                if summary.stopped == "interrupted":
                    raise KeyboardInterrupt
            except SluiceError as e:
                errors.append(_error("capture", e))
                log.error("capture failed", error=e.message)
            except KeyboardInterrupt:
                raise
            except Exception as e:  # noqa: BLE001 - recorded in the run log; the groups still run
                errors.append(_error("capture", e))
                log.exception("capture failed")
        store = BatchStore(cfg.store_dir(), create=True)
        metas = store.batches()
        spark = None
        for g in group_ids:
            cursor = store.cursor(g)
            pend = [m for m in metas if m.batch_id > cursor]
            before = {"batches": len(pend), "rows": sum(m.rows for m in pend), "cursor": cursor}
            if not pend or all(m.records == 0 for m in pend):
                acked = _ack_empty(store, g, pend) if pend else cursor
                rec["sync"][g] = {"group": g, "batches": len(pend), "rows": 0, "seconds": 0.0, "rows_per_s": 0.0,
                                  "cursor": acked, "note": "nothing pending", "pending_before": before}
                continue
            ts = time.monotonic()
            try:
                if spark is None and spark_factory is not None:
                    store.check_apply_free(g)  # a group another job applies: refused before Spark starts
                    spark = spark_factory()
                s = sync_fn(cfg, g, spark, max_batches=max_batches, partitions=partitions)
                rec["sync"][g] = {**s.as_dict(), "pending_before": before}
            except SluiceError as e:
                errors.append(_error("sync", e, g))
                log.error("sync failed", group=g, error=e.message)
                rec["sync"][g] = _failed_sync(store, g, before, ts)
            except KeyboardInterrupt:
                raise
            except Exception as e:  # noqa: BLE001 - recorded; the other groups still run
                errors.append(_error("sync", e, g))
                log.exception("sync failed", group=g)
                rec["sync"][g] = _failed_sync(store, g, before, ts)
    except KeyboardInterrupt:
        interrupted = True
        errors.append({"stage": "run", "group": None, "type": "Interrupted", "message": "interrupted (SIGINT/SIGTERM)"})
    except SluiceError as e:  # e.g. the store cannot be opened
        errors.append(_error("run", e))
    _finish_lag(cfg, rec, store, group_ids, with_source_lag)
    rec["seconds"] = round(time.monotonic() - t0, 3)
    rec["finished"] = _iso(time.time())
    _decide(rec, interrupted, nothing_exit)
    if write_metrics and store is not None:
        from .metrics import write_metrics as write

        try:
            rec["metrics"] = write(cfg, rec, RunLog(store.root, cfg.metrics.keepRuns))
        except Exception as e:  # noqa: BLE001 - a metrics problem must not lose the run record
            errors.append(_error("metrics", e))
            _decide(rec, interrupted, nothing_exit)
    if store is not None:
        RunLog(store.root, cfg.metrics.keepRuns).append(rec)
    log.info("run done", run=rec["run"], status=rec["status"], exit=rec["exit"], seconds=rec["seconds"],
             errors=len(errors))
    return RunResult(rec, rec["exit"])


def _ack_empty(store: BatchStore, g: str, pend: list) -> int:
    """Ack batches that hold no record at all (position progress only) without starting Spark."""
    try:
        with store.apply_lock(g):
            for m in pend:
                if m.batch_id == store.cursor(g) + 1 and m.records == 0:
                    store.ack(g, m.batch_id)
    except LockHeldError:
        pass  # a sync of this group is running; it acks them
    return store.cursor(g)


def _failed_sync(store: BatchStore, g: str, before: dict, ts: float) -> dict[str, Any]:
    cursor = store.cursor(g)
    return {"group": g, "ok": False, "batches": max(0, cursor - before["cursor"]), "rows": None,
            "seconds": round(time.monotonic() - ts, 3), "cursor": cursor, "pending_before": before}


def _finish_lag(cfg: Config, rec: dict, store: BatchStore | None, groups: list[str], with_source: bool) -> None:
    if store is None:
        return
    try:
        metas = store.batches()
        rec["lag"] = {"capture": capture_lag(cfg, store, with_source=with_source, metas=metas),
                      "groups": group_status(store, groups, metas=metas)}
    except Exception as e:  # noqa: BLE001 - lag is informative; the run's outcome stands
        rec["errors"].append(_error("lag", e))


def _decide(rec: dict, interrupted: bool, nothing_exit: int) -> None:
    errors = rec["errors"]
    if interrupted:
        rec["status"], rec["exit"] = "interrupted", EXIT_INTERRUPTED
    elif errors and all(e["type"] == LockHeldError.__name__ for e in errors):
        rec["status"], rec["exit"] = "locked", EXIT_LOCKED
    elif errors:
        rec["status"], rec["exit"] = "failed", EXIT_FAILED
    else:
        captured = (rec.get("capture") or {}).get("rows") or 0
        pending = sum((s.get("pending_before") or {}).get("rows") or 0 for s in rec["sync"].values())
        if captured == 0 and pending == 0:
            rec["status"], rec["exit"] = "nothing", nothing_exit
        else:
            rec["status"], rec["exit"] = "ok", EXIT_OK
