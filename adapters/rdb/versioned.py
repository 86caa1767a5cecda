"""System-versioned tables (MariaDB ``WITH SYSTEM VERSIONING``) on a MariaDB target that is
versioned too (a mirror replays the source's CREATE TABLE).

What the binlog carries for a versioned table ``v`` (its period columns, ``row_start``/``row_end``
unless named, are in every row image; capture's key is the primary key plus ``row_end``):

* INSERT: the new row, ``row_end`` at the maximum (a *current* row);
* UPDATE: an update of the current row (``row_start`` becomes the statement's time), then an
  INSERT of the *history* row (the old values, ``row_end`` = that time);
* DELETE: an update of ``row_end`` from the maximum to the statement's time;
* DELETE HISTORY: a delete of each history row it removed.

A versioned target writes its period columns itself, with its own clock, so each change is
applied so that the target writes the source's times: INSERTs (current and history rows) with
``system_versioning_insert_history`` on and the period columns given; an UPDATE of the current
row under ``SET timestamp`` = its new ``row_start`` (the target writes the same history row the
source did, and the binlog's history INSERT after it is a duplicate, skipped); a versioned DELETE
as ``DELETE`` under ``SET timestamp`` = its ``row_end``; a deleted history row as ``DELETE HISTORY
... BEFORE SYSTEM_TIME`` just after its ``row_end`` (the source's statement removed every older
history row too). Versioned tables are ordered (:mod:`adapters.rdb.keys`): one partition, source
order. What no statement can do on a versioned target -- a history row changed, a current row
deleted outright, transaction-precise periods (transaction ids) -- is refused by name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy.exc import DBAPIError

from adapters.base import Change
from adapters.rdb.errors import format_key
from adapters.rdb.plan import Plan
from sluice_common.errors import TargetError

if TYPE_CHECKING:
    from adapters.rdb.chunk import ChunkApply

#: ``row_end`` of a current row (TIMESTAMP(6)'s maximum before MariaDB 11.5, and from 11.5 on)
CURRENT = ("2038-01-19 03:14:07.999999", "2106-02-07 06:28:15.999999")


def applies(plan: Plan) -> bool:
    """Whether ``plan`` writes a versioned target table with the source's period columns."""
    period = plan.info.period
    return period is not None and period[0] in plan.index and period[1] in plan.index


def _current(value: str | None) -> bool:
    return value is not None and value[:26] in CURRENT


def _refuse(plan: Plan, c: Change, what: str) -> TargetError:
    key = format_key(plan.key_of(c))
    err = TargetError(f"{plan.source} key {key}: {what}, which no statement can do on the system-versioned "
                      f"target {plan.info.label}",
                      hint="mirror it into a table without system versioning that has the period columns as "
                           "ordinary ones (docs/rdb.md, system-versioned tables), or leave the table out")
    err.table, err.key = plan.source, key
    return err


def apply_run(ca: ChunkApply, plan: Plan, run: list[Change]) -> None:
    """Apply one run of a versioned table's changes, in order (see the module docstring)."""
    if plan.info.period_problem:
        raise _refuse(plan, run[0], plan.info.period_problem)
    ca.exec("SET SESSION system_versioning_insert_history = 1", ())
    try:
        i = 0
        while i < len(run):
            c = run[i]
            if c.kind in ("INSERT", "UPSERT"):
                j = i + 1
                while j < len(run) and run[j].kind == c.kind:
                    j += 1
                _insert(ca, plan, run[i:j])
                i = j
                continue
            if c.kind == "UPDATE":
                _update(ca, plan, c)
            else:
                _delete_history(ca, plan, c)
            i += 1
    finally:
        try:
            ca.exec("SET timestamp = DEFAULT", ())
        except DBAPIError:  # the connection broke (the error that got here says so): the writer drops it
            pass


def _where(ca: ChunkApply, plan: Plan, cols: tuple[str, ...]) -> str:
    return " AND ".join(f"{ca.sql.q(t)} = {ca.sql.value(plan.info.columns[t])}" for t in cols)


def _insert(ca: ChunkApply, plan: Plan, changes: list[Change]) -> None:
    """Current and history rows with their period values; a row whose key (with ``row_end``) the
    target holds already -- a history row its replayed UPDATE wrote, a replay -- is skipped."""
    rows = ca.rows(plan, changes)
    for a, b in ca.chunks(plan, rows, len(plan.tgt)):
        part = rows[a:b]
        try:
            ca.exec(ca.sql.insert(plan.info, plan.tgt, len(part)), tuple(v for r in part for v in r))
            ca.count("inserted", plan, len(part))
            continue
        except DBAPIError as e:
            if not ca.dialect.is_unique_violation(e.orig):
                raise ca.fail(e, plan, "insert into", f"one of {len(part)} rows") from None
        one = ca.sql.insert(plan.info, plan.tgt, 1)
        probe = (f"SELECT 1 FROM {ca.sql.table(plan.info)} FOR SYSTEM_TIME ALL WHERE "
                 f"{_where(ca, plan, plan.key_tgt)}")
        for c, r in zip(changes[a:b], part, strict=True):
            try:
                ca.exec(one, r)
            except DBAPIError as e:
                if ca.dialect.is_unique_violation(e.orig) and ca.exec(probe, tuple(r[k] for k in plan.key_pos)).first():
                    ca.count("skipped", plan, 1)
                    continue
                raise ca.fail(e, plan, "insert into", plan.key_of(c)) from None
            ca.count("inserted", plan, 1)


def _update(ca: ChunkApply, plan: Plan, c: Change) -> None:
    start, end = plan.info.period
    old = c.old or {}
    if not _current(old.get(end, c.data[end])):
        raise _refuse(plan, c, "the binlog changes a history row")
    keys = tuple(i for i in plan.key_pos if plan.src[i] != end)
    before, after = plan.image({**c.data, **old}), plan.image(c.data)
    where = _where(ca, plan, tuple(plan.tgt[i] for i in keys))
    if _current(c.data[end]):  # the current row changed: the target writes the history row itself
        stamp = c.data[start]
        sets = tuple(i for i in plan.set_columns(c) if plan.src[i] not in (start, end))
        if not sets:
            return
        assign = ", ".join(f"{ca.sql.q(plan.tgt[i])} = {ca.sql.ph}" for i in sets)
        stmt, args = f"UPDATE {ca.sql.table(plan.info)} SET {assign} WHERE {where}", tuple(after[i] for i in sets)
    else:  # the current row ended: a versioned DELETE
        if set(old) - {end}:
            raise _refuse(plan, c, f"the binlog ends a row and changes {', '.join(sorted(set(old) - {end}))}")
        stamp, stmt, args = c.data[end], f"DELETE FROM {ca.sql.table(plan.info)} WHERE {where}", ()
    ca.exec(f"SET timestamp = UNIX_TIMESTAMP({ca.sql.ph})", (stamp,))
    try:
        n = ca.exec(stmt, args + tuple(before[i] for i in keys)).rowcount
    except DBAPIError as e:
        raise ca.fail(e, plan, "update", plan.key_of(c)) from None
    ca.count_update(plan, 1, n)


def _delete_history(ca: ChunkApply, plan: Plan, c: Change) -> None:
    end = plan.info.period[1]
    if _current(c.data[end]):
        raise _refuse(plan, c, "the binlog deletes a current row outright")
    stmt = (f"DELETE HISTORY FROM {ca.sql.table(plan.info)} BEFORE SYSTEM_TIME "
            f"CAST({ca.sql.ph} AS DATETIME(6)) + INTERVAL 1 MICROSECOND")
    try:
        n = ca.exec(stmt, (c.data[end],)).rowcount
    except DBAPIError as e:
        raise ca.fail(e, plan, "delete history from", plan.key_of(c)) from None
    ca.count("deleted", plan, n)
