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

from typing import Any

from adapters.base import Change
from pipeline.etl.values import row_decoder
from sluice_common.chunksql import Side, range_clause
from sluice_common.mysqltypes import quote_ident as qi
from sluice_common.normalize import dml_text

from .rdb import ChunkCounts


class DocChunks:
    """One ES or HBase mapping's source table on one executor."""

    def __init__(self, table: Any, target: Any, mapping: Any, src_conn: Any):
        from adapters.registry import make_verifier

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
        self.verifier = make_verifier(table.kind, target, (mapping,))

    # -- what the target should hold, and what it holds (the target's verifier compares) --------
    def _changes(self, rows: list[tuple]) -> list[Change]:
        """Source rows as the INSERT changes capture would have stored (Dml text)."""
        names = [c.name for c in self.t.meta.columns]
        kinds = [(c.data_type, c.column_type) for c in self.t.meta.columns]
        out = []
        for r in rows:
            data = {n: dml_text(dt, ct, v) for n, (dt, ct), v in zip(names, kinds, r, strict=True)}
            out.append(Change("INSERT", self.t.meta.database, self.t.meta.table, data, pk_names=tuple(self.pk),
                              mysql_type=self.types))
        return out

    def _count(self, lo: tuple | None, hi: tuple | None) -> int:
        """How many source rows of the chunk the target holds otherwise (or lacks); the source is
        read as the verifier asks: keys (documents re-queried by the adapter) or whole rows."""
        where, params = range_clause(self.src, self.pk, lo, hi)

        def keys() -> list[tuple]:
            return [tuple(r) for r in self.src.rows(f"SELECT {self.order} FROM {self.st} WHERE {where}", params)]

        def changes() -> list[Change]:
            return self._changes(self.src.rows(f"SELECT {self.all_cols} FROM {self.st} WHERE {where}", params))

        return self.verifier.differing(self.mapping, self.t.meta.database, self.pk, keys, changes)

    # -- the chunk interface (as RdbChunks) ---------------------------------------------------------
    def differs(self, lo: tuple | None, hi: tuple | None) -> bool:
        return self._count(lo, hi) > 0

    def diff(self, lo: tuple | None, hi: tuple | None) -> ChunkCounts:
        n = self._count(lo, hi)
        return ChunkCounts(changed=n, keys=[])

    def repair(self, snap: Any, writer: Any, mapping: Any, lo: tuple | None, hi: tuple | None) -> ChunkCounts:
        """Write every source row of the range again, from the snapshot (the caller holds the lock)."""
        n = self._count(lo, hi)
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
        self.verifier.close()

