"""Pre-flight of a sync: a mirror's target database has the tables of its source database.

A mirror (``dbMapping.mirrorDb``) makes its tables by replaying the source's ``CREATE TABLE``. One
created before the store's first batch, in a target database made by hand with some of the tables
(or none), or dropped there, is never made: its changes fail one by one, and a table without
changes was not named at all, its rows never there (a new user's probe). :func:`check_mirrored_tables`
refuses such a mirror naming every table its target lacks, with the fix of
:func:`pipeline.job.reload.tables_hint` (their definitions, then their rows).

Which tables are asked about:

* a source base table created (or, on MariaDB, last rebuilt or renamed) before the newest event the
  store holds, by more than :data:`MARGIN_SECONDS`: its ``CREATE TABLE`` is then in the store or
  older than it (one younger may still be on its way: capture is behind, or stopped before it);
* not one that a pending DDL statement creates or renames into (``CREATE TABLE``, ``RENAME TABLE
  ... TO``, ``ALTER TABLE ... RENAME TO``): its replay makes it;
* MySQL/MariaDB targets only (the only ones a mirror replays DDL into), compared in any letter case.

A store that cannot say what its pending DDL is (a canal-written topic, batches from an older
Sluice) or that holds no event yet is not checked: the sync then fails, naming the table and the
same fix, at the first change of a table its target lacks (:func:`pipeline.job.reload.missing_table_error`).
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

from adapters.base import TablePair
from adapters.registry import capabilities, make_verifier
from pipeline.job.collations import connect_source
from pipeline.job.reload import keyless_tables, tables_hint
from pipeline.mapping import DbMapping
from pipeline.source import catalog
from pipeline.store.lastevent import last_event_ms
from sluice_common.errors import TargetMismatchError
from sluice_common.logs import get_logger

if TYPE_CHECKING:
    from pipeline.job.group import GroupPlan

log = get_logger("sync")

#: a statement's start (its binlog time) and the time its table was created differ by at most this
#: (a long ``CREATE TABLE ... SELECT``: longer); tests set ``SLUICE_TEST_MIRROR_MARGIN_SECONDS`` to
#: check the tables they have just made
MARGIN_SECONDS = 60

_IDENT = r"(?:`(?:[^`]|``)+`|[\w$]+)(?:\s*\.\s*(?:`(?:[^`]|``)+`|[\w$]+))?"
_TO = re.compile(r"\bTO\s+(" + _IDENT + ")", re.I)
_ALTER_RENAME = re.compile(r"\bRENAME\s+(?!(?:COLUMN|INDEX|KEY)\b)(?:(?:TO|AS)\s+)?(" + _IDENT + ")", re.I)


def check_mirrored_tables(plan: GroupPlan, store: Any) -> None:
    """TargetMismatchError naming the mapping, the target database and the tables it lacks, with
    the fix (see the module docstring); ``store``: the group's batch store."""
    mirrors = [(i, m) for i, m in enumerate(plan.mappings) if isinstance(m.spec, DbMapping) and m.spec.mirrorDb
               and getattr(plan.targets[plan.mapping_target[i]][1], "dialect", None) in ("mysql", "mariadb")
               and capabilities(plan.targets[plan.mapping_target[i]][0]).compare == "checksums"]
    if not mirrors:
        return
    made = _made_by_pending(plan, store)
    newest = last_event_ms(store) if made is not None else None
    if made is None or newest is None:
        log.info("mirrored tables not checked against the target: the store does not say what its pending DDL "
                 "makes, or holds no event yet", group=plan.group_id)
        return
    margin = int(os.environ.get("SLUICE_TEST_MIRROR_MARGIN_SECONDS") or MARGIN_SECONDS)
    conn = connect_source(plan.config)
    try:
        for i, m in mirrors:
            with conn.cursor() as cur:
                settled = catalog.settled_tables(cur, m.spec.database, newest / 1000 - margin)
            _check(plan, m, plan.targets[plan.mapping_target[i]][1], [t for t in settled if t.casefold() not in made])
    finally:
        conn.close()


def _check(plan: GroupPlan, m: Any, target: Any, tables: list[str]) -> None:
    spec = m.spec
    schema = spec.target_schema or spec.database
    verifier = make_verifier("rdb", target, (m,))
    try:
        gone = tuple(p.source_table for p in verifier.absent([TablePair(spec.database, t, schema, t, [], 0)
                                                              for t in tables]))
    finally:
        verifier.close()
    if not gone:
        return
    shown = ", ".join(gone[:20]) + (f" and {len(gone) - 20} more" if len(gone) > 20 else "")
    raise TargetMismatchError(
        f"{m.file}: dbMapping.targetDb: target database {schema} on {target.label} lacks {len(gone)} "
        f"table{'s' if len(gone) > 1 else ''} of source database {spec.database}: {shown}. A mirror makes only the "
        "tables whose CREATE TABLE it replays, so their rows are not there and their changes cannot be applied",
        hint=tables_hint(plan, target, schema, spec.database, gone, keyless_tables(plan, spec.database, gone)))


def _made_by_pending(plan: GroupPlan, store: Any) -> set[str] | None:
    """The tables (case-folded) the group's pending DDL creates or renames into; None: the store
    cannot say without reading every batch."""
    with_ddl = [b for b in store.pending(plan.group_id) if getattr(b, "ddl", None) is None or b.ddl]
    if not with_ddl:
        return set()
    records = store.ddl_records(with_ddl)
    if records is None:
        return None
    made: set[str] = set()
    for rec in records:
        kind, sql = str(rec.get("type") or "").upper(), str(rec.get("sql") or "")
        if kind == "CREATE":
            made.add(str(rec.get("table") or "").casefold())
        elif kind == "RENAME":
            made.update(_last_part(n) for n in _TO.findall(sql))
        elif kind == "ALTER":
            made.update(_last_part(n) for n in _ALTER_RENAME.findall(sql))
    return made


def _last_part(ident: str) -> str:
    """``db.`t``` -> ``t`` (case-folded, unquoted)."""
    parts = re.findall(r"`((?:[^`]|``)+)`|([\w$]+)", ident)
    quoted, plain = parts[-1]
    return (quoted.replace("``", "`") if quoted else plain).casefold()
