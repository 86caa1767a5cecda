"""Changes a group refuses: what the binlog does not describe exactly stops the group there, by name.

Capture lists two kinds of records among a batch's barriers besides DDL (``pipeline/capture``):

* **statement-format writes** (``isDdl: false``, ``type: QUERY``): a session with
  ``binlog_format=STATEMENT`` (or a MIXED server, ``LOAD DATA``) logged SQL text, not rows; the
  record names a table the statement may write (``table: ""``: some table of the database).
* **row images without every column** (a ``partial`` member: the columns each image carries): a
  session with ``binlog_row_image=MINIMAL`` or ``NOBLOB``. Such a change is applied only where it
  is exact: an UPDATE or DELETE into an RDB or HBase target whose key columns the before image
  carries and the UPDATE does not change (the UPDATE then sets just the columns it carries). An
  INSERT (its missing columns took defaults the binlog does not give), a key change, an ES
  document or a key-less table is refused, and so is an UPDATE with ``unknown`` columns (a MySQL
  partial JSON update whose before image lacks the document: the new one is not in the binlog).

A refused change of a table the group maps stops the group at that record: the DML before it is
applied, nothing from its batch on is acked, and the message names the position, the table, what
is wrong and the ``sluice repair`` commands that bring the table back; after the repair (a waiver,
:mod:`pipeline.state.waivers`) the group goes past it. Tables no mapping of the group covers never
stop it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipeline.state.waivers import ROLLED_BACK, covered
from sluice_common.errors import SluiceError

#: target kinds that apply a partial UPDATE/DELETE by key exactly (ES rebuilds whole documents)
PARTIAL_KINDS = ("rdb", "hbase")


class ChangeRefused(SluiceError):
    """The group reached a change it cannot apply exactly; nothing from its batch on was acked."""

    exit_code = 1


@dataclass(frozen=True)
class Refusal:
    """Where the group stops, and why."""

    seq: tuple[int, int, int]   # (batchId, seq, 0): a barrier in the round's order
    database: str
    table: str
    problem: str
    position: str
    kind: str = "REFUSE"
    sql: str = ""


def partial_problem(rec: dict[str, Any], mapping_kind: str, key: tuple[str, ...]) -> str | None:
    """Why a record with a partial row image cannot be applied to a mapping (None: it can)."""
    kind, cols = rec.get("type"), rec.get("partial") or {}
    before, after = set(cols.get("before") or ()), set(cols.get("after") or ())
    lacks = [c for c in (rec.get("mysqlType") or {}) if c not in (after if kind != "DELETE" else before)]
    image = f"row image{'s lack' if kind == 'UPDATE' else ' lacks'} columns " \
            f"({', '.join(lacks) if kind != 'UPDATE' else _cols(before, after)}), as the writing session's " \
            "binlog_row_image=MINIMAL or NOBLOB logs them"
    unknown = cols.get("unknown")
    if unknown:
        return (f"an UPDATE that changed {', '.join(unknown)} to a document the binlog does not carry: a partial "
                "JSON update (binlog_row_value_options=PARTIAL_JSON) logged without the before image's document "
                "(the writing session's binlog_row_image was not FULL)")
    if kind == "INSERT":
        return f"an INSERT whose {image}: the columns it lacks took values the binlog does not give"
    if mapping_kind not in PARTIAL_KINDS:
        return f"a {kind} whose {image}: a {mapping_kind} target needs the whole row"
    if not key:
        return f"a {kind} of a table without a primary key whose {image}: no key to find the target row by"
    missing = [k for k in key if k not in before]
    if missing:
        return f"a {kind} whose {image}: the key column{'s' if len(missing) > 1 else ''} " \
               f"{', '.join(missing)} of the target row {'are' if len(missing) > 1 else 'is'} not in it"
    if kind == "UPDATE":
        for old in rec.get("old") or ():
            changed = [k for k in key if k in (old or {})]
            if changed:
                return f"an UPDATE that changes the key ({', '.join(changed)}) whose {image}: the row under " \
                       "its new key would be missing the columns the images lack"
    return None


def _cols(before: set[str], after: set[str]) -> str:
    return f"before image: {', '.join(sorted(before)) or '-'}; after image: {', '.join(sorted(after)) or '-'}"


def find(rec: dict[str, Any], plan: Any, found_waivers: dict) -> Refusal | None:
    """The refusal of one barrier record for the group (None: the group may go past it)."""
    db, table = rec.get("database") or "", rec.get("table") or ""
    logfile, logpos = rec.get("logfile") or "", int(rec.get("logpos") or 0)
    seq = (rec["batchId"], rec["seq"], 0)
    where = f"{logfile}:{logpos}"
    if rec.get("partial"):
        if covered(found_waivers, db, table, logfile, logpos):
            return None
        for r in plan.routes:
            if not _route_hits(r, db, table):
                continue
            kind = plan.targets[plan.mapping_target[r.midx]][0]
            key = tuple(r.key_columns) if r.key_columns is not None else tuple(rec.get("pkNames") or ())
            problem = partial_problem(rec, kind, key)
            if problem is not None:
                return Refusal(seq, db, table, f"{problem} (mapping {plan.mappings[r.midx].file})", where)
        return None
    hits = [r for r in plan.routes if _route_hits(r, db, table or None)]
    if not hits:
        return None
    if table and covered(found_waivers, db, table, logfile, logpos):
        return None
    if not table and _all_covered(hits, plan, db, found_waivers, logfile, logpos):
        return None
    sql = " ".join((rec.get("sql") or "").split())
    what = f"{db}.{table}" if table else f"a table of {db} (which one, the statement does not say)"
    if sql == ROLLED_BACK:
        return Refusal(seq, db, table, f"a transaction that wrote {what} and was rolled back: the binlog keeps such "
                       "a transaction (with its rows and a ROLLBACK) when it also wrote non-transactional tables, "
                       "whose rows the source kept while undoing the others; which rows it kept the binlog does "
                       "not say", where, sql=sql)
    return Refusal(seq, db, table, f"a statement-format write to {what}: the binlog carries the SQL text "
                   f"`{sql[:300]}`, not the rows it changed (the writing session had binlog_format=STATEMENT "
                   "or MIXED)", where, sql=sql)


def _all_covered(hits: list, plan: Any, db: str, found: dict, logfile: str, logpos: int) -> bool:
    """A statement of ``db`` whose table is unknown is covered when every table of ``db`` the group
    maps is (a mapping of every table of a database: every base table the source has there now)."""
    if not any(d.lower() == db.lower() for d, _ in found):
        return False
    tables = mapped_tables(hits, plan, db)
    return bool(tables) and all(covered(found, db, t, logfile, logpos) for t in tables)


def mapped_tables(hits: list, plan: Any, db: str) -> list[str]:
    """The tables of ``db`` the routes ``hits`` cover (a whole-database route: the source's tables)."""
    named = {r.table for r in hits if r.table is not None}
    if any(r.table is None for r in hits):
        from pipeline.source.catalog import tables_of
        from pipeline.source.connect import connect

        conn = connect(plan.config.source)
        try:
            named.update(tables_of(conn, db))
        finally:
            conn.close()
    return sorted(named)


def _route_hits(route: Any, db: str, table: str | None) -> bool:
    """Does ``route`` cover ``db.table`` (``table`` None: some table of ``db``, which one unknown)?"""
    same = (lambda a, b: a.lower() == b.lower()) if route.case_insensitive else (lambda a, b: a == b)
    return (route.database is None or same(route.database, db)) and \
        (route.table is None or table is None or same(route.table, table))


def _database_of(mapping: Any) -> str | None:
    return getattr(mapping.spec, "database", None)


def refusal_error(ref: Refusal, plan: Any, batch: int) -> ChangeRefused:
    """The message for a refusal: position, table, problem, and the repair commands that clear it
    (one per group that maps the table, and per table a statement of unknown table may have written)."""
    cfg = plan.config
    config = cfg.file if cfg.file not in ("", "<config>") else "sluice.yml"
    groups = _groups_mapping(cfg, ref.database, ref.table) or {plan.group_id: [ref.table]}
    cmds = "; ".join(f"sluice repair --config {config} --group {g} "
                     + " ".join(f"--table {ref.database}.{t}" for t in tables)
                     for g, tables in groups.items())
    return ChangeRefused(
        f"{ref.position}: group {plan.group_id} stops at {ref.problem}. Sluice applies only what the binlog "
        f"describes exactly; nothing from batch {batch} on was acked",
        hint=f"make the table equal to the source again with {cmds} (the group then goes past this change); set "
        "the session's binlog_format=ROW and binlog_row_image=FULL where the source's clients change them")


def _groups_mapping(cfg: Any, db: str, table: str) -> dict[str, list[str]]:
    """``{group: [tables to repair]}`` of every group that maps ``db.table`` (``table`` "": the tables
    of ``db`` each group maps)."""
    from pipeline.job.group import load_group

    out: dict[str, list[str]] = {}
    for g in cfg.groups:
        try:
            plan = load_group(cfg, g.groupId, others=False)
        except Exception:  # noqa: BLE001 - a group that cannot load maps nothing we can name
            continue
        hits = [r for r in plan.routes if _route_hits(r, db, table or None)]
        if hits:
            try:
                out[g.groupId] = [table] if table else (mapped_tables(hits, plan, db) or ["<table>"])
            except Exception:  # noqa: BLE001 - the source cannot be asked: name the placeholder
                out[g.groupId] = ["<each table of the database>"]
    return out
