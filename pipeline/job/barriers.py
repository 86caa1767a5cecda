"""Where a round is cut, and what runs at the cuts (:func:`pipeline.job.driver.run_sync`).

A round's *barriers* are the DDL lines that concern a mapping of the group (the DML around them is
cut into segments, :func:`pipeline.job.plan.segments`) and the first change the group refuses
(:mod:`pipeline.job.refusals`), after which nothing is applied. Each barrier DDL is applied on the
driver (:func:`apply_ddl`) between the segments before and after it.
"""

from __future__ import annotations

from functools import partial

from pyspark.sql import functions as F

from adapters.base import Change, DdlChange
from pipeline.job.collations import SourceCharsetsReader, source_charsets_reader
from pipeline.job.definitions import with_like_definition
from pipeline.job.group import GroupPlan
from pipeline.job.refusals import find
from pipeline.job.scan import RoundFrame
from pipeline.job.zones import ddl_time_zone
from pipeline.retry import first_line
from pipeline.writers import Lineage, Options, Writers
from sluice_common.logs import get_logger

log = get_logger("sync")


def inside(seg, pos: tuple[int, int]) -> bool:
    """Is ``pos`` (batchId, seq) strictly inside the segment?"""
    return (seg.start is None or pos > seg.start) and (seg.end is None or pos < seg.end)


def dml_lines(seg, batches) -> int:
    """How many lines (DML or DDL) of these batches lie strictly inside the segment."""
    n = 0
    for b in batches:
        lo = 0 if seg.start is None or seg.start[0] < b.batch_id else seg.start[1] + 1
        hi = b.records if seg.end is None or seg.end[0] > b.batch_id else seg.end[1]
        if (seg.start is None or seg.start[0] <= b.batch_id) and (seg.end is None or b.batch_id <= seg.end[0]):
            n += max(0, hi - lo)
    return n


def count_in(seg, positions: list[tuple[int, int]]) -> int:
    """How many of ``positions`` lie strictly inside the segment."""
    return sum(1 for p in positions if inside(seg, p))


def find_barriers(dml: RoundFrame, plan: GroupPlan, rows: list[dict] | None = None,
                  found_waivers: dict | None = None) -> tuple[list, list[tuple[int, int]], list[tuple[int, int]]]:
    """The barriers of the round, in order: DDL lines that concern a mapping of the group (DML around
    them is cut), and the first change the group refuses (:mod:`pipeline.job.refusals`), after which
    nothing is applied; the positions of every line that holds no rows (to skip segments that
    hold no DML at all); and the partial-image lines a repair waived (not applied).

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
                        usec=r.get("usec"), zone_read=r.get("sessionRead") is True)
        if plan.mappings_for(ddl.database, ddl.table):
            out.append(ddl)
    return out, positions, waived


def before_refusal(batches: list, records: list[dict], plan: GroupPlan, found_waivers: dict) -> list:
    """The round's batches, ending before the batch of the first refused change when that is not the
    first batch (so everything before it is applied and acked; the next round stops inside it)."""
    for r in records:
        if r.get("isDdl") is False and find(r, plan, found_waivers) is not None:
            if r["batchId"] > batches[0].batch_id:
                return [b for b in batches if b.batch_id < r["batchId"]]
            return batches[:1]  # the round stops inside its first batch: read no more
    return batches


def apply_ddl(plan: GroupPlan, ddl: DdlChange, scope: str = "", charsets: SourceCharsetsReader | None = None,
              retries: int = 5, backoff_max: float = 20.0) -> None:
    """Apply a barrier DDL (or TRUNCATE) to the targets of the mappings it concerns; a
    TransientError (the target restarting) is retried with backoff like a chunk (replaying a
    DDL is idempotent: its ledger, its "already applied" errors; TRUNCATE is). A ``CREATE TABLE ...
    LIKE`` of another database's table gets that table's definition from the source when it is
    provably the one copied (:mod:`pipeline.job.definitions`)."""
    midxs = plan.mappings_for(ddl.database, ddl.table)
    if any(getattr(plan.mappings[i].spec, "mirrorDb", False) for i in midxs):
        ddl = with_like_definition(plan.config.source, ddl)
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
                               source_charsets=reader, ddl_time_zone=partial(ddl_time_zone, plan.config)))
    try:
        ws.transaction(midx, work, before_sleep=before_sleep)
    finally:
        ws.close(quietly=True)  # a failed try's writer was rolled back and closed already
        for r in own:
            r.close()
