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
import os
import re
import time
from contextlib import closing, nullcontext
from dataclasses import dataclass, field, replace
from functools import partial, reduce

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from adapters.base import AppliedFrom, ApplyStats, Change, DdlChange
from adapters.registry import after_ddl, reset_caches
from pipeline.config import Config
from pipeline.job import mapped
from pipeline.job.accumulators import merge, new_counter
from pipeline.job.collations import SourceCharsetsReader, source_charsets_reader
from pipeline.job.definitions import source_time_zone, with_like_definition
from pipeline.job.group import GroupPlan, load_group
from pipeline.job.partition import JobContext, apply_function
from pipeline.job.plan import partitioned_changes, segments
from pipeline.job.refusals import Refusal, find, refusal_error
from pipeline.job.rounds import RoundSizer, follower_error, follower_of, units
from pipeline.job.scan import RoundFiles, RoundFrame, ScanPlan, scan_plan
from pipeline.job.schema import RESULT_SCHEMA
from pipeline.job.session import codegen_for_round
from pipeline.retry import first_line
from pipeline.state.deadletter import DeadLetterStore
from pipeline.state.waivers import waivers
from pipeline.store import GroupLog, open_store
from pipeline.writers import Lineage, Options, Writers
from sluice_common import stopping
from sluice_common.errors import SluiceError
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


class ApplyFailed(SluiceError):
    """At least one partition did not commit; nothing was acked."""

    exit_code = 1


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
        changes = mapped.compare(store.root, group_id, plan.mappings)
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
                batches = _before_refusal(batches, records, plan, found_waivers)
                records = [r for r in records if r["batchId"] <= batches[-1].batch_id]
            size, tr = units(batches), time.monotonic()
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
            barriers, ddl_positions, waived = _barriers(store, batches, dml, plan, records, found_waivers)
            if waived:  # refused changes a repair made good: the repair wrote their tables past them
                dml.where(~reduce(lambda a, b: a | b, [(F.col("batchId") == b) & (F.col("seq") == q)
                                                       for b, q in waived]))
            cuts = segments(barriers)
            if len(cuts) > 1:
                dml.persist()  # read once, cut several times (if the plan reads it at all)
            round_dir = dead.new_round(ids[0], ids[-1]) if dead is not None else None
            files = RoundFiles(store, batches)
            if files.local:
                files.verify()
            try:
                for si, seg in enumerate(cuts):
                    if any(b.records < 0 for b in batches) or _dml_lines(seg, batches) > _count_in(seg, ddl_positions):
                        if keys is None:  # after a run of DDLs: the key rules of the schema they left
                            keys = plan.key_plan()
                        dl = {} if round_dir is None else {"dead_letter_dir": str(round_dir), "segment": si,
                                                           "blocked": blocked}
                        ctx = JobContext(plan.mappings, plan.mapping_target, plan.targets, epoch,
                                         **_test_hooks(), **dl, **lineage,
                                         applied_from=_applied_from(cfg, group_id, store, batches))
                        scan = scan_plan(files, seg, plan.routes, keys, nparts, waived, cfg.spark.scan)
                        _run_segment(spark, None if scan is not None else dml.frame(), seg, plan, ctx, nparts,
                                     summary, keys, in_order, scan)
                        if round_dir is not None:  # later segments wait behind these keys too
                            blocked = blocked | {(e["mapping"], e["table"], e["key"])
                                                 for e in dead.round_entries(round_dir)}
                    if isinstance(seg.ddl, Refusal):
                        raise refusal_error(seg.ddl, plan, seg.ddl.seq[0])
                    if seg.ddl is not None:
                        _pause_before_ddl()
                        _apply_ddl(plan, seg.ddl, lineage["scope"], charsets)
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
            _pause_before_ack(rounds, ids)  # crash tests: every partition committed, nothing acked
            store.ack_round(group_id, ids)
            sizer.done(size, time.monotonic() - tr)
            done += 1
            summary.batches += len(batches)
            summary.acked_to = ids[-1]
            log.info("acked", group=group_id, cursor=ids[-1], rows=nrows, seconds=round(time.monotonic() - tr, 2))
        summary.notes = mapped.notes(cfg, group_id, changes, summary.unmapped, started_at)
        for note in summary.notes:
            log.warning("the group's mappings changed since its last sync", group=group_id, note=note)
        if drained or not store.get(group_id, 1):  # a bounded sync that left batches says it again next time
            mapped.remember(store.root, group_id, plan.mappings)
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


def _test_hooks() -> dict:
    """Fault-injection settings for the crash tests, from the environment (off by default)."""
    rows = os.environ.get("SLUICE_TEST_PAUSE_AFTER_ROWS")
    if not rows:
        return {}
    return {"pause_after_rows": int(rows), "pause_marker": os.environ.get("SLUICE_TEST_PAUSE_MARKER")}


def _pause_before_ddl() -> None:
    """Fault-injection hook of the crash tests (off unless ``SLUICE_TEST_PAUSE_BEFORE_DDL`` names a
    marker file): before the first barrier DDL of the run -- the DML before it committed, nothing
    acked -- write the marker (this pid) and wait 120 s, or until ``<marker>.go`` exists."""
    marker = os.environ.get("SLUICE_TEST_PAUSE_BEFORE_DDL")
    if marker:
        _pause(marker, f"{os.getpid()}\n")


def _pause_before_ack(round_no: int, batch_ids: list[int]) -> None:
    """Fault-injection hook of the crash tests (off unless ``SLUICE_TEST_PAUSE_BEFORE_ACK`` is
    ``round_no`` and ``SLUICE_TEST_PAUSE_MARKER`` names a marker file): every partition of every
    segment of this run's ``round_no``-th round committed (dead letters durable), nothing of it
    acked, the rounds before it acked. The marker holds this pid and the round's batch ids as
    JSON; then as :func:`_pause_before_ddl`."""
    marker = os.environ.get("SLUICE_TEST_PAUSE_MARKER")
    if marker and os.environ.get("SLUICE_TEST_PAUSE_BEFORE_ACK") == str(round_no):
        _pause(marker, json.dumps({"pid": os.getpid(), "round": round_no, "batches": batch_ids}) + "\n")


def _pause(marker: str, text: str) -> None:
    """Write ``text`` to ``marker`` (whole before it appears; once per marker) and wait 120 s, or
    until ``<marker>.go`` exists."""
    tmp = f"{marker}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    try:
        os.link(tmp, marker)
    except FileExistsError:
        return
    finally:
        os.unlink(tmp)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not os.path.exists(marker + ".go"):
        time.sleep(0.2)


def _inside(seg, pos: tuple[int, int]) -> bool:
    return (seg.start is None or pos > seg.start) and (seg.end is None or pos < seg.end)


def _dml_lines(seg, batches) -> int:
    """How many lines (DML or DDL) of these batches lie strictly inside the segment."""
    n = 0
    for b in batches:
        lo = 0 if seg.start is None or seg.start[0] < b.batch_id else seg.start[1] + 1
        hi = b.records if seg.end is None or seg.end[0] > b.batch_id else seg.end[1]
        if (seg.start is None or seg.start[0] <= b.batch_id) and (seg.end is None or b.batch_id <= seg.end[0]):
            n += max(0, hi - lo)
    return n


def _count_in(seg, positions: list[tuple[int, int]]) -> int:
    return sum(1 for p in positions if _inside(seg, p))


def _barriers(store: GroupLog, batches, dml: RoundFrame, plan: GroupPlan, rows: list[dict] | None = None,
              found_waivers: dict | None = None) -> tuple[list, list[tuple[int, int]]]:
    """The barriers of the round, in order: DDL lines that concern a mapping of the group (DML around
    them is cut), and the first change the group refuses (:mod:`pipeline.job.refusals`), after which
    nothing is applied; and the positions of every line that holds no rows (to skip segments that
    hold no DML at all).

    The batch metadata lists each batch's barrier seqs, so only batches that have them are read
    (on the driver); a store written before that was recorded is scanned with Spark (DDL only).
    """
    if rows is None:  # the job's row schema has no event time (``es``): a DDL scanned here has none
        df = dml.frame()
        cols = ["batchId", "seq", "database", "table", "type", "sql", *(["es"] if "es" in df.columns else [])]
        rows = [r.asDict() for r in (df.where(F.coalesce(F.col("isDdl"), F.lit(False)))
                                     .select(*cols).orderBy("batchId", "seq").collect())]
    out, positions, waived = [], [], []
    for r in rows:
        if r.get("isDdl") is False:  # a statement-format write or a partial row image
            if not r.get("partial"):
                positions.append((r["batchId"], r["seq"]))
            refusal = find(r, plan, found_waivers or {})
            if refusal is not None:
                out.append(refusal)
                break
            if r.get("partial") and found_waivers and find(r, plan, {}) is not None:
                waived.append((r["batchId"], r["seq"]))  # repaired past: its partial rows are not applied
            continue
        positions.append((r["batchId"], r["seq"]))
        ddl = DdlChange(r.get("type") or "QUERY", r.get("database") or "", r.get("table") or "", r.get("sql") or "",
                        (r["batchId"], r["seq"], 0), int(r.get("es") or 0), time_zone=r.get("timeZone") or "",
                        usec=r.get("usec"))
        if plan.mappings_for(ddl.database, ddl.table):
            out.append(ddl)
    return out, positions, waived


def _before_refusal(batches: list, records: list[dict], plan: GroupPlan, found_waivers: dict) -> list:
    """The round's batches, ending before the batch of the first refused change when that is not the
    first batch (so everything before it is applied and acked; the next round stops inside it)."""
    for r in records:
        if r.get("isDdl") is False and find(r, plan, found_waivers) is not None:
            if r["batchId"] > batches[0].batch_id:
                return [b for b in batches if b.batch_id < r["batchId"]]
            return batches[:1]  # the round stops inside its first batch: read no more
    return batches


def _run_segment(spark, dml, seg, plan: GroupPlan, ctx: JobContext, nparts: int, summary: SyncSummary,
                 keys=None, in_order: bool = True, scan: ScanPlan | None = None) -> None:
    """One Spark job for one DML segment: the plan's partitions (:mod:`pipeline.job.plan`), or with
    ``scan`` one task per partition that reads the round's files itself (:mod:`pipeline.job.scan`)."""
    t0 = time.monotonic()
    if scan is None:
        changes = partitioned_changes(dml, seg, plan.routes, nparts, keys, in_order)
    else:
        changes = spark.range(0, nparts, 1, nparts)
    t_plan = time.monotonic() - t0
    counters = new_counter(spark)
    try:
        results = changes.mapInArrow(apply_function(ctx, counters, scan), RESULT_SCHEMA).collect()
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
        lines = [f"partition {r['partition']}: table {r['error_table']} key {r['error_key']}: {r['error']}"
                 for r in failed]
        said = any("fix:" in (r["error"] or "") for r in failed)  # the partition's error says what to do
        raise ApplyFailed(f"{len(failed)} of {len(results)} partitions failed; no batch was acked:\n  "
                          + "\n  ".join(lines),
                          hint=None if said else "fix the cause and run sync again; replays are idempotent")


def _apply_ddl(plan: GroupPlan, ddl: DdlChange, scope: str = "", charsets: SourceCharsetsReader | None = None,
               retries: int = 5, backoff_max: float = 20.0) -> None:
    """Apply a barrier DDL (or TRUNCATE) to the targets of the mappings it concerns; a
    TransientError (the target restarting) is retried with backoff like a chunk (replaying a
    DDL is idempotent: its ledger, its "already applied" errors; TRUNCATE is). A ``CREATE TABLE ...
    LIKE`` of another database's table gets that table's definition from the source when it is
    provably the one copied (:mod:`pipeline.job.definitions`)."""
    midxs = plan.mappings_for(ddl.database, ddl.table)
    if any(getattr(plan.mappings[i].spec, "mirrorDb", False) for i in midxs):
        ddl = with_like_definition(plan.config.source, ddl)
        if not ddl.time_zone or ddl.time_zone.upper() == "SYSTEM":
            ddl = replace(ddl, time_zone=source_time_zone(plan.config.source, ddl.time_zone or None))
    for midx in midxs:
        mapping = plan.mappings[midx]

        def retrying_after(attempt: int, e: BaseException, delay: float, mapping=mapping) -> None:
            log.warning("transient error, retrying the DDL", mapping=mapping.file, attempt=attempt, of=retries,
                        delay=delay, error=first_line(e))

        _apply_ddl_to(plan, midx, ddl, scope, charsets, retries, backoff_max, retrying_after)
        log.info("ddl", database=ddl.database, table=ddl.table, kind=ddl.kind, mapping=mapping.file)


def _apply_ddl_to(plan: GroupPlan, midx: int, ddl: DdlChange, scope: str, charsets: SourceCharsetsReader | None,
                  retries: int, backoff_max: float, before_sleep) -> None:
    """One transaction on a writer of its own (:class:`pipeline.writers.Writers`) made with all of
    the target's mappings (a statement may name another mirrored database: a foreign key); the DDL
    ledger records which store and group replayed it (lineage), the source's charset defaults come
    from ``charsets`` or a reader of its own per writer made, closed here."""
    mapping = plan.mappings[midx]
    own: list[SourceCharsetsReader] = []

    def reader() -> SourceCharsetsReader:
        if charsets is not None:
            return charsets
        own.append(source_charsets_reader(plan))
        return own[-1]

    def work(writer) -> None:
        if ddl.kind == "TRUNCATE":
            writer.apply(mapping, [Change("TRUNCATE", ddl.database, ddl.table, {}, seq=ddl.seq)])
        else:
            writer.apply_ddl(mapping, ddl)

    ws = Writers(plan, Options(retries=retries, backoff_max=backoff_max, lineage=Lineage(scope),
                               source_charsets=reader))
    try:
        ws.transaction(midx, work, before_sleep=before_sleep)
    finally:
        ws.close(quietly=True)  # a failed try's writer was rolled back and closed already
        for r in own:
            r.close()
