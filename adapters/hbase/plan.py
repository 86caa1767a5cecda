"""One hbaseMapping compiled for the writer: row keys, cells, and the per-chunk fold.

Row key (canal's rules): a composite ``rowKey: a,b`` joins the values' text with
``rowKeySeparator`` (default ``|``; NULL -> empty); the column mapped as ``ROWKEY LEN:n``
is an integer zero-padded to n characters as Java's ``String.format("%0nd")`` (``-42`` ->
``-0042``, longer values are not cut; a non-integer value falls back to the plain
encoding below, for every operation alike); a plain ``ROWKEY`` column is encoded like a
cell of the mode (NATIVE: binary). The single ROWKEY column is not written as a cell;
the columns of a composite rowKey are (canal does the same).

Cells: every column of the change except excluded ones, under ``FAMILY:QUALIFIER`` from
``columns`` or the default family and the column's own name (upper-cased when
``uppercaseQualifier``). A NULL value deletes the cell.

:class:`Fold` merges a chunk's changes per row in source order, so each row is sent once
per phase: HBase's Thrift ``mutateRows`` applies a row's puts before its deletes, so a
row deleted and re-written in one chunk needs its delete sent first (see writer.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from adapters.base import ApplyStats, Change
from adapters.hbase.values import ValueError_, encoder, is_binary
from sluice_common.errors import ConfigError, RowError, TargetError


@dataclass(slots=True)
class RowOps:
    """What one row gets in one chunk: ``reset`` = the row is deleted first; ``cells`` maps
    ``family:qualifier`` to the value to put, or None to delete that cell."""

    reset: bool = False
    cells: dict[bytes, bytes | None] = field(default_factory=dict)


class Fold:
    """The net effect of a chunk on each (table, row), in first-touch order."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, bytes], RowOps] = {}

    def delete_row(self, table: str, row: bytes) -> None:
        self.rows[(table, row)] = RowOps(reset=True)

    def set_cells(self, table: str, row: bytes, cells: dict[bytes, bytes | None]) -> None:
        ops = self.rows.get((table, row))
        if ops is None:
            self.rows[(table, row)] = RowOps(False, cells)
            return
        for col, value in cells.items():
            if value is None and ops.reset:
                ops.cells.pop(col, None)  # the row was emptied in this chunk already
            else:
                ops.cells[col] = value

    def __len__(self) -> int:
        return len(self.rows)


def refuse_phoenix(spec: Any, file: str) -> None:
    """PHOENIX mode is not implemented: say so with what to do instead."""
    if spec.mode == "PHOENIX":
        raise ConfigError(file, "hbaseMapping.mode",
                          "PHOENIX mode is not supported by Sluice's hbase adapter (Phoenix's row-key and "
                          "sort-order encodings are not implemented; writing them half-right would corrupt "
                          "Phoenix tables)", hint="use mode: STRING or NATIVE, or replicate into Phoenix with "
                                                  "the rdb adapter over Phoenix's query server")


class MappingPlan:
    """How changes of one mapping become row keys and cells (encoders cached per column/type)."""

    def __init__(self, mapping: Any):
        #: the parsed ``hbaseMapping`` (pipeline/mapping/hbase.py's model, read by its attributes)
        self.spec: Any = getattr(mapping, "spec", mapping)
        self.file: str = getattr(mapping, "file", "<mapping>")
        refuse_phoenix(self.spec, self.file)
        self.table = self.spec.hbaseTable
        self.mode = self.spec.mode
        self.sep = self.spec.rowKeySeparator.encode("utf-8")
        self.composite = self.spec.rowKey is not None
        self.key_columns = self.spec.rowkey_columns
        self.key_item: Any = self.spec.rowkey_item  # an HbaseColumn, or None
        self._cols: dict[tuple[str, str | None], tuple[bytes, Any] | None] = {}
        self._progs: dict[tuple, list[tuple[str, bytes, Any]]] = {}
        self._key_enc: dict[str | None, Any] = {}
        self._last: tuple | None = None

    # -- row keys ---------------------------------------------------------------------------
    def rowkey(self, change: Change) -> bytes:
        data, types = change.data, change.mysql_type
        if self.composite:
            parts = []
            for col in self.key_columns:
                v = data.get(col)
                parts.append(b"" if v is None else v.encode("latin-1" if is_binary(types.get(col)) else "utf-8"))
            return self.sep.join(parts)
        item = self.key_item
        assert item is not None
        v = data.get(item.source)
        if v is None:
            raise RowError(f"{self._where(change)}: row key column '{item.source}' is NULL; HBase rows need a key",
                           hint="map a NOT NULL column as ROWKEY (or use a composite rowKey)")
        if item.rowkey_len:
            try:
                return ("%0*d" % (item.rowkey_len, int(v))).encode("ascii")
            except ValueError:
                pass  # not an integer: the plain encoding (canal's INSERT does the same)
        mt = change.mysql_type.get(item.source)
        enc = self._key_enc.get(mt)
        if enc is None:
            enc = self._key_enc[mt] = encoder(self.mode, item.type, mt)
        try:
            key = enc(v)
        except (ValueError_, ValueError, OverflowError) as e:
            raise self._bad_value(change, item.source, v, e) from None
        if key is None:
            raise TargetError(f"{self._where(change)}: row key value {v!r} of '{item.source}' has no "
                              f"{self.mode} encoding")
        return key

    # -- cells ------------------------------------------------------------------------------
    def _column(self, source: str, mysql_type: str | None) -> tuple[bytes, Any] | None:
        hit = self._cols.get((source, mysql_type), False)
        if hit is not False:
            return hit  # type: ignore[return-value]
        item = self.spec.column_for(source)
        if item is None or item.is_rowkey:
            out = None
        else:
            col = f"{item.family}:{item.qualifier}".encode()
            out = (col, encoder(self.mode, item.type, mysql_type))
        self._cols[(source, mysql_type)] = out
        return out

    def _bad_value(self, change: Change, source: str, value: str, e: Exception) -> RowError:
        mt = change.mysql_type.get(source)
        return RowError(f"{self._where(change)}: column '{source}' ({mt}) value {value[:60]!r} cannot be "
                        f"written in {self.mode} mode: {e}",
                        hint=f"fix the $TYPE of '{source}' in {self.file} (or drop it to infer from the MySQL type)")

    def cells(self, change: Change, names=None) -> dict[bytes, bytes | None]:
        """``(family:qualifier, bytes or None)`` for the named columns, or for every column of
        the row when ``names`` is None (None as a value: delete the cell)."""
        types = change.mysql_type
        if names is None:  # the full row: usually the same columns and types as the last one
            last = self._last
            if last is not None and last[0] == types and last[1] == change.data.keys():
                prog = last[2]
            else:
                prog = self._program(tuple(change.data), types)
                self._last = (types, change.data.keys(), prog)
        else:
            prog = self._program(tuple(names), types)
        data = change.data
        try:
            return {col: None if (v := data.get(n)) is None else enc(v) for n, col, enc in prog}
        except (ValueError_, ValueError, OverflowError):
            for n, _, enc in prog:  # find the culprit for the message
                v = data.get(n)
                try:
                    if v is not None:
                        enc(v)
                except (ValueError_, ValueError, OverflowError) as e:
                    raise self._bad_value(change, n, v, e) from None
            raise

    def _program(self, names: tuple[str, ...], types: dict[str, str]) -> list[tuple[str, bytes, Any]]:
        key = (names, tuple(types.get(n) for n in names))
        prog = self._progs.get(key)
        if prog is None:
            prog = self._progs[key] = [(n, *spec) for n in names if (spec := self._column(n, types.get(n)))]
        return prog

    def _where(self, change: Change) -> str:
        return f"{change.database}.{change.table} -> HBase {self.table} ({self.file})"

    # -- folding a change -------------------------------------------------------------------
    def fold(self, fold: Fold, change: Change, stats: ApplyStats) -> None:
        """Add one change's effect to ``fold`` (TRUNCATE is handled by the writer)."""
        name = self.spec.source_key if change.table == self.spec.table else f"{change.database}.{change.table}"
        row = self.rowkey(change)
        kind = change.kind
        if kind in ("INSERT", "UPSERT"):  # a put of every cell (NULL: delete it) overwrites the row
            fold.set_cells(self.table, row, self.cells(change))
            stats.inserted[name] += 1
        elif kind == "UPDATE":
            # changed columns only; a Dml without ``old`` (canal-made) carries the full row
            names = None if change.old is None else [c for c in change.old if c in change.data]
            fold.set_cells(self.table, row, self.cells(change, names))
            stats.updated[name] += 1
        elif kind == "DELETE":
            fold.delete_row(self.table, row)
            stats.deleted[name] += 1
        else:
            raise TargetError(f"{self._where(change)}: unknown change kind {change.kind!r}")
