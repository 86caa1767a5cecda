"""In which order the RDB writer applies one chunk's changes.

A chunk holds the changes of one partition in source order. Two kinds are in it:

* **ordered** changes (``Change.ordered``: an ordered group of :mod:`adapters.rdb.keys`) keep
  source order exactly. They run in a savepoint: set-based first; when a unique or foreign key
  refuses a statement (a value moving between rows inside the chunk), the savepoint is rolled
  back and they are applied change by change, which reproduces the source's own states. Before,
  what the target already holds is skipped (the recorded positions, :mod:`adapters.rdb.progress`);
  after, the new positions are recorded in the same transaction.
* the **rest** -- tables whose rows do not constrain each other -- only need per-key order. OLTP
  traffic interleaves kinds (UPDATE, UPDATE, DELETE, INSERT, ... of different keys), which would
  cut the chunk into runs of one row each; so they are regrouped into *waves*: wave n holds every
  key's n-th change of the chunk, grouped by kind, table and shape, so each key's changes stay in
  order and each wave is a few set-based statements. Only done when every key column compares
  exactly (numbers, binary strings, binary collations): keys a collation equates keep their order.

Mirrors into MySQL/MariaDB also skip changes older than a DDL statement the target's DDL ledger
says this store and group replayed (DML before a barrier was committed before the DDL ran).
"""

from __future__ import annotations

from collections import Counter
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from sqlalchemy.exc import DBAPIError

from adapters.base import ApplyStats, Change
from adapters.rdb import ddl as ddl_mod
from adapters.rdb.collation import fold_kind
from adapters.rdb.errors import classify
from adapters.rdb.fold import fold
from sluice_common.errors import TargetError
from sluice_common.logs import get_logger

if TYPE_CHECKING:
    from adapters.rdb.writer import RdbWriter

log = get_logger("rdb")
_KINDS = {"DELETE": 0, "UPDATE": 1, "INSERT": 2, "UPSERT": 3}


class Sequencer:
    """The order of one writer's chunks (see the module docstring)."""

    def __init__(self, writer: RdbWriter):
        self.w = writer
        self._ddl_marks: dict[str, tuple | None] = {}  # source database -> newest replayed DDL (mirrors)
        self._exact: dict[int, bool] = {}  # id(plan) -> every key column compares exactly

    def apply(self, mapping: Any, changes: list[Change]) -> None:
        changes = self._after_ddl(mapping, changes)
        ordered = [c for c in changes if c.ordered]
        if len(ordered) < len(changes):
            rest = [c for c in changes if not c.ordered] if ordered else changes
            self.w.apply_runs(mapping, self.waves(mapping, rest))
        if ordered:
            self._ordered(mapping, ordered)

    # -- the rest: waves ------------------------------------------------------------------------
    def waves(self, mapping: Any, changes: list[Change]) -> list[Change]:
        """``changes`` regrouped into waves (each key's n-th change in wave n, grouped by kind and
        table), each key's changes folded first (:mod:`adapters.rdb.fold`), or as given when a key
        column may compare loosely or the table is unknown. Keys within a wave are distinct, so
        their order does not matter; each key's changes stay in order across waves."""
        if len(changes) < 3 or (_one_run(changes) and changes[0].kind in ("INSERT", "UPSERT")):
            return changes
        w, tables, chains = self.w, {}, {}
        try:
            for c in changes:
                if c.kind not in _KINDS:
                    return changes
                t = (c.database, c.table)
                hit = tables.get(t)
                if hit is None or hit[0] != c.data.keys():  # a table's first change, or another shape
                    plan = w.plan(w.route(mapping, c.database, c.table), c)
                    if not plan.key_pos or not self._exact_key(plan):
                        return changes
                    hit = tables[t] = (c.data.keys(), plan, itemgetter(*plan.key_src))
                key = (t, hit[2](c.data))
                chain = chains.get(key)
                if chain is None:
                    chains[key] = [hit[1], c]
                else:
                    chain.append(c)
        except TargetError:
            return changes  # applying in the given order reports it
        buckets: dict[tuple, list[Change]] = {}
        folded: Counter = Counter()
        for chain in chains.values():
            kept = chain[1:] if len(chain) == 2 else self._fold(chain[0], chain[1:], folded)
            for level, c in enumerate(kept):
                b = (level, _KINDS[c.kind], c.database, c.table, tuple(c.data))
                bucket = buckets.get(b)
                if bucket is None:
                    buckets[b] = [c]
                else:
                    bucket.append(c)
        if folded:
            w.stats.folded.update(folded)
        elif len(buckets) == 1:
            return changes  # one kind and table, every key once: nothing to regroup
        return [c for b in sorted(buckets) for c in buckets[b]]

    def _fold(self, plan: Any, changes: list[Change], folded: Counter) -> list[Change]:
        """One key's changes folded (:func:`adapters.rdb.fold.fold`) where that is exact: one row
        shape, no key change, a table without system versioning or ENUM '' relaxing."""
        if plan.info.period is not None or plan.relax:
            return changes
        first = changes[0]
        if any(first.data.get(s) is None for s in plan.key_src):
            return changes  # NULL keys: every such row is its own (a nullable unique targetPk)
        keys = first.data.keys()
        live = []
        for c in changes:
            if c.data.keys() != keys:
                return changes
            if c.kind == "UPDATE":
                if plan.changes_key(c):
                    return changes
                if plan.changes_nothing(c):
                    continue
            live.append(c)
        written = tuple(s for s in plan.src if s not in plan.key_src)
        out = fold(live, written) if len(live) > 1 else live
        if out is None:
            return changes
        if len(out) < len(changes):
            folded[f"{changes[0].database}.{changes[0].table}"] += len(changes) - len(out)
        return out

    def _exact_key(self, plan: Any) -> bool:
        hit = self._exact.get(id(plan))
        if hit is None:
            fam = self.w.dialect.family
            hit = self._exact[id(plan)] = all(fold_kind(fam, plan.info.columns[t]) is None for t in plan.key_tgt)
        return hit

    # -- ordered groups -------------------------------------------------------------------------
    def _ordered(self, mapping: Any, changes: list[Change]) -> None:
        w = self.w
        changes = self._unapplied(mapping, changes)
        if not changes:
            return
        before, missed = ApplyStats().add(w.stats), Counter(w.missed)
        savepoint = w.conn.begin_nested()
        try:
            w.apply_runs(mapping, changes)
            savepoint.commit()
        except TargetError as e:
            if not getattr(e, "conflict", False) or len(changes) == 1:
                raise
            savepoint.rollback()
            w.stats, w.missed = before, missed
            log.debug("ordered chunk applied change by change", rows=len(changes), cause=str(e)[:200])
            for c in changes:  # source order reproduces the source's states: no conflict unless diverged
                w.apply_runs(mapping, [c])
        self._advance(mapping, changes)

    def _unapplied(self, mapping: Any, changes: list[Change]) -> list[Change]:
        """Without the changes the target already holds (their tables' recorded positions are at
        or after them: a replay after a crash or a cursor reset)."""
        w = self.w
        if w.progress is None:
            return changes
        out, pos = [], {}
        for c in changes:
            key = (c.database, c.table)
            if key not in pos:
                info = w.ordered_info(mapping, c)
                pos[key] = w.progress.position(info) if info is not None else None
            if pos[key] is not None and tuple(c.seq) <= pos[key]:
                w.stats.skipped[f"{c.database}.{c.table}"] += 1
                continue
            out.append(c)
        return out

    def _advance(self, mapping: Any, changes: list[Change]) -> None:
        """Record the last applied change of each ordered table (in the open transaction)."""
        w = self.w
        if w.progress is None:
            return
        last = {(c.database, c.table): c for c in changes}
        for c in last.values():
            info = w.ordered_info(mapping, c)
            if info is not None:
                w.progress.advance(info, c.seq)
        try:
            w.progress.write()
        except DBAPIError as e:
            raise classify(e, w.target, table="_sluice_progress", action="record the position in") from None

    # -- mirrors: history older than a replayed DDL -----------------------------------------------
    def _after_ddl(self, mapping: Any, changes: list[Change]) -> list[Change]:
        w = self.w
        if not changes or w.dialect.family != "mysql" or w.progress is None:
            return changes
        first = changes[0]
        if not w.route(mapping, first.database, first.table).mirror_ddl:
            return changes
        out = []
        for c in changes:
            if c.database not in self._ddl_marks:
                route = w.route(mapping, c.database, c.table)
                self._ddl_marks[c.database] = ddl_mod.last_applied(w, route, c.database, scoped=True)
            mark = self._ddl_marks[c.database]
            if mark is not None and tuple(c.seq) < mark:
                w.stats.skipped[f"{c.database}.{c.table}"] += 1
                continue
            out.append(c)
        return out


def _one_run(changes: list[Change]) -> bool:
    """All of one kind, table and shape already (a bulk insert or update): nothing to regroup."""
    c = changes[0]
    shape = (c.kind, c.database, c.table, c.data.keys())
    return all((d.kind, d.database, d.table, d.data.keys()) == shape for d in changes)
