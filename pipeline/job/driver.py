"""The driver side of a sync: pending batches -> segments -> partitions -> ack.

``run_sync`` holds the group's apply lock, takes pending batches from the store (verified),
cuts them at DDL barriers that concern the group's mappings, runs one Spark job per DML
segment (applied on executors by :mod:`pipeline.job.partition`), applies each barrier DDL
on the driver, and acks the batches, in order, only when every partition of every segment
committed. Any failure: no ack, a message naming table/key/error, a non-zero exit.
"""

from __future__ import annotations

import itertools
import json
import time
from contextlib import closing, nullcontext
from dataclasses import dataclass, field
from functools import partial, reduce

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from adapters.base import AppliedFrom, ApplyStats
from adapters.registry import after_ddl, reset_caches
from pipeline.config import Config
from pipeline.job import mapped
from pipeline.job.barriers import apply_ddl, before_refusal, count_in, dml_lines, find_barriers
from pipeline.job.collations import source_charsets_reader
from pipeline.job.group import GroupPlan, load_group
from pipeline.job.hooks import fault_hooks, pause_before_ack, pause_before_ddl
from pipeline.job.partition import JobContext
from pipeline.job.plan import segments
from pipeline.job.refusals import Refusal, refusal_error
from pipeline.job.rounds import RoundSizer, follower_error, follower_of, units
from pipeline.job.scan import RoundFiles, RoundFrame, scan_plan
from pipeline.job.segment import run_segment
from pipeline.job.session import codegen_for_round
from pipeline.state.deadletter import DeadLetterStore
from pipeline.state.waivers import waivers
from pipeline.store import GroupLog, open_store
from sluice_common import stopping
from sluice_common.logs import get_logger

log = get_logger("sync")
#: DDL epochs of this driver process: every sync starts a new one, and so does every DDL it
#: applies. Executors (whose Python workers a warm session reuses across syncs) drop their
#: schema caches whenever the epoch they are handed differs from the last one they saw, so an
#: epoch must never repeat in one driver (``sluice run --follow`` syncs many times).
_EPOCHS = itertools.count(1)


def round_partitions(rows: int, partitions: int | None, cfg: Config) -> int:
    """Partitions of a round of ``rows`` rows: ``partitions`` when given (``--partitions``),
    else one for a small round (at most ``spark.smallRows``: no shuffle, no sort, one Python
    worker), else ``spark.partitions``."""
    if partitions:
        return partitions
    small = cfg.spark.smallRows
    return 1 if small and rows <= small else cfg.spark.partitions


@dataclass
class SyncSummary:
    """What one ``sluice sync`` did."""

    group: str
    batches: int = 0
    rows: int = 0
    ddl: int = 0
    seconds: float = 0.0
    acked_to: int = 0
    stats: ApplyStats = field(default_factory=ApplyStats)
    #: executor-side totals from Spark accumulators (pipeline/job/accumulators.py)
    executor: dict = field(default_factory=dict)
    #: rows sent to the dead-letter store, ``{mapping file: {db.table: n}}`` (docs/deadletter.md)
    dead_lettered: dict = field(default_factory=dict)
    #: rows acked without being applied because no mapping covers their table any more, by ``db.table``
    unmapped: dict = field(default_factory=dict)
    #: what changed in the group's mappings since its last sync, and what to do (pipeline/job/mapped.py)
    notes: list = field(default_factory=list)
    #: the follower this sync left the group to after a round (batches may still be pending)
    yielded_to: str | None = None

    def as_dict(self) -> dict:
        rate = self.rows / self.seconds if self.seconds else 0.0
        return {"group": self.group, "batches": self.batches, "rows": self.rows, "ddl": self.ddl,
                "seconds": round(self.seconds, 3), "rows_per_s": round(rate, 1), "cursor": self.acked_to,
                **self.stats.as_dict(), "executor": dict(self.executor),
                "deadLettered": {m: dict(t) for m, t in self.dead_lettered.items()},
                "unmapped": dict(self.unmapped), "notes": list(self.notes),
                **({"yieldedTo": self.yielded_to} if self.yielded_to else {})}

    def add_dead_lettered(self, counts: dict[str, dict[str, int]]) -> None:
        for m, tables in counts.items():
            mine = self.dead_lettered.setdefault(m, {})
            for t, n in tables.items():
                mine[t] = mine.get(t, 0) + n


def run_sync(cfg: Config, group_id: str, spark: SparkSession, *, max_batches: int = 50,
             partitions: int | None = None, plan: GroupPlan | None = None, locked: bool = False,
             max_rounds: int | None = None, follower: bool = False) -> SyncSummary:
    """Apply the pending batches of ``group_id`` in rounds (each at most ``max_batches``
    batches, sized by :class:`pipeline.job.rounds.RoundSizer`), acking each round only when it
    fully committed; until nothing is pending, or ``max_rounds`` rounds ran.

    ``plan``: the group already loaded and checked (``load_group`` and ``GroupPlan.check``, done
    before Spark started); else it is loaded and checked here. ``locked``: the caller holds the
    group's apply lock (taken before Spark started); else it is taken here. Unless ``follower``
    (``sluice run --follow`` itself), a sync leaves the group to a follower that runs: refused
    before its first round, stopped after the round in progress when one starts meanwhile
    (``summary.yielded_to``), so it never holds the apply lock against the follower for more
    than a round."""
    if plan is None:
        plan = load_group(cfg, group_id)
        plan.check()
    store: GroupLog = open_store(cfg, create=False)
    if store.capabilities.checks_plan:
        store.check_plan(plan)  # a canal topic refuses what its partitioning cannot give
    summary = SyncSummary(group_id)
    t0 = time.monotonic()
    if not follower and (holder := follower_of(store, group_id)) is not None:
        raise follower_error(group_id, holder)
    # one source connection for the sync's replayed DDL (a run of a thousand CREATE TABLEs: one login)
    with nullcontext() if locked else store.apply_lock(group_id), closing(source_charsets_reader(plan)) as charsets:
        summary.acked_to = started_at = store.cursor(group_id)
        changes = mapped.compare(store.root, group_id, plan.mappings, plan.default_schemas())
        changes.joined = mapped.joined(store, group_id)
        sizer = RoundSizer.load(store.root, group_id, cfg.spark)
        done, drained = 0, False
        epoch = next(_EPOCHS)  # a new sync reads the targets' schemas afresh (DDL by anyone since)
        reset_caches(epoch)
        dead = _dead_letter_store(store, plan)
        blocked = dead.blocked() if dead is not None else frozenset()
        generation, recaptures = store.lineage()
        lineage = {"scope": store.scope(group_id), "generation": generation, "recaptures": recaptures}
        keys = plan.key_plan()
        rounds = 0
        said: set[str] = set()  # the lacked-column notes logged so far (ApplyStats.lacked)
        found_waivers = waivers(store.root)
        while max_rounds is None or done < max_rounds:
            if stopping.requested():  # a SIGTERM whose interrupt was lost (in a finalizer): no new round
                raise KeyboardInterrupt
            if done and not follower and (holder := follower_of(store, group_id)) is not None:
                summary.yielded_to = holder.describe()
                log.info("a follower started: leaving the group to it", group=group_id, follower=summary.yielded_to)
                break
            batches = store.get(group_id, max_batches)
            if not batches:
                drained = True
                break
            n = sizer.take(batches)
            if n < len(batches):
                store.rollback(group_id)
                batches = store.get(group_id, n)
            records = store.ddl_records(batches)
            if records is not None:  # a refused change in a later batch: this round ends before it
                batches = before_refusal(batches, records, plan, found_waivers)
                records = [r for r in records if r["batchId"] <= batches[-1].batch_id]
            size, tr = units(batches), time.monotonic()
            files = RoundFiles(store, batches)
            if files.local:  # a corrupt batch refuses the round before anything of it runs or is recorded
                files.verify()
            sizer.begin(size)
            ids = [b.batch_id for b in batches]
            nrows = sum(b.rows for b in batches)
            nparts = round_partitions(nrows, partitions, cfg)
            codegen_for_round(spark, nrows, cfg.spark.smallRows)
            log.info("round", group=group_id, batches=f"{ids[0]}..{ids[-1]}", rows=nrows, partitions=nparts)
            dml = RoundFrame(partial(store.frame, spark, batches, ordered=nparts == 1))
            in_order = store.in_order(batches)
            if changes.dropped:  # acked without being applied: counted for the summary
                mapped.count_skipped(dml.frame(), changes.dropped, summary.unmapped)
            barriers, ddl_positions, waived = find_barriers(dml, plan, records, found_waivers)
            if waived:  # refused changes a repair made good: the repair wrote their tables past them
                dml.where(~reduce(lambda a, b: a | b, [(F.col("batchId") == b) & (F.col("seq") == q)
                                                       for b, q in waived]))
            cuts = segments(barriers)
            if len(cuts) > 1:
                dml.persist()  # read once, cut several times (if the plan reads it at all)
            round_dir = dead.new_round(ids[0], ids[-1]) if dead is not None else None
            try:
                for si, seg in enumerate(cuts):
                    if any(b.records < 0 for b in batches) or dml_lines(seg, batches) > count_in(seg, ddl_positions):
                        if keys is None:  # after a run of DDLs: the key rules of the schema they left
                            keys = plan.key_plan()
                        dl = {} if round_dir is None else {"dead_letter_dir": str(round_dir), "segment": si,
                                                           "blocked": blocked}
                        ctx = JobContext(plan.mappings, plan.mapping_target, plan.targets, epoch,
                                         **fault_hooks(), **dl, **lineage,
                                         applied_from=_applied_from(cfg, group_id, store, batches))
                        scan = scan_plan(files, seg, plan.routes, keys, nparts, waived, cfg.spark.scan)
                        run_segment(spark, None if scan is not None else dml.frame(), seg, plan, ctx, nparts,
                                    summary, keys, in_order, scan)
                        if round_dir is not None:  # later segments wait behind these keys too
                            blocked = blocked | {(e["mapping"], e["table"], e["key"])
                                                 for e in dead.round_entries(round_dir)}
                    if isinstance(seg.ddl, Refusal):
                        raise refusal_error(seg.ddl, plan, seg.ddl.seq[0])
                    if seg.ddl is not None:
                        pause_before_ddl()
                        apply_ddl(plan, seg.ddl, lineage["scope"], charsets)
                        summary.ddl += 1
                        epoch = next(_EPOCHS)
                        after_ddl(epoch)  # the writer forgot the tables it changed; executors: all
                        keys = None       # read again before the next DML, once for a run of DDLs
                if round_dir is not None:  # durable before the ack; a crash before it: rerun
                    counts = dead.commit_round(round_dir)
                    summary.add_dead_lettered(counts)
                    for m, tables in counts.items():
                        for t, n in tables.items():
                            log.warning("dead-lettered", group=group_id, mapping=m, table=t, rows=n)
            except BaseException:
                store.rollback(group_id)
                if round_dir is not None:
                    dead.discard_uncommitted()
                sizer.failed(size)
                raise
            finally:
                dml.unpersist()
            rounds += 1
            pause_before_ack(rounds, ids)  # crash tests: every partition committed, nothing acked
            store.ack_round(group_id, ids)
            sizer.done(size, time.monotonic() - tr)
            done += 1
            summary.batches += len(batches)
            summary.acked_to = ids[-1]
            log.info("acked", group=group_id, cursor=ids[-1], rows=nrows, seconds=round(time.monotonic() - tr, 2))
            for note in mapped.lacked_notes(cfg, group_id, {k: n for k, n in summary.stats.lacked.items()
                                                            if k not in said}):
                log.warning("changes applied without a mapped column their table did not have then",
                            group=group_id, note=note)  # now: a later round that fails returns no summary
            said.update(summary.stats.lacked)
        summary.notes = mapped.notes(cfg, group_id, changes, summary.unmapped, started_at)
        for note in summary.notes:
            log.warning("the group's mappings changed since its last sync", group=group_id, note=note)
        summary.notes += mapped.lacked_notes(cfg, group_id, summary.stats.lacked)
        if drained or not store.get(group_id, 1):  # a bounded sync that left batches says it again next time
            mapped.remember(store.root, group_id, plan.mappings, plan.default_schemas())
        store.rollback(group_id)
    summary.seconds = time.monotonic() - t0
    return summary


def _applied_from(cfg: Config, group_id: str, store: GroupLog, batches: list) -> AppliedFrom:
    """What the round's chunks record in their targets: the round's start position (the group
    acked everything before it), so a store that is lost can be resumed from the targets."""
    return AppliedFrom(cfg.source.name, f"{cfg.source.host}:{cfg.source.port}", group_id,
                       json.dumps(batches[0].start, sort_keys=True), store.store_id, batches[0].batch_id)


def _dead_letter_store(store: GroupLog, plan: GroupPlan) -> DeadLetterStore | None:
    """The group's dead-letter store when a mapping has ``deadLetter`` on (rounds of syncs that
    did not ack are deleted first); warns about live entries of mappings that turned it off."""
    dead = DeadLetterStore(store.root, plan.group_id)
    dead.discard_uncommitted()
    on = {m.file for m in plan.mappings if m.deadLetter}
    for m, tables in dead.summary()["live"].items():
        if m not in on:
            log.warning("dead-letter entries of a mapping without deadLetter: later changes of their keys are "
                        "applied without waiting; replay or clear them first", mapping=m, rows=sum(tables.values()))
    return dead if on else None

