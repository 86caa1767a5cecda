"""The RDB :class:`Writer`: one pooled connection, one transaction per chunk, set-based runs.

``apply`` cuts the chunk into runs (consecutive changes of one kind, table and column
shape: an UPDATE sets every mapped column of its after-image, so one shape is one statement
shape) and applies each run with multi-row
statements (:class:`adapters.rdb.chunk.ChunkApply`, built per run from the open connection).
Per-key order holds because runs are applied in order and an UPDATE statement never holds
the same key twice.

Which changes of a chunk run in which order -- ordered groups in a savepoint with positions,
the rest regrouped into waves of whole runs -- is :mod:`adapters.rdb.sequence`'s. Key changes of
ordered groups are real UPDATEs (the target's ``ON UPDATE CASCADE`` acts).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from contextlib import suppress
from dataclasses import replace
from itertools import groupby
from operator import attrgetter
from typing import Any

from sqlalchemy.engine import Connection, CursorResult
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from adapters.base import AppliedFrom, Change, DdlChange, SourceCollations, Writer, lacked_key
from adapters.rdb import applied as applied_mod
from adapters.rdb import dbsequence
from adapters.rdb import ddl as ddl_mod
from adapters.rdb.applied import Applied
from adapters.rdb.check import check_cascades, check_mapping
from adapters.rdb.chunk import ChunkApply
from adapters.rdb.client import engine_for
from adapters.rdb.config import RdbTable, RdbTarget
from adapters.rdb.ddl import applied_after
from adapters.rdb.dialects import dialect_of, fk_checks_sql
from adapters.rdb.errors import classify, connect_error
from adapters.rdb.keycollations import check_key_collations
from adapters.rdb.plan import Plan, build_plan
from adapters.rdb.progress import Progress
from adapters.rdb.schema import TableInfo, forget, prefetch, table_info
from adapters.rdb.sequence import Sequencer
from adapters.rdb.statements import Sql
from sluice_common.collations import SourceCharsets
from sluice_common.errors import SluiceError, TargetError
from sluice_common.logs import get_logger

log = get_logger("rdb")


class RdbWriter(Writer):
    """Writes changes to one relational target (see the module docstring)."""

    def __init__(self, target: RdbTarget, mappings: tuple[Any, ...]):
        super().__init__(target, mappings)
        self.target: RdbTarget = target
        self.dialect = dialect_of(target)
        self.conn: Connection | None = None
        self.sql: Sql | None = None
        self._routes: dict[tuple, tuple[Any, RdbTable]] = {}
        self.progress: Progress | None = None  # positions of ordered tables (set by ``track``)
        #: the source's charset defaults for replayed DDL (set by the job's driver: a callable that reads them)
        self.source_charsets: Callable[[], SourceCharsets] | None = None
        #: the zone a replayed DDL runs in (pipeline/job/zones.py), asked only for a statement that runs
        self.ddl_time_zone: Callable[[DdlChange], str] | None = None
        self.applied: Applied | None = None  # the source position recorded with the rows (``track_position``)
        self.sequence = Sequencer(self)

    def track(self, scope: str, generation: int = 0, recaptures: tuple[tuple[int, int], ...] = ()) -> None:
        """Record and honour the positions of ordered tables under ``scope`` (store id + group)."""
        self.progress = Progress(self, scope, generation, recaptures) if scope else None

    def track_position(self, mark: AppliedFrom, part: int) -> None:
        """Record ``mark`` (the round's start in the source's binlog) in ``_sluice_applied`` of every
        schema a transaction writes, in that transaction (adapters/rdb/applied.py)."""
        self.applied = Applied(self, mark, part)

    def recorded_positions(self, source: str) -> list[dict[str, Any]]:
        """What ``_sluice_applied`` of the writer's schemas records for ``source`` (a new store asks)."""
        return applied_mod.records(self, source)

    def record_position(self, mark: AppliedFrom) -> None:
        """Record ``mark`` in every schema of the writer's mappings, in a transaction of its own
        (``sluice bootstrap``: the snapshot's position, once the load is done)."""
        applied_mod.record(self, mark)

    # -- life cycle ------------------------------------------------------------------------------
    def engine(self):
        return engine_for(self.target)

    def _connect(self, preflight: bool = False) -> Connection:
        engine = engine_for(self.target)
        try:
            conn = engine.connect()
        except SQLAlchemyError as e:
            raise connect_error(e, self.target, preflight=preflight) from None
        self.sql = Sql(self.dialect, engine.dialect)
        return conn

    def open(self) -> None:
        if self.conn is None:
            self.conn = self._connect()
        if not self.conn.in_transaction():
            self.conn.begin()

    def commit(self) -> None:
        if self.conn is None:
            return
        if self.applied is not None:
            try:
                self.applied.write()
            except DBAPIError as e:
                raise classify(e, self.target, table=applied_mod.TABLE, action="record the position in") from None
        try:
            self.conn.commit()
        except SQLAlchemyError as e:
            raise classify(e, self.target, table="(commit)", action="commit on") from None
        if self.applied is not None:
            self.applied.clear()
        if self.progress is not None:
            self.progress.committed()

    def rollback(self) -> None:
        if self.applied is not None:
            self.applied.clear()
        if self.progress is not None:
            self.progress.rolled_back()
        if self.conn is None:
            return
        try:
            self.conn.rollback()
        except SQLAlchemyError:  # a broken connection: the server rolls back; start afresh
            self.conn.invalidate()
            self.conn.close()
            self.conn = None

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    # -- statements --------------------------------------------------------------------------------
    def exec(self, sql: str, params: Any) -> CursorResult:
        return self.conn.exec_driver_sql(sql, params)

    def chunk(self) -> ChunkApply:
        """The narrow context that applies runs through the open connection."""
        return ChunkApply(self.conn, self.sql, self.dialect, self.target, self.stats)

    @property
    def missed(self) -> Counter:
        """UPDATE/DELETE that matched no row (canal semantics: not an error; counted in the stats)."""
        return self.stats.missed

    @missed.setter
    def missed(self, value: Counter) -> None:
        self.stats.missed = value

    # -- routing and reflection ------------------------------------------------------------------
    def route(self, mapping: Any, database: str, table: str) -> RdbTable:
        """The resolved route of ``mapping`` (an RdbTable, or a pipeline Mapping/DbMapping)."""
        if isinstance(mapping, RdbTable):
            return mapping
        key = (id(mapping), table)
        hit = self._routes.get(key)
        if hit is None or hit[0] is not mapping:
            hit = self._routes[key] = (mapping, RdbTable.from_mapping(mapping, table))
        return hit[1]

    def info(self, route: RdbTable) -> TableInfo:
        try:
            info = table_info(self.conn, self.target, self.dialect.family, route.target_schema, route.target_table)
        except DBAPIError as e:
            raise classify(e, self.target, table=route.qualified, action="read the columns of") from None
        if info is None:
            err = TargetError(f"target table {route.qualified} does not exist on {self.target.label}",
                              hint="create it (docs/rdb.md lists the suggested column types)")
            err.missing_table = True
            raise err
        return info

    def plan(self, route: RdbTable, change: Change) -> Plan:
        info = self.info(route)
        key = (route, tuple(change.data), change.pk_names)
        plan = info.plans.get(key)
        if plan is None:
            try:
                # a mirror's columns follow the source's replayed DDL: a narrower one is history being
                # replayed (the source rounded its rows the same way), not a hand-made table that rounds
                plan = build_plan(route, info, self.dialect.family, change, self.target.database,
                                  self.target.complete_types, exact_digits=not route.mirror_ddl)
            except TargetError:
                # a mirrored table that lacks a source column because a later DDL (already
                # replayed) dropped it: this change is history being replayed, not a new column
                if not (route.mirror_ddl and applied_after(self, route, change)):
                    raise
                plan = build_plan(replace(route, on_new_column="ignore"), info, self.dialect.family, change,
                                  self.target.database, self.target.complete_types, exact_digits=False)
            info.plans[key] = plan
        if plan.lacking:  # said by the sync, with the repair (ApplyStats.lacked); at every call: a chunk
            self.stats.lacked[lacked_key(route.origin, plan.source, plan.lacking)] += 1  # retried resets stats
        return plan

    # -- apply -------------------------------------------------------------------------------------
    def apply(self, mapping: Any, changes: list[Change]) -> None:
        if self.conn is None:
            self.open()
        self._prefetch(mapping, changes)
        if self.applied is not None and changes:
            c = changes[0]
            self.applied.wrote(self.route(mapping, c.database, c.table).target_schema)
        if all(c.fk_checks for c in changes):
            self.sequence.apply(mapping, changes)
            return
        for checks, part in groupby(changes, key=attrgetter("fk_checks")):  # in source order
            if checks:
                self.sequence.apply(mapping, list(part))
                continue
            part = list(part)
            self._fk_checks(False, f"{part[0].database}.{part[0].table}")
            try:
                self.sequence.apply(mapping, part)
            except BaseException:
                with suppress(Exception):  # the error that got here counts; the connection is rolled back
                    self._fk_checks(True)
                raise
            self._fk_checks(True)

    def _prefetch(self, mapping: Any, changes: list[Change]) -> None:
        """Reflect the chunk's tables that are not cached together (MySQL/MariaDB: a few queries
        for a chunk that spans a thousand small tables, instead of three per table)."""
        if self.dialect.family != "mysql" or len(changes) < 2:
            return
        tables: dict[str | None, dict[str, None]] = {}
        for database, table in dict.fromkeys([(c.database, c.table) for c in changes]):  # in first-seen order
            if not table:
                continue
            route = self.route(mapping, database, table)
            tables.setdefault(route.target_schema, {})[route.target_table] = None
        if sum(len(t) for t in tables.values()) < 2:
            return  # one table: table_info reads it as before
        for schema, names in tables.items():
            try:
                prefetch(self.conn, self.target, self.dialect.family, schema, list(names))
            except DBAPIError:
                pass  # reading them one by one says what is wrong, naming the table

    def _fk_checks(self, on: bool, table: str = "") -> None:
        """Foreign key checks off (or back on) for changes the source applied without them."""
        sql = fk_checks_sql(self.dialect.family, on)
        if sql is None or self.conn is None:
            return
        try:
            self.conn.exec_driver_sql(sql)
        except DBAPIError as e:
            hint = ("grant the target user SET on session_replication_role (PostgreSQL 15+: GRANT SET ON PARAMETER "
                    f"session_replication_role TO {self.target.username}; before 15 it takes a superuser)"
                    if self.dialect.family == "postgresql" else None)
            raise classify(e, self.target, table=table, action="turn foreign key checks off (the source applied "
                           "these rows without them) for", hint=hint) from None

    def ordered_info(self, mapping: Any, c: Change) -> TableInfo | None:
        """The target table of a change, or None when it is missing (applying says so)."""
        try:
            return self.info(self.route(mapping, c.database, c.table))
        except TargetError:
            return None

    def apply_runs(self, mapping: Any, changes: list[Change]) -> None:
        self._apply_runs(mapping, changes)

    def _apply_runs(self, mapping: Any, changes: list[Change]) -> None:
        i, n = 0, len(changes)
        while i < n:
            j = _run_end(changes, i)
            try:
                self._run(mapping, changes[i:j])
            except SluiceError:
                raise
            except SQLAlchemyError as e:  # not raised through the chunk apply (e.g. a lost connection)
                c = changes[i]
                raise classify(e, self.target, table=f"{c.database}.{c.table}", action=c.kind.lower()) from None
            i = j

    def _run(self, mapping: Any, run: list[Change]) -> None:
        first = run[0]
        route = self.route(mapping, first.database, first.table)
        try:
            self._run_routed(route, run)
        except TargetError as e:
            # a mirrored table renamed or dropped by a later DDL that was already replayed:
            # these changes are history being replayed (cursor reset), the target is ahead
            if not (getattr(e, "missing_table", False) and route.mirror_ddl and applied_after(self, route, first)):
                if getattr(e, "missing_table", False) and not getattr(e, "table", None):
                    e.table = f"{first.database}.{first.table}"  # the change's table, not the last one read
                raise
            log.info("history skipped", table=f"{first.database}.{first.table}", rows=len(run),
                     reason="a later DDL already replayed on the target")

    def _run_routed(self, route: RdbTable, run: list[Change]) -> None:
        first = run[0]
        if first.kind == "TRUNCATE":
            info = self.info(route)
            try:
                self.exec(self.sql.truncate(info), None)
            except DBAPIError as e:
                raise classify(e, self.target, table=info.label, action="truncate") from None
            log.info("truncated", table=info.label)
            return
        if self.dialect.family != "mysql" and dbsequence.is_state(first):
            try:
                self.info(route)
            except TargetError as e:  # no table of that name: a MariaDB sequence's state, for a sequence
                if not getattr(e, "missing_table", False):
                    raise
                return dbsequence.apply_states(self, route, run)
        self.chunk().run(self.plan(route, first), run)

    # -- DDL and pre-flight ------------------------------------------------------------------------
    def apply_ddl(self, mapping: Any, ddl: DdlChange) -> None:
        named = ddl_mod.resolve(ddl)
        if named.database != ddl.database:  # a sequence of another database: its mapping on this target
            mapping = next((m for m in self.mappings if hasattr(m, "matches")
                            and m.matches(named.database, named.table)), None)
            if mapping is None:
                log.info("ddl not replayed", reason=f"it names database {named.database}, which no mapping of this "
                         "target mirrors", sql=ddl.sql[:200])
                return
        ddl = named
        route = self.route(mapping, ddl.database, ddl.table) if ddl.table else None
        changed = ddl_mod.changed_tables(route, ddl)  # forgotten before and after: only what it can change
        forget(changed)
        ddl_mod.apply_ddl(self, route, ddl)
        forget(changed)

    def check(self, cascades: list | None = None) -> None:
        """Pre-flight: every mapping fits the target; ``cascades``: the source's cascading foreign
        keys in this target's names (pipeline/job/cascades.py), which the target must have."""
        conn = self._connect(preflight=True)
        try:
            self.conn = conn
            for m in self.mappings:
                check_mapping(self, m)
            if cascades is not None:
                check_cascades(self, cascades)
        except DBAPIError as e:
            raise classify(e, self.target, table="(schema)", action="read the foreign keys of") from None
        finally:
            self.conn = None
            conn.close()

    def check_key_collations(self, source: SourceCollations) -> None:
        """Pre-flight: no key of a mapped MySQL/MariaDB table compares more coarsely than its source
        column; ``source`` answers for the source (adapters/rdb/keycollations.py)."""
        check_key_collations(self, source)


def _run_end(changes: list[Change], i: int) -> int:
    c = changes[i]
    if c.kind == "TRUNCATE":
        return i + 1
    kind, db, table, keys = c.kind, c.database, c.table, c.data.keys()
    j, n = i + 1, len(changes)
    while j < n:
        d = changes[j]
        if d.kind != kind or d.table != table or d.database != db or d.data.keys() != keys:
            break
        j += 1
    return j
