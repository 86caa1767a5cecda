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
  document or a key-less table is refused.

A refused change of a table the group maps stops the group at that record: the DML before it is
applied, nothing from its batch on is acked, and the message names the position, the table, what
is wrong and the ``sluice repair`` commands that bring the table back; after the repair (a waiver,
:mod:`pipeline.store.waivers`) the group goes past it. Tables no mapping of the group covers never
stop it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipeline.errors import SluiceError
from pipeline.store.waivers import covered

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
    if covered(found_waivers, db, table, logfile, logpos):
        return None
    seq = (rec["batchId"], rec["seq"], 0)
    where = f"{logfile}:{logpos}"
    if rec.get("partial"):
        for r in plan.routes:
            if not _route_hits(r, db, table):
                continue
            kind = plan.targets[plan.mapping_target[r.midx]][0]
            key = tuple(r.key_columns) if r.key_columns is not None else tuple(rec.get("pkNames") or ())
            problem = partial_problem(rec, kind, key)
            if problem is not None:
                return Refusal(seq, db, table, f"{problem} (mapping {plan.mappings[r.midx].file})", where)
        return None
    if table:
        hit = plan.mappings_for(db, table)
    else:
        hit = [i for i, m in enumerate(plan.mappings) if _database_of(m) in (db, None)]
    if not hit:
        return None
    sql = " ".join((rec.get("sql") or "").split())
    what = f"{db}.{table}" if table else f"a table of {db} (which one, the statement does not say)"
    return Refusal(seq, db, table, f"a statement-format write to {what}: the binlog carries the SQL text "
                   f"`{sql[:300]}`, not the rows it changed (the writing session had binlog_format=STATEMENT "
                   "or MIXED)", where, sql=sql)


def _route_hits(route: Any, db: str, table: str) -> bool:
    same = (lambda a, b: a.lower() == b.lower()) if route.case_insensitive else (lambda a, b: a == b)
    return (route.database is None or same(route.database, db)) and (route.table is None or same(route.table, table))


def _database_of(mapping: Any) -> str | None:
    return getattr(mapping.spec, "database", None)


def refusal_error(ref: Refusal, plan: Any, batch: int) -> ChangeRefused:
    """The message for a refusal: position, table, problem, and the repair commands that clear it."""
    cfg = plan.config
    config = cfg.file if cfg.file not in ("", "<config>") else "sluice.yml"
    groups = _groups_mapping(cfg, ref.database, ref.table) or [plan.group_id]
    table = f"{ref.database}.{ref.table}" if ref.table else f"{ref.database}.<each table the groups map>"
    cmds = "; ".join(f"sluice repair --config {config} --group {g} --table {table}" for g in groups)
    return ChangeRefused(
        f"{ref.position}: group {plan.group_id} stops at {ref.problem}. Sluice applies only what the binlog "
        f"describes exactly; nothing from batch {batch} on was acked",
        hint=f"make the table equal to the source again with {cmds} (the group then goes past this change); set "
        "the session's binlog_format=ROW and binlog_row_image=FULL where the source's clients change them")


def _groups_mapping(cfg: Any, db: str, table: str) -> list[str]:
    from pipeline.job.group import load_group

    out = []
    for g in cfg.groups:
        try:
            plan = load_group(cfg, g.groupId)
        except Exception:  # noqa: BLE001 - a group that cannot load maps nothing we can name
            continue
        if plan.mappings_for(db, table) if table else any(_database_of(m) == db for m in plan.mappings):
            out.append(g.groupId)
    return out
