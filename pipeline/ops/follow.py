"""``sluice run --follow``: scheduled runs back to back, in one warm Spark session.

Each *round* is one :func:`pipeline.ops.run.run_once` -- capture to the source's end, then sync
every group with pending rows -- with the same locks (the capture lock and each group's apply
lock, taken and released per round, so a cron ``sluice run`` or a ``sluice sync`` meets them as
it would meet another run), the same ack rule (a batch is acked only when every partition
committed), and the same run record, metrics and exit code per round. What a round keeps from
the one before:

* the **SparkSession**, started with the follower (in a thread, while the first round captures
  and runs its checks: a restarted follower reaches its first ack sooner): its JVM, the code Spark
  generated and compiled for the plan, the JIT's work and the Python workers stay warm, so a
  round with a few rows costs a fraction of a second instead of a JVM start;
* the groups' **mapping files**, loaded again only when a file changes (added, removed, edited);
* the **pre-flight checks** (source and targets answer, mappings fit their tables): run for a
  group's first sync, and again after the group failed or applied a DDL, or its files changed.
  The driver still reads the targets' key schemas before each sync and after each DDL
  (``GroupPlan.key_plan``), and every sync starts a new DDL epoch, so executors drop their
  schema caches (:mod:`pipeline.job.driver`).

A group whose round fails (target down, a partition that did not commit; nothing acked) is left
out of the next rounds for a back-off that doubles from ``interval`` up to :data:`MAX_BACKOFF`
seconds, then tried again (pre-flight first); the others go on. A group sitting out is an error of
every round it sits out (``BackingOff``, with its last error: such a round is ``failed``), so
``status``, the metrics and the report show it failing until it applies again, and the last
success does not move meanwhile. Rounds that did nothing (besides groups sitting out) write no
run-log line; metrics are refreshed for them at most every :data:`IDLE_METRICS_SECONDS` so that
``sluice_last_success_timestamp_seconds`` keeps moving while the follower is healthy. With
``--rounds N`` the result (record, exit code) is that of the last round that did something, so
a failed round is not hidden by an idle one after it.

It ends on SIGTERM/SIGINT (exit 130): a round in progress is abandoned as ``sluice run``
abandons it (nothing half-applied acked, the round recorded as interrupted), a wait between
rounds simply stops; the session is stopped. It also ends, exit 1, when the Spark JVM died (also
while the session was starting: no session can start in that process any more).
"""

from __future__ import annotations

import glob
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tenacity import wait_fixed

from pipeline.config import Config
from pipeline.job.rounds import follow_lock_path
from pipeline.retry import retrying
from pipeline.state.locks import acquire, read_holder
from pipeline.state.runlog import new_run_id
from pipeline.store import GroupLog, open_store
from sluice_common import exitcodes, stopping
from sluice_common.errors import LockHeldError
from sluice_common.logs import get_logger

from .run import RunResult, adapter_kinds, run_once, scans, spark_in_thread

log = get_logger("follow")

MAX_BACKOFF = 60.0
IDLE_METRICS_SECONDS = 15.0


@dataclass
class GroupState:
    """What the follower remembers about one group between rounds."""

    plan: Any = None
    files: tuple = ()                  # (path, mtime_ns, size) of its mapping files when loaded
    checked: bool = False              # the pre-flight passed and nothing since calls for another
    failures: int = 0                  # failed rounds in a row
    next_try: float = 0.0              # monotonic time before which the group sits out
    last_error: str | None = None      # the message of its last failure


@dataclass
class Follower:
    """The loop's state; :meth:`round` runs one round, :meth:`run` loops until stopped."""

    cfg: Config
    group_ids: list[str]
    spark_factory: Callable[[int], Any] | None
    interval: float = 1.0
    capture: bool = True
    max_batches: int = 50
    partitions: int | None = None
    with_source_lag: bool = True
    capture_fn: Callable[..., Any] | None = None
    sync_fn: Callable[..., Any] | None = None
    load_fn: Callable[[Config, str], Any] | None = None
    check_fn: Callable[[Config, Any, GroupLog], None] | None = None
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    states: dict[str, GroupState] = field(default_factory=dict)
    follower_id: str = field(default_factory=new_run_id)
    rounds: int = 0
    spark: Any = None
    last_metrics: float = float("-inf")
    claims: list = field(default_factory=list)   # the follow locks held (claim)
    retry_factory: Callable[[int], Any] | None = None  # the factory behind an early start

    def __post_init__(self) -> None:
        self.states = {g: GroupState() for g in self.group_ids}

    # ---- what run_once calls back ------------------------------------------------------------

    def _spark(self, pending_rows: int) -> Any:
        if self.spark is None:  # long-lived: full tiered JIT, whatever the first round's size
            try:
                self.spark = self.spark_factory(0) if self.spark_factory is not None else None
            except Exception:
                if self.retry_factory is not None:  # the early start failed: the next round starts afresh
                    self.spark_factory, self.retry_factory = self.retry_factory, None
                raise
        return self.spark

    def _load(self, cfg: Config, g: str) -> Any:
        st = self.states[g]
        files = mapping_files(cfg, g)
        if st.plan is None or files != st.files:
            if st.plan is not None:
                log.info("mapping files changed: loading them again", group=g)
            st.plan, st.files, st.checked = None, files, False
            st.plan = self.load_fn(cfg, g) if self.load_fn else _default_load(cfg, g)
        return st.plan

    def _check(self, cfg: Config, plan: Any, store: GroupLog) -> None:
        st = next((s for s in self.states.values() if s.plan is plan), None)
        if st is not None and st.checked:
            return
        if self.check_fn is not None:
            self.check_fn(cfg, plan, store)
        else:
            plan.check(store)
        if st is not None:
            st.checked = True

    # ---- rounds ------------------------------------------------------------------------------

    def due(self) -> list[str]:
        """The groups not sitting out a back-off."""
        now = self.clock()
        return [g for g in self.group_ids if self.states[g].next_try <= now]

    def round(self) -> RunResult:
        """One round: capture, then sync the due groups (see the module docstring)."""
        self.rounds += 1
        due = self.due()
        idle_metrics = self.clock() - self.last_metrics >= IDLE_METRICS_SECONDS
        capture_fn = self.capture_fn
        if capture_fn is None:
            from pipeline.capture import run_capture

            def capture_fn(cfg: Config, follow: bool = False) -> Any:
                return run_capture(cfg, follow=follow, quiet=True)
        result = run_once(self.cfg, groups=due, spark_factory=self._spark, capture=self.capture,
                          max_batches=self.max_batches, partitions=self.partitions,
                          with_source_lag=self.with_source_lag, capture_fn=capture_fn, sync_fn=self.sync_fn,
                          load_fn=self._load, check_fn=self._check, record_idle=idle_metrics,
                          extra={"follow": {"id": self.follower_id, "round": self.rounds,
                                            "interval": self.interval, "backoff": self._backoff_brief(due)}},
                          held_off=self._held_off(due), follower=True, sync_rounds=1)
        if result.record["status"] != "nothing" or idle_metrics:
            self.last_metrics = self.clock()
        self._after(result.record, due)
        return result

    def _after(self, rec: dict[str, Any], due: list[str]) -> None:
        """Back-off for the groups that failed this round; a DDL or a failure calls for a new pre-flight."""
        errors = [e for e in rec.get("errors") or () if e.get("group")]
        failed = {e["group"] for e in errors if e.get("type") != "LockHeldError"}
        locked = {e["group"] for e in errors if e.get("type") == "LockHeldError"}
        for g in due:
            st = self.states[g]
            s = (rec.get("sync") or {}).get(g) or {}
            if g in locked and g not in failed:
                continue  # another job (a cron run's last round, a repair) holds it: tried again next round
            if g in failed or s.get("ok") is False:
                st.failures += 1
                st.last_error = next((e.get("message") for e in rec.get("errors") or () if e.get("group") == g),
                                     s.get("note"))
                st.checked = False
                wait = min(MAX_BACKOFF, max(self.interval, 0.5) * 2 ** (st.failures - 1))
                st.next_try = self.clock() + wait
                log.warning("group failed; trying again after a back-off", group=g, failures=st.failures,
                            seconds=round(wait, 1))
            else:
                if st.failures:
                    log.info("group recovered", group=g, after_failures=st.failures)
                st.failures, st.next_try, st.last_error = 0, 0.0, None
                if s.get("ddl"):
                    st.checked = False

    def _backoff_brief(self, due: list[str]) -> dict[str, Any]:
        now = self.clock()
        return {g: {"failures": st.failures, "retry_in_s": round(max(0.0, st.next_try - now), 1)}
                for g, st in self.states.items() if g not in due}

    def _held_off(self, due: list[str]) -> dict[str, dict[str, Any]]:
        """The groups sitting out, with their last error (recorded as errors of the round)."""
        brief = self._backoff_brief(due)
        return {g: {**b, "error": self.states[g].last_error} for g, b in brief.items()}

    def more_pending(self, rec: dict[str, Any]) -> bool:
        """A due group still has pending batches after its round (``--max-batches`` cut it): go on at once."""
        groups = (rec.get("lag") or {}).get("groups") or {}
        return any((groups.get(g) or {}).get("pending_batches") and self.states[g].failures == 0
                   for g in rec.get("groups") or ())

    def run(self, max_rounds: int | None = None) -> RunResult:
        """Rounds every ``interval`` seconds until SIGTERM/SIGINT (or ``max_rounds``)."""
        log.info("following", source=self.cfg.source.name, groups=",".join(self.group_ids), interval=self.interval,
                 follower=self.follower_id)
        last: RunResult | None = None
        active: RunResult | None = None  # the newest round that did something (applied, failed, ...)
        try:
            while max_rounds is None or self.rounds < max_rounds:
                _stop_if_requested(self.rounds)
                t0 = self.clock()
                last = self.round()
                if last.record.get("status") != "nothing":
                    active = last
                if last.exit_code == exitcodes.INTERRUPTED:
                    break
                if (self.spark is not None and not _alive(self.spark)) or (self.spark is None and _gateway_dead()):
                    log.error("the Spark JVM is gone; stopping (a supervisor should start the follower again)")
                    return RunResult({**last.record, "status": "failed", "exit": exitcodes.FAILED},
                                     exitcodes.FAILED)
                if max_rounds is not None and self.rounds >= max_rounds:
                    break
                if not self.more_pending(last.record):
                    _stop_if_requested(self.rounds)
                    self.sleep(max(0.0, self.interval - (self.clock() - t0)))
        except KeyboardInterrupt:  # between rounds: nothing is in flight
            log.info("stopped between rounds", rounds=self.rounds)
            rec = dict(last.record) if last is not None else {}
            rec.update(status="interrupted", exit=exitcodes.INTERRUPTED)
            return RunResult(rec, exitcodes.INTERRUPTED)
        finally:
            self.stop()
        assert last is not None
        return active or last  # --rounds N: a last idle round does not hide the work or failure before it

    def claim(self) -> None:
        """Hold each group's follow lock while the follower runs (released by :meth:`stop`, or by
        the kernel when the process ends): other jobs leave the group to this follower
        (:func:`pipeline.job.rounds.follower_of`), and a second follower of a group is refused."""
        store = open_store(self.cfg, create=True)
        for g in self.group_ids:
            path = follow_lock_path(store, g)

            def probed(e: BaseException, path: Path = path) -> bool:
                """Held by a job probing the lock for an instant (a holder that recorded itself is not)."""
                return isinstance(e, LockHeldError) and read_holder(path) is None

            try:
                held = retrying(attempts=10, on=probed, wait=wait_fixed(0.1))(
                    acquire, path, f"follow ({g})", f"only one follower may apply group {g!r}")
            except LockHeldError:
                self.release()
                raise
            self.claims.append(held)

    def release(self) -> None:
        """Drop the follow locks."""
        for held in self.claims:
            held.release()
        self.claims.clear()

    def stop(self) -> None:
        """Stop the Spark session (cancels a job a SIGTERM left running); drop the follow locks."""
        self.release()
        if self.spark is not None:
            try:
                self.spark.stop()
            except Exception:  # noqa: BLE001 - the JVM may already be gone
                pass
            self.spark = None


def mapping_files(cfg: Config, group_id: str) -> tuple:
    """``(path, mtime_ns, size)`` of every file the group's mapping patterns match now."""
    group = cfg.group(group_id)
    base = Path(cfg.file).resolve().parent if cfg.file not in ("", "<config>") else Path.cwd()
    out = []
    for item in group.mappings:
        pattern = item if os.path.isabs(item) else str(base / item)
        for p in sorted(glob.glob(pattern, recursive=True)):
            try:
                st = os.stat(p)
            except OSError:
                continue
            out.append((p, st.st_mtime_ns, st.st_size))
    return tuple(out)


def _default_load(cfg: Config, g: str) -> Any:
    from pipeline.job.group import load_group

    return load_group(cfg, g)


def _alive(spark: Any) -> bool:
    """Does the session's JVM still answer?"""
    try:
        spark.sparkContext._jvm.java.lang.System.currentTimeMillis()
        return True
    except Exception:  # noqa: BLE001 - py4j: the gateway is gone
        return not hasattr(spark, "sparkContext")


def _gateway_dead() -> bool:
    """PySpark's process-wide JVM gateway exists and its JVM has ended (killed while the session was
    starting): no session can start in this process any more (every attempt meets the dead gateway),
    so the follower must end for its supervisor to start a new one."""
    try:
        from pyspark import SparkContext
    except ImportError:  # pragma: no cover - pyspark is a dependency
        return False
    proc = getattr(getattr(SparkContext, "_gateway", None), "proc", None)  # pyspark's launch_gateway sets it
    return proc is not None and proc.poll() is not None


def run_follow(cfg: Config, *, groups: list[str] | None = None, spark_factory: Callable[[int], Any] | None = None,
               interval: float = 1.0, max_rounds: int | None = None, **kw: Any) -> RunResult:
    """``sluice run --follow``: check what can be checked once (the groups, the store, every
    group's mapping files: a mistake there ends it at once, exit 2, before Spark starts), then
    :meth:`Follower.run`. ``kw``: the :class:`Follower` fields (capture, max_batches, ...)."""
    ids = list(groups) if groups else [g.groupId for g in cfg.groups]
    for g in ids:
        cfg.group(g)  # an unknown group: ConfigError
    store = open_store(cfg, create=True)
    store.check_writable()
    follower = Follower(cfg, ids, spark_factory, interval=interval, **kw)
    for g in ids:
        follower._load(cfg, g)  # a mapping file that does not load: ConfigError now, not every round
    follower.claim()  # another follower of a group: LockHeldError (exit 3) before Spark starts
    if spark_factory is not None:  # the JVM starts while the first round captures and checks
        follower.spark_factory = spark_in_thread(spark_factory, 0, adapter_kinds(cfg, ids), scans(cfg))
        follower.retry_factory = spark_factory
    return follower.run(max_rounds)


def _stop_if_requested(rounds: int) -> None:
    """Between rounds: a SIGTERM whose interrupt py4j ate (sluice_common/stopping.py) stops the follower now."""
    if stopping.requested():
        log.warning("a stop was asked for and its interrupt lost mid-round (py4j); stopping between rounds",
                    rounds=rounds)
        raise KeyboardInterrupt
