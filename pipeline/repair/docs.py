"""Repairing one key range of an Elasticsearch/OpenSearch index or an HBase table (executor side).

These targets hold documents/rows *built* from the source, so a chunk is compared as the adapter
would write it: the source rows of the key range are turned into what the adapter writes (ES: the
document of each row of the mapping SQL, through the adapter's own re-query and document code,
as ``sluice verify`` samples; HBase: row key and cells through the adapter's encoders), and
compared with what the target holds (``mget`` by ``_id`` and routing; HBase ``rows`` by row key).

A chunk that differs is repaired under the group's apply lock by writing every source row of its
key range again, read from the snapshot, as ``UPSERT`` changes through the adapter's writer (ES
re-queries the mapping SQL for them, join documents included; HBase puts every cell, NULLs
deleting theirs). Documents or rows the source no longer has are not found by this compare
(docs/repair.md, "Limits").
"""

from __future__ import annotations

import json
from typing import Any

from adapters.base import ApplyStats, Change
from pipeline.etl.values import row_decoder
from pipeline.ops.normalize import dml_text
from pipeline.ops.verify_rdb import Side, range_clause
from sluice_common.mysqltypes import quote_ident as qi

from .rdb import ChunkCounts


class DocChunks:
    """One ES or HBase mapping's source table on one executor."""

    def __init__(self, table: Any, target: Any, mapping: Any, src_conn: Any):
        self.t, self.target, self.mapping = table, target, mapping
        meta = table.meta
        self.src = Side(src_conn, "mysql")
        self.st = self.src.table(meta.database, meta.table)
        self.pk = list(meta.pk)
        self.order = ", ".join(qi(k) for k in meta.pk)
        self.all_cols = ", ".join(qi(c.name) for c in meta.columns)
        self.raw_cols = ", ".join(c.select_expr(qi(c.name)) for c in meta.columns)
        self.decode = row_decoder(meta.columns)
        self.types = meta.mysql_types()
        self._es = None
        self._hb = None

    # -- what the target should hold, and what it holds -----------------------------------------
    def _expected_es(self, keys: list[tuple]) -> dict[str, tuple[Any, Any]]:
        from adapters.es import bulk, requery
        from adapters.es.chunk import ChunkApplier
        from adapters.es.plan import doc_plan
        from adapters.es.values import default_json

        if self._es is None:
            plan = doc_plan(self.mapping)
            applier = ChunkApplier(self.target, plan, self.mapping, ApplyStats())
            src, db = applier.for_verify()
            db = db or self.t.meta.database  # unqualified SQL: the database the sync meets its changes in
            self._es = (plan, applier, src, db, bulk.client(self.target), requery)
        plan, applier, src, db, _, rq = self._es
        out = {}
        cols = [(plan.main_alias, c) for c in self.pk]
        for names, codes, row in rq.requery(src, db, plan.sql, cols, keys, f"repairing {self.mapping.file}"):
            action = applier.document(names, codes, row)
            out[action.doc_id] = (action, json.loads(json.dumps(action.body, default=default_json)))
        return out

    def _differing_es(self, keys: list[tuple]) -> int:
        want = self._expected_es(keys)
        if not want:
            return 0
        plan, api = self._es[0], self._es[4]
        docs = [{"_id": i, **({"routing": a.routing} if a.routing else {})} for i, (a, _) in want.items()]
        try:
            found = api.mget(plan.index, docs)
        except Exception as e:  # noqa: BLE001 - classified by the client's errors.py
            raise api.error(e, f"reading documents of index {plan.index}") from None
        got = {d["_id"]: d.get("_source") for d in found if d.get("found")}
        want = self._expected_es(keys)  # again, after the target was read: newer than all it had applied
        return sum(1 for i, (_, body) in want.items() if got.get(i) != body)

    def _differing_hbase(self, rows: list[tuple], where: str, params: list) -> int:
        from adapters.hbase.client import connect
        from adapters.hbase.plan import MappingPlan

        if self._hb is None:
            self._hb = (MappingPlan(self.mapping), connect(self.target))
        plan, pc = self._hb
        got = dict(pc.conn.table(self.mapping.spec.hbaseTable).rows(list(self._hbase_rows(plan, rows))))
        # the source again, after the target was read: newer than everything the target had applied
        want = self._hbase_rows(plan, self.src.rows(f"SELECT {self.all_cols} FROM {self.st} WHERE {where}", params))
        extra = [k for k in want if k not in got]
        if extra:
            got.update(dict(pc.conn.table(self.mapping.spec.hbaseTable).rows(extra)))
        return sum(1 for k, cells in want.items() if dict(got.get(k) or {}) != cells)

    def _hbase_rows(self, plan: Any, rows: list[tuple]) -> dict[bytes, dict]:
        names = [c.name for c in self.t.meta.columns]
        kinds = [(c.data_type, c.column_type) for c in self.t.meta.columns]
        want = {}
        for r in rows:
            data = {n: dml_text(dt, ct, v) for n, (dt, ct), v in zip(names, kinds, r, strict=True)}
            change = Change("INSERT", self.t.meta.database, self.t.meta.table, data, pk_names=tuple(self.pk),
                            mysql_type=self.types)
            want[plan.rowkey(change)] = {c: v for c, v in plan.cells(change).items() if v is not None}
        return want

    def _count(self, lo: tuple | None, hi: tuple | None) -> tuple[int, int]:
        """(source rows in the chunk, rows whose document/row differs)."""
        where, params = range_clause(self.src, self.pk, lo, hi)
        if self.t.kind == "es":
            keys = [tuple(r) for r in self.src.rows(f"SELECT {self.order} FROM {self.st} WHERE {where}", params)]
            return len(keys), self._differing_es(keys) if keys else 0
        rows = self.src.rows(f"SELECT {self.all_cols} FROM {self.st} WHERE {where}", params)
        return len(rows), self._differing_hbase(rows, where, params) if rows else 0

    # -- the chunk interface (as RdbChunks) ---------------------------------------------------------
    def differs(self, lo: tuple | None, hi: tuple | None) -> bool:
        return self._count(lo, hi)[1] > 0

    def diff(self, lo: tuple | None, hi: tuple | None) -> ChunkCounts:
        _, n = self._count(lo, hi)
        return ChunkCounts(changed=n, keys=[])

    def repair(self, snap: Any, writer: Any, mapping: Any, lo: tuple | None, hi: tuple | None) -> ChunkCounts:
        """Write every source row of the range again, from the snapshot (the caller holds the lock)."""
        _, n = self._count(lo, hi)
        out = ChunkCounts(changed=n, keys=[])
        if not n:
            return out  # replication caught up meanwhile
        where, params = range_clause(self.src, self.pk, lo, hi)
        raw = snap.rows(f"SELECT {self.raw_cols} FROM {self.st} WHERE {where} ORDER BY {self.order}", params,
                        raw=True)
        changes = [Change("UPSERT", self.t.meta.database, self.t.meta.table, self.decode(r), None,
                          tuple(self.pk), self.types) for r in raw]
        if changes:
            writer.apply(mapping, changes)
        out.upserted = len(changes)
        return out

    def close(self) -> None:
        if self._hb is not None:
            try:
                self._hb[1].close()
            except Exception:  # noqa: BLE001 - already broken
                pass
            self._hb = None

