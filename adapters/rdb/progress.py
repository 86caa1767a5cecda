"""Where an ordered group stands in a target: the last applied change per target table.

Ordered groups (:mod:`adapters.rdb.keys`) are applied in source order, which reproduces the
source's states one by one -- but only from a target that equals the source at the start.
A replay (a crash after a chunk committed and before the batch was acked, or ``store
set-cursor`` back) would start from a target *ahead* of the stream, where a unique value or a
foreign key can refuse an old change. So each chunk records, in the same transaction, the
position ``(batchId, seq, row)`` of the last change it applied to each ordered table, in a
table ``_sluice_progress`` beside that table (same database/schema: a backup of the database
restores both together), and a replay skips what the target already holds.

The row is keyed by the *scope* (the batch store's id and the group) and the table. A
``store recapture --from N`` re-cuts batches N.. (the store's lineage records it): a position
written before it, at N or later, counts as "everything before N".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy.exc import DBAPIError

from adapters.rdb.schema import TableInfo

if TYPE_CHECKING:
    from adapters.rdb.writer import RdbWriter

TABLE = "_sluice_progress"
_MAX = 1 << 62


class Progress:
    """The positions of one writer's ordered tables: committed, and pending in the open chunk."""

    def __init__(self, writer: RdbWriter, scope: str, generation: int = 0,
                 recaptures: tuple[tuple[int, int], ...] = ()):
        self.w, self.scope = writer, scope
        self.generation, self.recaptures = generation, recaptures
        self._committed: dict[tuple, tuple[int, int, int] | None] = {}
        self._pending: dict[tuple, tuple[TableInfo, tuple[int, int, int]]] = {}

    @staticmethod
    def _key(info: TableInfo) -> tuple:
        return (info.schema, info.name)

    def position(self, info: TableInfo) -> tuple[int, int, int] | None:
        """The last change applied to ``info``'s table (pending ones included), or None."""
        k = self._key(info)
        if k in self._pending:
            return self._pending[k][1]
        if k not in self._committed:
            self._committed[k] = self._read(info)
        return self._committed[k]

    def advance(self, info: TableInfo, seq: tuple[int, int, int]) -> None:
        self._pending[self._key(info)] = (info, tuple(seq))

    def _table(self, info: TableInfo) -> str:
        q = self.w.sql.q
        return f"{q(info.schema)}.{q(TABLE)}" if info.schema else q(TABLE)

    def _read(self, info: TableInfo) -> tuple[int, int, int] | None:
        """Read on a connection of its own (the table may not exist yet: creating it there keeps the
        open transaction intact; MySQL commits around DDL). Only this partition writes the rows
        of an ordered table, and one job at a time applies a group, so the read is current."""
        sql = (f"SELECT batch_id, seq, row_no, generation FROM {self._table(info)} "
               f"WHERE scope = {self.w.sql.ph} AND tbl = {self.w.sql.ph}")
        args = (self.scope, info.name)
        if self.w.dialect.family == "sqlite":  # one file, one writer: DDL in the transaction
            self.w.exec(self._ddl(info), ())
            row = self.w.exec(sql, args).fetchone()
        else:
            with self.w.engine().connect() as conn:
                try:
                    row = conn.exec_driver_sql(sql, args).fetchone()
                except DBAPIError:  # no such table yet (or a concurrent creation): create, read again
                    conn.rollback()
                    try:
                        conn.exec_driver_sql(self._ddl(info))
                        conn.commit()
                    except DBAPIError:
                        conn.rollback()
                    row = conn.exec_driver_sql(sql, args).fetchone()
                conn.rollback()
        if row is None:
            return None
        pos, gen = (int(row[0]), int(row[1]), int(row[2])), int(row[3])
        for g, first in self.recaptures:  # batches from ``first`` on were cut again after it was written
            if g > gen and pos[0] >= first:
                pos = min(pos, (first - 1, _MAX, _MAX))
        return pos

    def _ddl(self, info: TableInfo) -> str:
        text = "VARCHAR(190)" if self.w.dialect.family == "mysql" else "TEXT"
        return (f"CREATE TABLE IF NOT EXISTS {self._table(info)} (scope {text} NOT NULL, tbl {text} NOT NULL, "
                "batch_id BIGINT NOT NULL, seq BIGINT NOT NULL, row_no BIGINT NOT NULL, generation BIGINT NOT NULL, "
                "PRIMARY KEY (scope, tbl))")

    def write(self) -> None:
        """Record the pending positions inside the open transaction (before its commit)."""
        if not self._pending:
            return
        ph, fam = self.w.sql.ph, self.w.dialect.family
        for info, seq in self._pending.values():
            if self._key(info) not in self._committed:  # reading creates the table if needed
                self._committed[self._key(info)] = self._read(info)
            cols = "(scope, tbl, batch_id, seq, row_no, generation)"
            values = f"({', '.join([ph] * 6)})"
            if fam == "mysql":
                tail = ("ON DUPLICATE KEY UPDATE batch_id = VALUES(batch_id), seq = VALUES(seq), "
                        "row_no = VALUES(row_no), generation = VALUES(generation)")
            else:
                tail = ("ON CONFLICT (scope, tbl) DO UPDATE SET batch_id = EXCLUDED.batch_id, seq = EXCLUDED.seq, "
                        "row_no = EXCLUDED.row_no, generation = EXCLUDED.generation")
            self.w.exec(f"INSERT INTO {self._table(info)} {cols} VALUES {values} {tail}",
                        (self.scope, info.name, *seq, self.generation))

    def committed(self) -> None:
        for k, (_, seq) in self._pending.items():
            self._committed[k] = seq
        self._pending.clear()

    def rolled_back(self) -> None:
        self._pending.clear()


def lineage_args(ctx: Any) -> dict[str, Any]:
    """The Progress arguments a job context carries (scope, generation, recaptures)."""
    return {"scope": ctx.scope, "generation": ctx.generation, "recaptures": ctx.recaptures}
