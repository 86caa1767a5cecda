"""The HBase :class:`Writer`: canal hbaseMapping changes -> happybase batches over Thrift1.

``apply`` only folds a chunk's changes per row (plan.py); ``commit`` sends them through the
chunk apply (chunk.py: row deletes first where a row is deleted and written again, then one
pass of puts, cell deletes and row deletes, over one pooled connection).

HBase has no transactions: a chunk that fails half-way stays half-applied. The job then
retries the chunk or, after the retries, fails the partition without acking the batch;
the next run replays it. Replays converge because every mutation is idempotent and keyed
by row key (a put of the same value, a delete of the same cell or row), and the changes of
one row are replayed in source order, so the last change of each cell wins again.
"""

from __future__ import annotations

from typing import Any

from adapters.base import ApplyStats, Change, Writer
from adapters.hbase import client as pool
from adapters.hbase.chunk import ChunkApply
from adapters.hbase.config import HbaseTarget
from adapters.hbase.errors import classify, short_message
from adapters.hbase.plan import Fold, MappingPlan
from sluice_common.errors import TargetError, TargetMismatchError


class HbaseWriter(Writer):
    """Writes the changes of its hbaseMappings to one HBase Thrift1 gateway."""

    def __init__(self, target: HbaseTarget, mappings: tuple[Any, ...]):
        super().__init__(target, mappings)
        self.target: HbaseTarget = target
        self._chunk = ChunkApply(target)
        self._plans: dict[int, tuple[Any, MappingPlan]] = {}
        self._pending: list[Fold | str] = []  # a Fold, or the name of a table to truncate
        self._pending_stats = ApplyStats()

    # -- life cycle ---------------------------------------------------------------------------
    def check(self) -> None:
        """Thrift answers; every mapping's table exists (or is created) with its families."""
        plans = [self._plan(m) for m in self.mappings]  # PHOENIX is refused before connecting
        try:
            pc = pool.connect(self.target)
            tables = {t.decode() for t in pc.conn.tables()}
        except Exception as e:  # noqa: BLE001 - any failure here means "cannot reach"
            raise TargetError(f"HBase Thrift server {self.target.label} is not reachable: {short_message(e)}",
                              hint="start the gateway ('hbase thrift start -p <port>') or fix hosts / thrift.host "
                                   "/ thrift.port of the hbase outerAdapter") from None
        try:
            for plan in plans:
                self._ensure_table(pc, plan, tables)
        finally:
            pc.close()

    def _ensure_table(self, pc: pool.PooledConnection, plan: MappingPlan, tables: set[str]) -> None:
        spec, name = plan.spec, plan.table
        if name not in tables:
            if not spec.autoCreateTable:
                fams = ", ".join(f"'{f}'" for f in spec.families)
                raise TargetMismatchError(f"HBase table {name} (mapping {plan.file}, hbaseMapping.hbaseTable) does "
                                          f"not exist on {self.target.label}",
                                          hint=f"create it in the HBase shell: create '{name}', {fams} - or set "
                                          "autoCreateTable: true in the mapping")
            try:
                pc.conn.create_table(name, {f: {"max_versions": 1} for f in spec.families})
            except Exception as e:  # noqa: BLE001 - AlreadyExists: someone else created it
                if type(e).__name__ != "AlreadyExists":
                    raise classify(e, where=self.target.label, action="create the table", table=name) from None
            tables.add(name)
        try:
            have = {f.decode().rstrip(":") for f in pc.conn.table(name).families()}
        except Exception as e:  # noqa: BLE001
            raise classify(e, where=self.target.label, action="read the column families", table=name) from None
        missing = [f for f in spec.families if f not in have]
        if missing:
            alters = "; ".join(f"alter '{name}', NAME => '{f}'" for f in missing)
            raise TargetMismatchError(f"HBase table {name} (mapping {plan.file}, hbaseMapping.columns) has no column "
                                      f"famil{'y' if len(missing) == 1 else 'ies'} {', '.join(missing)} "
                                      f"(it has: {', '.join(sorted(have)) or 'none'})",
                                      hint=f"in the HBase shell: {alters} (Thrift1 cannot alter tables)")

    def open(self) -> None:
        """Begin. The pooled connection is taken at the first send, inside ``commit``: a gateway
        that is down then fails the chunk with a TransientError the job retries with backoff."""
        self._chunk.opened = True

    def close(self) -> None:
        self._chunk.release()

    # -- applying -----------------------------------------------------------------------------
    def _plan(self, mapping: Any) -> MappingPlan:
        hit = self._plans.get(id(mapping))
        if hit is None or hit[0] is not mapping:
            hit = self._plans[id(mapping)] = (mapping, MappingPlan(mapping))
        return hit[1]

    def apply(self, mapping: Any, changes: list[Change]) -> None:
        plan = self._plan(mapping)
        for change in changes:
            if change.kind == "TRUNCATE":
                self._pending.append(plan.table)
                continue
            if not self._pending or not isinstance(self._pending[-1], Fold):
                self._pending.append(Fold())
            plan.fold(self._pending[-1], change, self._pending_stats)  # type: ignore[arg-type]

    def commit(self) -> None:
        self._chunk.send(self._pending)
        self._pending.clear()
        self.stats.add(self._pending_stats)
        self._pending_stats = ApplyStats()

    def rollback(self) -> None:
        """Forget the unsent chunk (what was already sent stays: HBase has no transactions)."""
        self._pending.clear()
        self._pending_stats = ApplyStats()
