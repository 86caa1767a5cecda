"""``sluice run``: capture up to the source's current end, then sync every group, record it.

One call = one scheduled run (cron, Airflow). Problems come out as early as they can be found:

1. the store is opened and probed for writing (not writable: StoreError, nothing runs);
2. every selected group's mapping files are loaded (a broken file: that group is skipped);
3. capture, under the store's capture lock;
4. each group with pending rows takes its apply lock (held by another job: skipped) and runs
   its pre-flight checks (source and target reachable, mappings fit their tables);
5. only then is Spark started, once, for the groups that passed, and each is synced -- unless
   the last recorded run ended ok and applied rows (a steady stream): then Spark started in a
   thread with step 2, so the JVM's start overlaps loading, capture and the checks.

It never stops half-way on an error: a failed capture still lets the groups apply what is
already stored, a failed group does not stop the others. Every outcome, errors included, is
appended to the run log (:mod:`pipeline.state.runlog`) and written as metrics
(:mod:`pipeline.ops.metrics`).

Exit codes (docs/operations.md, :mod:`sluice_common.exitcodes`): 0 work done, 1 a stage failed,
2 a group's config or mappings are wrong (status ``invalid``), 3 another job holds a lock
(nothing else failed), 4 nothing to do (no new rows captured and no group had pending rows;
``nothing_exit`` changes it, e.g. to 0 for schedulers that fail on any non-zero code),
130 interrupted.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

from pipeline.config import Config
from pipeline.fsutil import not_writable
from pipeline.job.rounds import follower_error, follower_of
from pipeline.state.runlog import RunLog, new_run_id
from pipeline.store import AdminLog, GroupLog, open_store
from sluice_common import exitcodes, stopping
from sluice_common.errors import LockHeldError, SluiceError
from sluice_common.logs import get_logger

from .status import _iso, capture_lag, group_status

log = get_logger("run")

EXIT_OK = exitcodes.OK
EXIT_FAILED = exitcodes.FAILED
EXIT_INVALID = exitcodes.CONFIG
EXIT_LOCKED = exitcodes.LOCKED
EXIT_NOTHING = exitcodes.NOTHING
EXIT_INTERRUPTED = exitcodes.INTERRUPTED


@dataclass
class RunResult:
    """The run record (what the run log holds) and the exit code."""

    record: dict[str, Any]
    exit_code: int


def _error(stage: str, e: BaseException, group: str | None = None) -> dict[str, Any]:
    if isinstance(e, OSError) and e.filename:  # e.g. a metrics file: one message naming the path
        e = not_writable(e.filename, e, {"metrics": "the metrics file"}.get(stage, "a file"))
    msg = e.message if isinstance(e, SluiceError) else (str(e).strip().splitlines() or [""])[0][:2000]
    if isinstance(e, SluiceError) and e.hint:
        msg = f"{msg}\n  fix: {e.hint}"
    # writing metrics or the run log, measuring lag: the work is done, so a failure there is "failed"
    code = e.exit_code if isinstance(e, SluiceError) and stage in ("config", "capture", "sync", "run") else EXIT_FAILED
    return {"stage": stage, "group": group, "type": type(e).__name__, "message": msg, "exit": code}


def _load(cfg: Config, g: str) -> Any:
    from pipeline.job.group import load_group

    return load_group(cfg, g)


def _check(cfg: Config, plan: Any, store: GroupLog) -> None:
    plan.check(store)


def run_once(cfg: Config, *, groups: list[str] | None = None, spark_factory: Callable[[int], Any] | None = None,
             capture: bool = True, max_batches: int = 50, partitions: int | None = None,
             nothing_exit: int = EXIT_NOTHING, with_source_lag: bool = True, write_metrics: bool = True,
             capture_fn: Callable[..., Any] | None = None, sync_fn: Callable[..., Any] | None = None,
             load_fn: Callable[[Config, str], Any] | None = None,
             check_fn: Callable[[Config, Any, GroupLog], None] | None = None,
             record_idle: bool = True, extra: dict[str, Any] | None = None,
             held_off: dict[str, dict[str, Any]] | None = None, follower: bool = False,
             sync_rounds: int | None = None) -> RunResult:
    """One scheduled run (see the module docstring). ``spark_factory(pending_rows)`` is called
    only when a group passed its checks and has pending batches; ``capture_fn``/``sync_fn`` replace
    run_capture/run_sync, ``load_fn``/``check_fn`` the group loading and pre-flight, in tests.
    ``sync_fn`` is called with the group's apply lock held (``locked=True``) and its ``plan``.
    ``groups``: None = every group of the config ([] = none: a capture-only round).
    ``record_idle=False``: a round with nothing to do writes no metrics and no run-log line
    (``sluice run --follow`` between changes); ``extra`` is merged into the run record.
    ``held_off``: groups ``sluice run --follow`` leaves out of this round while they back off after
    a failure (``{group: {"failures", "retry_in_s", "error"}}``): each is recorded as an error of
    the run (type ``BackingOff``, with its last error), so the run is not a success while a group
    is failing; a round that did nothing else counts as idle for ``record_idle``. ``follower``:
    the caller is ``sluice run --follow`` (else a group a follower applies is left to it, as
    locked); ``sync_rounds``: each group syncs at most this many rounds (None: all pending)."""
    from pipeline.capture import run_capture

    capture_fn = capture_fn or run_capture
    load_fn, check_fn = load_fn or _load, check_fn or _check
    group_ids = list(groups) if groups is not None else [g.groupId for g in cfg.groups]
    for g in group_ids:
        cfg.group(g)  # unknown group: ConfigError before anything runs
    store = open_store(cfg, create=True)
    store.check_writable()  # a read-only store: StoreError before anything runs (nothing could be recorded)
    t_wall, t0 = time.time(), time.monotonic()
    rec: dict[str, Any] = {"run": new_run_id(t_wall), "started": _iso(t_wall), "finished": None, "seconds": None,
                           "source": cfg.source.name, "groups": group_ids, "status": None, "exit": None,
                           "capture": None, "sync": {}, "lag": {}, "errors": [], **(extra or {})}
    errors: list[dict[str, Any]] = rec["errors"]
    held = {g: h for g, h in (held_off or {}).items() if g not in group_ids}
    if held:
        rec["groups"] = group_ids + list(held)
        _record_held_off(store, rec, held)
    interrupted = False
    say = log.info if record_idle else log.debug  # --follow: a line per round only when it did something
    say("run starting", run=rec["run"], source=cfg.source.name, groups=",".join(group_ids), capture=capture)
    # a steady stream (the last run applied rows): Spark starts now, while the groups load and capture runs
    kinds = adapter_kinds(cfg, group_ids)
    led = not follower and bool(group_ids) and all(follower_of(store, g) is not None for g in group_ids)
    early = _busy_start(spark_factory, store, cfg.metrics.keepRuns, kinds, scans(cfg)) if capture and not led else None
    try:
        plans = _load_groups(cfg, group_ids, load_fn, rec)
        if capture and cfg.store.kafka is not None and cfg.store.kafka.writtenBy == "canal":
            capture = False  # canal-server writes the topic; this run only applies it
        if capture:
            _capture(cfg, capture_fn, rec)
        with ExitStack() as held:
            if sync_fn is None:  # after capture: with a steady stream, imported while the JVM starts
                from pipeline.job.driver import run_sync as sync_fn
            ready = _prepare_groups(cfg, store, plans, check_fn, rec, held, follower)
            pending = sum(before["rows"] for _, _, before in ready)
            spark = _start_spark(early or spark_factory, ready, store, rec, pending) if ready else None
            if spark is False:
                ready = []
            for g, plan, before in ready:
                ts = time.monotonic()
                try:
                    s = sync_fn(cfg, g, spark, max_batches=max_batches, partitions=partitions, plan=plan,
                                locked=True, max_rounds=sync_rounds, follower=follower)
                    rec["sync"][g] = {**s.as_dict(), "pending_before": before}
                except SluiceError as e:
                    errors.append(_error("sync", e, g))
                    log.error("sync failed", group=g, error=e.message)
                    rec["sync"][g] = _failed_sync(store, g, before, ts)
                except KeyboardInterrupt:
                    _cancel_jobs(spark)
                    rec["sync"][g] = {**_failed_sync(store, g, before, ts), "note": "interrupted"}
                    raise
                except Exception as e:  # noqa: BLE001 - recorded; the other groups still run
                    errors.append(_error("sync", e, g))
                    log.error("sync failed", group=g, exc_info=True)
                    rec["sync"][g] = _failed_sync(store, g, before, ts)
    except KeyboardInterrupt:
        interrupted = True
    except SluiceError as e:  # e.g. the store's batches cannot be listed
        errors.append(_error("run", e))
    interrupted = interrupted or stopping.requested()  # also when py4j made the interrupt a failed Java call
    if interrupted:
        errors.append({"stage": "run", "group": None, "type": "Interrupted", "message": "interrupted (SIGINT/SIGTERM)",
                       "exit": EXIT_INTERRUPTED})
    _finish_lag(cfg, rec, store, rec["groups"], with_source_lag)
    rec["seconds"] = round(time.monotonic() - t0, 3)
    rec["finished"] = _iso(time.time())
    _decide(rec, interrupted, nothing_exit)
    if not record_idle and _idle(rec):
        say("run done", run=rec["run"], status=rec["status"], seconds=rec["seconds"])
        return RunResult(rec, rec["exit"])
    if write_metrics and rec["status"] != "locked":  # refused: the metrics of the job holding the lock stand
        from .metrics import write_metrics as write

        try:
            rec["metrics"] = write(cfg, rec, RunLog(store.root, cfg.metrics.keepRuns))
        except Exception as e:  # noqa: BLE001 - a metrics problem must not lose the run record
            errors.append(_error("metrics", e))
            _decide(rec, interrupted, nothing_exit)
    try:
        RunLog(store.root, cfg.metrics.keepRuns).append(rec)
    except SluiceError as e:  # the summary still tells what the run did
        errors.append(_error("runlog", e))
        _decide(rec, interrupted, nothing_exit)
    log.info("run done", run=rec["run"], status=rec["status"], exit=rec["exit"], seconds=rec["seconds"],
             errors=len(errors))
    return RunResult(rec, rec["exit"])


def _load_groups(cfg: Config, group_ids: list[str], load_fn: Callable[[Config, str], Any],
                 rec: dict[str, Any]) -> dict[str, Any]:
    """Each group's mapping files, read before anything runs; a group whose files are wrong is
    recorded and left out (the others still run)."""
    plans = {}
    for g in group_ids:
        try:
            plans[g] = load_fn(cfg, g)
        except SluiceError as e:
            rec["errors"].append(_error("config", e, g))
            rec["sync"][g] = {"group": g, "ok": False, "batches": 0, "rows": None, "seconds": 0.0, "cursor": None,
                              "note": "its config or mapping files are wrong (see the error)"}
            log.error("group not started", group=g, error=e.message)
    return plans


def _capture(cfg: Config, capture_fn: Callable[..., Any], rec: dict[str, Any]) -> None:
    tc = time.monotonic()
    try:
        summary = capture_fn(cfg, follow=False)
        rec["capture"] = {**summary.to_dict(), "seconds": round(time.monotonic() - tc, 3)}
        if summary.stopped == "interrupted":
            raise KeyboardInterrupt
    except SluiceError as e:
        rec["errors"].append(_error("capture", e))
        log.error("capture failed", error=e.message, **({"fix": e.hint} if e.hint else {}))
    except KeyboardInterrupt:
        raise
    except Exception as e:  # noqa: BLE001 - recorded in the run log; the groups still run
        rec["errors"].append(_error("capture", e))
        log.error("capture failed", exc_info=True)


def _prepare_groups(cfg: Config, store: GroupLog, plans: dict[str, Any],
                    check_fn: Callable[[Config, Any, GroupLog], None], rec: dict[str, Any],
                    held: ExitStack, follower: bool = False) -> list[tuple[str, Any, dict]]:
    """The groups to sync, each with its apply lock held (entered on ``held``) and its checks
    passed, all before Spark starts; groups with nothing pending are noted (empty batches acked)."""
    ready = []
    for g, plan in plans.items():
        cursor = store.cursor(g)
        pend = store.pending(g)
        before = {"batches": len(pend), "rows": sum(m.rows for m in pend), "cursor": cursor}
        if not pend or all(m.records == 0 for m in pend):
            acked = _ack_empty(store, g, pend) if pend else cursor
            rec["sync"][g] = {"group": g, "batches": len(pend), "rows": 0, "seconds": 0.0, "rows_per_s": 0.0,
                              "cursor": acked, "note": "nothing pending", "pending_before": before}
            continue
        ts = time.monotonic()
        try:
            with ExitStack() as mine:
                if not follower and (holder := follower_of(store, g)) is not None:
                    raise follower_error(g, holder)  # a follower applies g: left to it
                mine.enter_context(store.apply_lock(g))  # another job applies g: refused before Spark starts
                check_fn(cfg, plan, store)
                held.enter_context(mine.pop_all())
        except SluiceError as e:
            stage = "config" if e.exit_code == EXIT_INVALID else "sync"
            rec["errors"].append(_error(stage, e, g))
            log.error("group not started", group=g, error=e.message)
            why = ("another job applies this group (locked)" if isinstance(e, LockHeldError) else
                   "its mappings do not fit their tables (see the error)" if stage == "config" else
                   "its pre-flight check failed (see the error)")
            rec["sync"][g] = {**_failed_sync(store, g, before, ts), "note": why}
            continue
        ready.append((g, plan, before))
    return ready


def _record_held_off(store: GroupLog, rec: dict[str, Any], held: dict[str, dict[str, Any]]) -> None:
    """Groups sitting out a back-off: an error each (with the group's last error), and a sync
    entry saying when it is tried again."""
    for g, h in held.items():
        n, wait = h.get("failures") or 0, h.get("retry_in_s")
        rec["errors"].append({"stage": "sync", "group": g, "type": "BackingOff", "exit": EXIT_FAILED,
                              "message": f"backing off after {n} failed round(s) in a row, tried again in "
                                         f"{wait} s; last error: {h.get('error') or 'unknown'}"})
        rec["sync"][g] = {"group": g, "ok": False, "batches": 0, "rows": None, "seconds": 0.0,
                          "cursor": store.cursor(g), "failures": n, "retry_in_s": wait,
                          "note": f"backing off after {n} failed round(s)"}


def _idle(rec: dict[str, Any]) -> bool:
    """Nothing captured, nothing applied and nothing failed in this run, apart from the groups
    still sitting out a back-off (their failure was recorded by the round that failed)."""
    if rec["status"] == "nothing":
        return True
    if rec["status"] != "failed" or any(e.get("type") != "BackingOff" for e in rec["errors"]):
        return False
    captured = (rec.get("capture") or {}).get("rows") or 0
    pending = sum((s.get("pending_before") or {}).get("rows") or 0 for s in rec["sync"].values())
    return captured == 0 and pending == 0


def _busy_start(spark_factory: Callable[[int], Any] | None, store: GroupLog, keep: int, kinds: list[str],
                scan: bool = True) -> Callable[[int], Any] | None:
    """When the last recorded run ended ok and applied rows (a steady stream of changes, as a
    schedule every minute sees), start Spark at once, in a thread, told that many rows (a small
    run gets its short-lived JVM), so that the JVM's start overlaps the groups' loading, capture
    and the checks. None (Spark starts after the checks, and only for pending rows): no run yet,
    the last one applied nothing or did not end ok. A session started for a run that then has
    nothing to apply, or whose groups fail their checks, is left unused and ends with the process."""
    if spark_factory is None:
        return None
    try:
        last = RunLog(store.root, keep).last()
    except (OSError, SluiceError):
        return None
    if not last or last.get("status") != "ok":
        return None  # e.g. a mapping that stopped fitting: its error comes before Spark, as on a first run
    applied = sum(int((s or {}).get("rows") or 0) for s in (last.get("sync") or {}).values())
    return spark_in_thread(spark_factory, applied, kinds, scan) if applied > 0 else None


def scans(cfg: Config) -> bool:
    """Do the run's segments mostly scan (pipeline/job/scan.py: files in a local store, ``spark.scan``)?"""
    return bool(cfg.spark.scan) and cfg.store.kind != "kafka"


def spark_in_thread(spark_factory: Callable[[int], Any], rows: int, kinds: list[str],
                    scan: bool = True) -> Callable[[int], Any]:
    """``spark_factory(rows)`` in a thread, now; the factory returned waits for its session. Once
    the session is there the thread warms a Python worker for the adapters of ``kinds``
    (:func:`pipeline.job.session.warm_workers`, the way ``scan`` says segments run) while the
    driver goes on."""
    # The modules both threads import, imported here first: two threads importing pyspark.sql at
    # once (the session's start in the thread, the group's plan here via pipeline.job.keyfold) can
    # each wait on a module the other holds, and Python then hands one of them the half-made module
    # ("cannot import name 'SQLContext' from partially initialized module 'pyspark.sql'": CI, a
    # `sluice run` whose capture failed fast and went on to load the groups while the JVM started).
    import pyspark.sql  # noqa: F401

    import pipeline.job.group  # noqa: F401
    import pipeline.job.session  # noqa: F401

    box: dict[str, Any] = {}
    ready = threading.Event()

    def start() -> None:
        fresh = False
        try:
            from pyspark import SparkContext

            fresh = SparkContext._gateway is None  # a session of an earlier round (--follow) is warm already
            box["spark"] = spark_factory(rows)
        except BaseException as e:  # noqa: BLE001 - handed to the caller of the factory
            box["error"] = e
        finally:
            ready.set()
        spark = box.get("spark")
        if fresh and spark is not None and hasattr(spark, "sparkContext"):
            try:
                from pipeline.job.session import warm_workers

                warm_workers(spark, kinds, scan)
            except Exception as e:  # noqa: BLE001 - only a head start
                log.debug("warming a Python worker failed", error=str(e))

    threading.Thread(target=start, name="sluice-spark-start", daemon=True).start()

    def started(_pending_rows: int) -> Any:
        ready.wait()
        if "error" in box:
            raise box["error"]
        return box["spark"]

    return started


def _cancel_jobs(spark: Any) -> None:
    """Cancel the session's running jobs on SIGINT/SIGTERM: PySpark does it by itself only for a
    context created in the main thread, and ours is started in a thread (nothing is acked either
    way; this stops the executors' writes now rather than when the JVM goes)."""
    try:
        spark.sparkContext.cancelAllJobs()
    except Exception:  # noqa: BLE001 - best effort on the way out
        pass


def adapter_kinds(cfg: Config, groups: list[str]) -> list[str]:
    """The adapter kinds (rdb, es, hbase) the groups write to."""
    from adapters.registry import KINDS

    return sorted({KINDS[a.name] for g in groups for a in cfg.group(g).outerAdapters if a.name in KINDS})


def _start_spark(spark_factory: Callable[[int], Any] | None, ready: list, store: GroupLog,
                 rec: dict[str, Any], pending_rows: int = 0) -> Any:
    """The Spark session for the groups that passed their checks (``spark_factory`` is told
    how many rows they have pending: a small run gets a JVM tuned for a short life); False
    (recorded) when it does not start (no Java, a bad master URL)."""
    if spark_factory is None:
        return None
    try:
        return spark_factory(pending_rows)
    except KeyboardInterrupt:
        raise
    except Exception as e:  # noqa: BLE001 - recorded; the run fails with its record written
        rec["errors"].append(_error("spark", e))
        log.error("Spark did not start", exc_info=True)
        for g, _, before in ready:
            rec["sync"][g] = {**_failed_sync(store, g, before, time.monotonic()), "note": "Spark did not start"}
        return False


def _ack_empty(store: GroupLog, g: str, pend: list) -> int:
    """Ack batches that hold no record at all (position progress only) without starting Spark."""
    try:
        with store.apply_lock(g):
            for m in pend:
                if m.batch_id == store.cursor(g) + 1 and m.records == 0:
                    store.ack(g, m.batch_id)
    except LockHeldError:
        pass  # a sync of this group is running; it acks them
    return store.cursor(g)


def _failed_sync(store: GroupLog, g: str, before: dict, ts: float) -> dict[str, Any]:
    cursor = store.cursor(g)
    return {"group": g, "ok": False, "batches": max(0, cursor - before["cursor"]), "rows": None,
            "seconds": round(time.monotonic() - ts, 3), "cursor": cursor, "pending_before": before}


def _finish_lag(cfg: Config, rec: dict, store: AdminLog, groups: list[str], with_source: bool) -> None:
    try:
        metas = store.batches()
        cap = capture_lag(cfg, store, with_source=with_source, metas=metas)
        rec["lag"] = {"capture": cap,
                      "groups": group_status(store, groups, metas=metas, capture_behind=cap.get("behind_bytes"))}
    except Exception as e:  # noqa: BLE001 - lag is informative; the run's outcome stands
        rec["errors"].append(_error("lag", e))


def _decide(rec: dict, interrupted: bool, nothing_exit: int) -> None:
    errors = rec["errors"]
    if interrupted:
        rec["status"], rec["exit"] = "interrupted", EXIT_INTERRUPTED
    elif any(e.get("exit") == EXIT_INVALID for e in errors):
        rec["status"], rec["exit"] = "invalid", EXIT_INVALID
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
