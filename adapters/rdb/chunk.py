"""The RDB chunk apply: set-based INSERT / UPDATE / DELETE of one run (consecutive changes of
one kind and shape).

A :class:`ChunkApply` is the narrow context a run needs from the writer -- the open connection,
the SQL builder, the dialect, the target (label, statement byte budget) and the stats -- and
its methods apply a run; the writer (adapters/rdb/writer.py: life cycle, routing, plans)
builds one per run and never is passed itself. Order within a run is kept where it matters
(the same key twice ends an UPDATE statement). Driver errors are classified by
:mod:`adapters.rdb.errors`; nothing here matches message text.
"""

from __future__ import annotations

import unicodedata
from operator import itemgetter
from typing import Any

from sqlalchemy.engine import Connection, CursorResult
from sqlalchemy.exc import DBAPIError

from adapters.base import ApplyStats, Change
from adapters.rdb import literals, versioned
from adapters.rdb.client import packet_limit
from adapters.rdb.config import RdbTarget
from adapters.rdb.dialects import Dialect
from adapters.rdb.errors import classify, format_key, is_transient, packet_error, packet_limit_error, row_error
from adapters.rdb.plan import Plan
from adapters.rdb.statements import Sql, is_lob
from sluice_common.errors import TargetError

MAX_ROWS = 1000  # rows per multi-row statement
#: a MySQL target whose max_allowed_packet is below this cuts every table's statements by bytes
#: (else only tables with BLOB/TEXT columns: the row sizes cost time to add up)
SMALL_PACKET = 1 << 20
#: bytes of a statement besides its rows' values (the INSERT head, commas, parentheses)
STATEMENT_SLACK = 4096


def _flat(rows: list[tuple]) -> tuple:
    return tuple(v for r in rows for v in r)


def row_bytes(row: tuple) -> int:
    """The approximate statement bytes of one row's values (strings and bytes counted twice)."""
    return sum(len(v) for v in row if v.__class__ is str or v.__class__ is bytes) * 2 + 8 * len(row)


def _span(plan: Plan, changes: list[Change]) -> str:
    if len(changes) == 1:
        return format_key(plan.key_of(changes[0]))
    return f"one of {len(changes)} rows {format_key(plan.key_of(changes[0]))}..{format_key(plan.key_of(changes[-1]))}"


def _loose(v: Any) -> Any:
    """A key as a case/accent/trailing-space insensitive collation might see it (never too fine)."""
    if isinstance(v, str):
        v = unicodedata.normalize("NFKD", v).encode("ascii", "ignore").decode().casefold().rstrip()
    return v


def _loose_keys(plan: Plan) -> tuple[int, ...]:
    """Positions of key columns whose collation could equate different values."""
    cols = plan.info.columns
    return tuple(j for j, t in enumerate(plan.key_tgt)
                 if cols[t].collation and not cols[t].collation.endswith("_bin"))


def segments(plan: Plan, run: list[Change]):
    """``(start, end, empties)``: runs of changes to apply set-based (``empties`` 0), and single
    changes with ``empties`` ENUM columns holding '' (MySQL, :attr:`Plan.relax`; such columns
    have no converter, so the Dml string is the value)."""
    if not plan.relax:
        yield 0, len(run), 0
        return
    cols = [plan.src[p] for p in plan.relax]
    start = 0
    for i, c in enumerate(run):
        empties = sum(1 for s in cols if c.data[s] == "")
        if empties:
            if i > start:
                yield start, i, 0
            yield i, i + 1, empties
            start = i + 1
    if start < len(run):
        yield start, len(run), 0


class ChunkApply:
    """Applies runs through one open connection (see the module docstring)."""

    __slots__ = ("conn", "sql", "dialect", "target", "stats")

    def __init__(self, conn: Connection, sql: Sql, dialect: Dialect, target: RdbTarget, stats: ApplyStats):
        self.conn, self.sql, self.dialect, self.target, self.stats = conn, sql, dialect, target, stats

    # -- statements and counts -------------------------------------------------------------------
    def exec(self, sql: str, params: Any) -> CursorResult:
        return self.conn.exec_driver_sql(sql, params)

    def is_transient(self, e: BaseException) -> bool:
        return is_transient(e, self.dialect)

    def count(self, what: str, plan: Plan, n: int) -> None:
        if n:
            getattr(self.stats, what)[plan.source] += n

    def count_missed(self, plan: Plan, n: int) -> None:
        if n > 0:
            self.stats.missed[plan.source] += n

    def count_update(self, plan: Plan, tried: int, matched: int) -> None:
        self.count("updated", plan, matched)
        self.count_missed(plan, tried - matched)

    # -- one run -----------------------------------------------------------------------------------
    def run(self, plan: Plan, run: list[Change]) -> None:
        """Apply one run (not TRUNCATE) whose table's plan is ``plan``."""
        first = run[0]
        if plan.info.period is not None and versioned.applies(plan):  # the source's period values too
            return versioned.apply_run(self, plan, run)
        if first.kind == "DELETE":
            if plan.key_pos:
                return self.delete(plan, run)
            for c in run:
                self.keyless(plan, c, None)
            return
        if first.kind == "INSERT" and self.dialect.family == "mysql" and plan.key_pos:
            return self.each_rendered(plan, run, lambda cs: self.insert_rendered(plan, cs))
        if first.kind == "INSERT":
            rows = self.rows(plan, run)
            return self.each_segment(plan, run, rows, lambda cs, rs: self.insert(plan, cs, rs))
        if first.kind == "UPSERT":  # full loads (sluice etl/bootstrap): insert or overwrite by key
            return self.upsert(plan, run, self.rows(plan, run))
        run = [c for c in run if not plan.changes_nothing(c)]
        if not run:
            return
        if plan.key_pos and any(plan.changes_key(c) for c in run):
            i = 0
            while i < len(run):  # in order: key changes one by one, the UPDATEs between them set-based
                if plan.changes_key(run[i]):  # an ordered group's key change: one UPDATE (cascades act)
                    self.update_key(plan, run[i])
                    i += 1
                    continue
                j = i + 1
                while j < len(run) and not plan.changes_key(run[j]):
                    j += 1
                self.update_run(plan, run[i:j])
                i = j
            return
        self.update_run(plan, run)

    def update_run(self, plan: Plan, run: list[Change]) -> None:
        """UPDATEs that keep their key: each sets every mapped column of its after-image."""
        sets = plan.set_columns(run[0])
        if not sets:
            return  # every mapped column is a key column
        if not plan.key_pos:
            for c in run:
                self.keyless(plan, c, sets)
            return
        if self.dialect.family == "mysql":
            return self.each_rendered(plan, run, lambda cs: self.update_rendered(plan, cs, sets))
        rows = self.rows(plan, run)
        self.each_segment(plan, run, rows, lambda cs, rs: self.update(plan, cs, rs, sets))

    def rows(self, plan: Plan, run: list[Change]) -> list[tuple]:
        """The converted target values of ``run``; a value that does not convert is a RowError
        naming the row's key and the column."""
        try:
            return plan.rows(run)
        except (ValueError, TypeError, OverflowError, UnicodeError):
            for c in run:  # find the row and the column
                for s, f in zip(plan.src, plan.convs, strict=True):
                    try:
                        if f is not None:
                            f(c.data[s])
                    except (ValueError, TypeError, OverflowError, UnicodeError) as e:
                        raise row_error(f"{plan.source} key {format_key(plan.key_of(c))}: value {c.data[s]!r} "
                                        f"of column {s} cannot be written to {plan.info.label}: {e}",
                                        table=plan.source, key=format_key(plan.key_of(c)),
                                        hint=getattr(e, "hint", None)  # a Rounded value: the ALTER that widens
                                        or "see docs/rdb.md for the value mapping per target type") from None
            raise

    def each_segment(self, plan: Plan, run: list[Change], rows: list[tuple], apply_rows) -> None:
        """Apply rows set-based, except MySQL rows with ENUM '' which go one by one, relaxed."""
        if not plan.relax:
            return apply_rows(run, rows)
        for a, b, empties in segments(plan, run):
            if empties:
                self.relaxed_row(plan, run[a], rows[a], empties)
            else:
                apply_rows(run[a:b], rows[a:b])

    def each_rendered(self, plan: Plan, run: list[Change], apply_changes) -> None:
        """MySQL runs rendered as literals (no row tuples built), except rows with ENUM '' which
        go one by one, relaxed."""
        for a, b, empties in segments(plan, run):
            if empties:
                self.relaxed_row(plan, run[a], self.rows(plan, run[a:b])[0], empties)
            else:
                apply_changes(run[a:b])

    def chunks(self, plan: Plan, rows: list, width: int, row_size=row_bytes) -> list[tuple[int, int]]:
        """``(start, end)`` slices: at most MAX_ROWS rows, the dialect's parameter limit and (MySQL,
        when a column may be large) the statement byte budget (``row_size``: the bytes of one row)."""
        per = max(1, min(MAX_ROWS, self.dialect.max_params // max(width, 1)))
        limit = packet_limit(self.target) if self.dialect.family == "mysql" else None
        big = self.dialect.family == "mysql" and (any(is_lob(plan.info.columns[t]) for t in plan.tgt)
                                                  or (limit is not None and limit < SMALL_PACKET))
        if not big:
            return [(i, min(i + per, len(rows))) for i in range(0, len(rows), per)]
        budget = self.target.max_statement_bytes
        if limit is not None:  # row_size over-counts: statements of several rows stay under the limit
            budget = max(1, min(budget, limit - STATEMENT_SLACK))
        out, start, size = [], 0, 0
        for i, r in enumerate(rows):
            s = row_size(r)
            if i > start and (i - start >= per or size + s > budget):
                out.append((start, i))
                start, size = i, 0
            size += s
        if start < len(rows):
            out.append((start, len(rows)))
        return out


    def fail(self, e: BaseException, plan: Plan, action: str, key: Any, hint: str | None = None, rows: int = 1):
        """The error of a failed statement of ``rows`` rows (``key``: the row's key, or a span)."""
        err = packet_error(e, self.target, table=plan.info.label, action=action, key=key, rows=rows) \
            or classify(e, self.target, table=plan.info.label, action=action, key=key, hint=hint)
        err.table, err.key = plan.source, key if isinstance(key, str) else format_key(key)
        return err


    def locate(self, plan: Plan, e: DBAPIError, changes: list[Change], one_sql: str, params: list[tuple],
               action: str) -> TargetError:
        """After a multi-row statement failed: find the row that fails alone (MySQL/SQLite keep the
        transaction usable after a failed statement; PostgreSQL does not, so it names the span)."""
        if packet_limit_error(e, self.target) is not None:  # the server closed the connection
            return self.fail(e, plan, action, _span(plan, changes), rows=len(changes))
        if self.dialect.family != "postgresql" and len(changes) > 1 and not self.is_transient(e):
            for c, p in zip(changes, params, strict=True):
                try:
                    self.exec(one_sql, p)
                except DBAPIError as e1:
                    return self.fail(e1, plan, action, plan.key_of(c))
        return self.fail(e, plan, action, _span(plan, changes), rows=len(changes))


    # -- INSERT ------------------------------------------------------------------------------------
    def insert(self, plan: Plan, changes: list[Change], rows: list[tuple]) -> None:
        skip_on = plan.key_tgt if self.dialect.on_conflict_skip else ()
        for a, b in self.chunks(plan, rows, len(plan.tgt)):
            part, cs = rows[a:b], changes[a:b]
            if self.dialect.family == "mysql" and plan.key_pos:
                self._mysql_insert(plan, cs, part)
                continue
            try:
                n = self.exec(self.sql.insert(plan.info, plan.tgt, len(part), skip_on), _flat(part)).rowcount
            except DBAPIError as e:
                raise self.locate(plan, e, cs,
                                  self.sql.insert(plan.info, plan.tgt, 1, skip_on), part, "insert into") from None
            self.count("inserted", plan, n)
            self.count("skipped", plan, len(part) - n)


    def insert_rendered(self, plan: Plan, changes: list[Change]) -> None:
        """MySQL INSERT of Dml rows as rendered literals (:mod:`adapters.rdb.literals`), executed like
        every other statement (the connection's transaction, error translation); a chunk that does
        not render goes the parameter path, which also names a row whose value does not convert."""
        raw = literals.driver_connection(self.conn)
        if raw is None:
            return self.insert(plan, changes, self.rows(plan, changes))
        head = self.sql.insert(plan.info, plan.tgt, 0)  # identifiers' '%' doubled, like the values' below
        get = plan.getter
        for a, b in self.chunks(plan, changes, len(plan.tgt), row_size=lambda c: row_bytes(get(c.data))):
            cs = changes[a:b]
            text = literals.insert_values(plan, cs, raw)
            if text is None:
                self._mysql_insert(plan, cs, self.rows(plan, cs))
                continue
            try:
                n = self.exec(head + text.replace("%", "%%"), ()).rowcount  # the driver interpolates '%'
            except DBAPIError as e:
                rows = self.rows(plan, cs)
                if not self.dialect.is_unique_violation(e.orig):
                    raise self.locate(plan, e, cs,
                                      self.sql.insert(plan.info, plan.tgt, 1), rows, "insert into") from None
                self._mysql_insert(plan, cs, rows, tried=True)
                continue
            self.count("inserted", plan, n)


    def _mysql_insert(self, plan: Plan, changes: list[Change], rows: list[tuple], tried: bool = False) -> None:
        """Multi-row INSERT; on a duplicate key drop the rows whose key exists and retry once;
        a second duplicate is another unique key (or a key twice in the chunk): row by row.
        ``tried``: the multi-row INSERT already failed on a duplicate key."""
        sql = self.sql
        if not tried:
            try:
                self.exec(sql.insert(plan.info, plan.tgt, len(rows)), _flat(rows))
                self.count("inserted", plan, len(rows))
                return
            except DBAPIError as e:
                if not self.dialect.is_unique_violation(e.orig):
                    raise self.locate(plan, e, changes,
                                      sql.insert(plan.info, plan.tgt, 1), rows, "insert into") from None
        existing = self.probe(plan, rows)
        self.count("skipped", plan, len(existing))
        keep = [i for i in range(len(rows)) if i not in existing]
        if not keep:
            return
        try:
            self.exec(sql.insert(plan.info, plan.tgt, len(keep)), _flat([rows[i] for i in keep]))
            self.count("inserted", plan, len(keep))
            return
        except DBAPIError as e:
            if not self.dialect.is_unique_violation(e.orig):
                raise self.fail(e, plan, "insert into", _span(plan, [changes[i] for i in keep]),
                                rows=len(keep)) from None
        one = sql.insert(plan.info, plan.tgt, 1)
        for i in keep:
            try:
                self.exec(one, rows[i])
            except DBAPIError as e:
                if self.dialect.is_unique_violation(e.orig) and self.probe(plan, [rows[i]]):
                    self.count("skipped", plan, 1)  # the same key earlier in this chunk
                    continue
                raise self.fail(e, plan, "insert into", plan.key_of(changes[i]),
                                hint="a unique key other than the primary key conflicts: the target is not a copy "
                                     "of the source (fix the row or the unique key, then run again)") from None
            self.count("inserted", plan, 1)


    def probe(self, plan: Plan, rows: list[tuple]) -> set[int]:
        """Positions of ``rows`` whose key already exists in the target (one query)."""
        keys = [tuple(r[i] for i in plan.key_pos) for r in rows]
        res = self.exec(self.sql.exists_probe(plan.info, plan.key_tgt, len(keys)), _flat(keys))
        return {int(r[0]) for r in res}


    # -- UPSERT (full loads: insert, or overwrite the row with the same primary key) ---------------
    def upsert(self, plan: Plan, changes: list[Change], rows: list[tuple]) -> None:
        """MySQL/MariaDB: a multi-row INSERT; when it meets an existing key (1062; the statement is
        rolled back whole), DELETE that statement's keys and INSERT again, where a duplicate left is
        another unique key (terminal); with foreign key checks off for the load, so no cascade acts.
        Never ``ON DUPLICATE KEY UPDATE`` or ``REPLACE``: both also act on a conflicting *secondary*
        unique key and would silently update or delete another row.
        PostgreSQL/SQLite: ``INSERT ... ON CONFLICT (pk) DO UPDATE``. Counted as ``inserted``."""
        if not plan.key_pos:
            raise TargetError(f"{plan.source}: a full load (UPSERT) into {plan.info.label} needs a primary key "
                              "(targetPk, or the source table's)",
                              hint="a mirror's table without one is loaded whole only by `sluice bootstrap --force`, "
                                   "run while nothing writes to the source (docs/etl.md)")
        last = {tuple(r[i] for i in plan.key_pos): n for n, r in enumerate(rows)}
        if len(last) < len(rows):  # the same key twice: the last row wins
            keep = sorted(last.values())
            changes, rows = [changes[i] for i in keep], [rows[i] for i in keep]
        if self.dialect.family == "mysql":
            # as a dump loads: foreign keys unchecked, so the delete-by-key of a row that exists does not
            # cascade to its children (it is inserted again at once) and tables load in any order
            self.exec("SET SESSION foreign_key_checks = 0", ())
            try:
                return self.each_segment(plan, changes, rows, lambda cs, rs: self._mysql_upsert(plan, cs, rs))
            finally:
                self.exec("SET SESSION foreign_key_checks = 1", ())
        for a, b in self.chunks(plan, rows, len(plan.tgt)):
            part, cs = rows[a:b], changes[a:b]
            stmt = self.sql.upsert(plan.info, plan.tgt, len(part), plan.key_tgt)
            try:
                self.exec(stmt, _flat(part))
            except DBAPIError as e:
                raise self.locate(plan, e, cs, self.sql.upsert(plan.info, plan.tgt, 1, plan.key_tgt), part,
                                  "upsert into") from None
            self.count("inserted", plan, len(part))


    def _mysql_upsert(self, plan: Plan, changes: list[Change], rows: list[tuple]) -> None:
        for a, b in self.chunks(plan, rows, len(plan.tgt)):
            part, cs = rows[a:b], changes[a:b]
            try:
                self.exec(self.sql.insert(plan.info, plan.tgt, len(part)), _flat(part))
                self.count("inserted", plan, len(part))
                continue
            except DBAPIError as e:
                if not self.dialect.is_unique_violation(e.orig):
                    raise self.locate(plan, e, cs,
                                      self.sql.insert(plan.info, plan.tgt, 1), part, "insert into") from None
            self.delete_keys(plan, cs, [tuple(r[i] for i in plan.key_pos) for r in part])
            self._mysql_insert(plan, cs, part)


    def delete_keys(self, plan: Plan, changes: list[Change], keys: list[tuple]) -> None:
        """DELETE rows by (converted) key, uncounted: the first half of an upsert."""
        per = max(1, min(MAX_ROWS, self.dialect.max_params // len(plan.key_pos)))
        for a in range(0, len(keys), per):
            part = keys[a:a + per]
            try:
                self.exec(self.sql.delete_in(plan.info, plan.key_tgt, len(part)), _flat(part))
            except DBAPIError as e:
                raise self.fail(e, plan, "delete (upsert) from", _span(plan, changes[a:a + per]),
                                rows=len(part)) from None


    # -- UPDATE ------------------------------------------------------------------------------------
    def update(self, plan: Plan, changes: list[Change], rows: list[tuple], sets: tuple[int, ...]) -> None:
        sql, info = self.sql, plan.info
        set_tgt = tuple(plan.tgt[i] for i in sets)
        nk = len(plan.key_pos)
        order = plan.key_pos + sets
        get = itemgetter(*order) if len(order) > 1 else (lambda r, i=order[0]: (r[i],))
        params = [get(r) for r in rows]  # key values, then the values to set
        one = sql.update_row(info, plan.key_tgt, set_tgt)
        if self.dialect.family == "sqlite":
            one_params = [p[nk:] + p[:nk] for p in params]
            try:
                n = self.exec(one, one_params).rowcount
            except DBAPIError as e:
                raise self.locate(plan, e, changes, one, one_params, "update") from None
            self.count_update(plan, len(rows), n)
            return
        keep = self._latest(plan, [p[:nk] for p in params])
        if len(keep) < len(params):
            changes, params = [changes[i] for i in keep], [params[i] for i in keep]
        loose = _loose_keys(plan)
        per = max(1, min(MAX_ROWS, self.dialect.max_params // max(len(order), 1)))
        if not loose:  # keys are distinct now
            for a in range(0, len(params), per):
                self._update_batch(plan, changes[a:a + per], params[a:a + per], one, set_tgt)
            return
        start, seen = 0, set()
        for i, p in enumerate(params):  # keys equal under a collation may be one row: never in one statement
            k = tuple(_loose(v) if j in loose else v for j, v in enumerate(p[:nk]))
            if k in seen or i - start >= per:
                self._update_batch(plan, changes[start:i], params[start:i], one, set_tgt)
                start, seen = i, set()
            seen.add(k)
        self._update_batch(plan, changes[start:], params[start:], one, set_tgt)


    def _latest(self, plan: Plan, keys: list[tuple]) -> list[int]:
        """Every UPDATE of a run sets the same columns, so a later UPDATE of the exact same key
        supersedes an earlier one: the positions of the last UPDATE of each key, in order (the
        superseded ones are counted as updated: their after-image is the state both lead to)."""
        last = {k: i for i, k in enumerate(keys)}
        if len(last) == len(keys):
            return list(range(len(keys)))
        self.count("updated", plan, len(keys) - len(last))
        return sorted(last.values())


    def update_rendered(self, plan: Plan, changes: list[Change], sets: tuple[int, ...]) -> None:
        """MySQL set-based UPDATE with the key and set values rendered as literals
        (:func:`literals.literal_columns`); only the key and the set columns are converted. The same
        statements as :func:`update` (the last UPDATE of a key, distinct keys per statement in key
        order), which takes over for keys a collation could equate, a key or a chunk that does not
        convert (it names the row and column), and drivers that cannot take rendered SQL."""
        raw = literals.driver_connection(self.conn)
        try:
            keys = None if raw is None or _loose_keys(plan) else plan.key_rows(changes)
        except (ValueError, TypeError, OverflowError, UnicodeError):
            keys = None
        if keys is None:
            return self.update(plan, changes, self.rows(plan, changes), sets)
        keep = self._latest(plan, keys)
        try:
            keep.sort(key=keys.__getitem__)  # distinct keys: key order makes the lookups local
        except TypeError:
            pass
        info, nk = plan.info, len(plan.key_pos)
        set_tgt = tuple(plan.tgt[i] for i in sets)
        order = plan.key_pos + sets
        one = self.sql.update_row(info, plan.key_tgt, set_tgt)
        per = max(1, min(MAX_ROWS, self.dialect.max_params // len(order)))
        for a in range(0, len(keep), per):
            cs = [changes[i] for i in keep[a:a + per]]
            cols = literals.literal_columns(plan, cs, order, raw)
            if cols is None:
                self.update(plan, cs, self.rows(plan, cs), sets)
                continue
            if len(cs) == 1:  # the single-row statement: set values first
                stmt, flat = one, [c[0] for c in cols[nk:] + cols[:nk]]
            else:
                stmt = self.sql.update_set(info, plan.key_tgt, set_tgt, len(cs))
                flat = [v for r in zip(*cols, strict=True) for v in r]
            try:  # the template's '%%' (identifiers) become '%' with the values: all doubled again
                n = self.exec((stmt % tuple(flat)).replace("%", "%%"), ()).rowcount
            except DBAPIError as e:
                params = [tuple(r[i] for i in sets + plan.key_pos) for r in self.rows(plan, cs)]
                raise self.locate(plan, e, cs, one, params, "update") from None
            self.count_update(plan, len(cs), n)


    def _update_batch(self, plan: Plan, changes: list[Change], params: list[tuple], one: str,
                      set_tgt: tuple[str, ...]) -> None:
        if not params:
            return
        nk = len(plan.key_pos)
        if len(params) == 1:
            stmt, args = one, params[0][nk:] + params[0][:nk]
        else:  # distinct keys: any order gives the same result, and key order makes the lookups local
            try:
                ordered = sorted(params, key=lambda p: p[:nk])
            except TypeError:
                ordered = params
            stmt, args = self.sql.update_set(plan.info, plan.key_tgt, set_tgt, len(params)), _flat(ordered)
        try:
            n = self.exec(stmt, args).rowcount
        except DBAPIError as e:
            raise self.locate(plan, e, changes, one, [p[nk:] + p[:nk] for p in params], "update") from None
        self.count_update(plan, len(params), n)


    def update_key(self, plan: Plan, change: Change) -> None:
        """One key-changing UPDATE (ordered groups): ``SET`` the after-image (the changed key columns
        and every other mapped column), ``WHERE`` the key is the before-image's."""
        try:
            after = plan.image(change.data)
            before = plan.key_values({**change.data, **change.old})  # the key only: nothing else is written
        except (ValueError, TypeError, OverflowError, UnicodeError):
            self.rows(plan, [change])  # raises the error naming the row and column
            raise
        sets = plan.set_columns(change)
        stmt = self.sql.update_row(plan.info, plan.key_tgt, tuple(plan.tgt[i] for i in sets))
        args = tuple(after[i] for i in sets) + before
        try:
            n = self.exec(stmt, args).rowcount
        except DBAPIError as e:
            key = {s: change.old.get(s, change.data.get(s)) for s in plan.key_src}
            raise self.fail(e, plan, "update", key) from None
        self.count_update(plan, 1, n)


    # -- DELETE ------------------------------------------------------------------------------------
    def delete(self, plan: Plan, changes: list[Change]) -> None:
        keys = plan.key_rows(changes)
        per = max(1, min(MAX_ROWS, self.dialect.max_params // len(plan.key_pos)))
        for a in range(0, len(keys), per):
            part = keys[a:a + per]
            try:
                n = self.exec(self.sql.delete_in(plan.info, plan.key_tgt, len(part)), _flat(part)).rowcount
            except DBAPIError as e:
                raise self.fail(e, plan, "delete from", _span(plan, changes[a:a + per]), rows=len(part)) from None
            self.count("deleted", plan, n)
            self.count_missed(plan, len(part) - n)


    # -- tables without a key: one statement per row, matching one row on the before-image -----------
    def keyless(self, plan: Plan, change: Change, sets: tuple[int, ...] | None) -> None:
        before = plan.image({**change.data, **(change.old or {})} if sets is not None else change.data)
        match = self.sql.comparable(plan.info, plan.tgt)
        mpos = tuple(plan.tgt.index(t) for t in match)
        where = tuple(before[i] for i in mpos)
        if sets is None:
            stmt, args, kind = self.sql.pkless_delete(plan.info, match), where, "deleted"
        else:
            after = plan.image(change.data)
            stmt = self.sql.pkless_update(plan.info, tuple(plan.tgt[i] for i in sets), match)
            args, kind = tuple(after[i] for i in sets) + where, "updated"
        try:
            n = self.exec(stmt, args).rowcount
        except DBAPIError as e:
            raise self.fail(e, plan, "update" if sets is not None else "delete from", plan.key_of(change)) from None
        self.count(kind, plan, n)
        self.count_missed(plan, 1 - n)


    # -- MySQL rows with ENUM '' (index 0): one statement, non-strict, and only that warning allowed --
    def relaxed_row(self, plan: Plan, change: Change, row: tuple, empties: int) -> None:
        sql, info = self.sql, plan.info
        if change.kind in ("INSERT", "UPSERT"):
            if change.kind == "UPSERT":
                self.delete_keys(plan, [change], [tuple(row[i] for i in plan.key_pos)])
            stmt, args, what = sql.insert(info, plan.tgt, 1), row, "inserted"
        else:
            sets = plan.set_columns(change)
            if not plan.key_pos:
                raise TargetError(f"{plan.source}: an UPDATE setting ENUM '' on a table without a key is not supported")
            stmt = sql.update_row(info, plan.key_tgt, tuple(plan.tgt[i] for i in sets))
            args, what = tuple(row[i] for i in sets) + tuple(row[i] for i in plan.key_pos), "updated"
        key = plan.key_of(change)
        try:
            n = self.exec(sql.relaxed(stmt), args).rowcount
            warnings = self.exec("SHOW WARNINGS", None).fetchall()
        except DBAPIError as e:
            if change.kind in ("INSERT", "UPSERT") and self.dialect.is_unique_violation(e.orig) and plan.key_pos \
                    and self.probe(plan, [row]):
                self.count("skipped", plan, 1)
                return
            raise self.fail(e, plan, "update" if change.kind == "UPDATE" else "insert into", key) from None
        unexpected = [tuple(x) for x in warnings if x[1] != 1265]  # WARN_DATA_TRUNCATED: the ENUM '' itself
        if unexpected or len(warnings) > empties:
            raise row_error(f"{plan.source} key {format_key(key)}: writing ENUM '' to {info.label} (non-strict) "
                            f"gave other warnings: {unexpected or warnings}", table=plan.source, key=format_key(key))
        if what == "updated":
            self.count_update(plan, 1, n)
        else:
            self.count(what, plan, n)
