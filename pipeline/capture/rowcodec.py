"""Per-table row decoders, compiled once per table-map and reused for every row.

python-mysql-replication frames the protocol and parses the table-map; the row images
are decoded here straight from the rows-event bytes, with one precomputed decoder per
column (pipeline/capture/values.py). That keeps the per-row path short and makes the
value rules ours (the library turns zero dates into None, for example).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pymysqlreplication.constants import FIELD_TYPE as T

from sluice_common.errors import SourceError

from .columns import ColumnSpec, spec_from_library
from .decoder import lenenc
from .jsondiff import apply_diffs
from .values import Decoder

#: an after-image value the binlog does not carry (a JSON diff without its before document)
UNKNOWN = object()

Row = dict[str, str | None]


@dataclass(frozen=True)
class TableCodec:
    """Everything capture needs to turn one table's row images into Dml values."""

    database: str
    table: str
    columns: tuple[ColumnSpec, ...]
    pk_names: tuple[str, ...]
    mysql_type: dict[str, str] = field(hash=False)
    sql_type: dict[str, int] = field(hash=False)
    row_overhead: int = 0  # JSON bytes of one row besides its values (for batch size estimates)
    json_parts: list[bytes] = field(default_factory=list, hash=False, compare=False, repr=False)
    _plans: dict[bytes, tuple[int, tuple[tuple[str, Decoder], ...]]] = field(
        default_factory=dict, hash=False, compare=False, repr=False)

    @classmethod
    def build(cls, database: str, table: str, specs: list[ColumnSpec],
              pk_order: list[int] | None = None) -> TableCodec:
        """A codec for ``specs``; ``pk_order`` lists the primary key's column indexes in key order."""
        names = [c.name for c in specs]
        if len(set(names)) != len(names) or not all(names):
            _duplicate_names(database, table, names)
        pk = [specs[i].name for i in (pk_order or []) if i < len(specs)] or [c.name for c in specs if c.is_pk]
        return cls(database=database, table=table, columns=tuple(specs), pk_names=tuple(pk),
                   mysql_type={c.name: c.mysql_type() for c in specs},
                   sql_type={c.name: c.sql_type() for c in specs},
                   row_overhead=sum(len(c.name) + 6 for c in specs) + 2)

    def whole(self, present: bytes) -> bool:
        """True if a columns-present bitmap marks every column (bits past the last are ignored:
        MySQL sets them)."""
        full = (1 << len(self.columns)) - 1
        return int.from_bytes(present, "little") & full == full

    def present_names(self, present: bytes) -> list[str]:
        """The names of the columns a columns-present bitmap marks."""
        bits = int.from_bytes(present, "little")
        return [c.name for i, c in enumerate(self.columns) if bits >> i & 1]

    def plan(self, present: bytes) -> tuple[int, tuple[tuple[str, Decoder], ...]]:
        """(null-bitmap bytes, ((name, decoder), ...)) for a columns-present bitmap."""
        p = self._plans.get(present)
        if p is None:
            bits = int.from_bytes(present, "little")
            cols = tuple((c.name, c.decoder()) for i, c in enumerate(self.columns) if bits >> i & 1)
            p = ((len(cols) + 7) // 8, cols)
            self._plans[present] = p
        return p

    def decode_rows(self, buf: bytes, pos: int, end: int, present: bytes,
                    present2: bytes | None = None, partial_json: bool = False, where: str = "") -> list[Any]:
        """Rows of one event body ``buf[pos:end]``: dicts, or (before, after) pairs for UPDATE.
        ``partial_json``: a MySQL partial update (after images with value options, :mod:`jsondiff`)."""
        if partial_json:
            return self._partial_rows(buf, pos, end, present, present2 or present, where)
        nb, cols = self.plan(present)
        if present2 is None:
            out: list[Any] = []
            while pos < end:
                row, pos = _decode_row(buf, pos, nb, cols)
                out.append(row)
            return out
        nb2, cols2 = self.plan(present2)
        pairs: list[Any] = []
        while pos < end:
            before, pos = _decode_row(buf, pos, nb, cols)
            after, pos = _decode_row(buf, pos, nb2, cols2)
            pairs.append((before, after))
        return pairs

    def _partial_rows(self, buf: bytes, pos: int, end: int, present: bytes, present2: bytes,
                      where: str) -> list[Any]:
        """(before, after) pairs of a partial update: each after image starts with its value options
        (bit 1: some JSON columns hold a diff, marked in a bitmap over the table's JSON columns)."""
        nb, cols = self.plan(present)
        nb2, cols2 = self.plan(present2)
        json_no = {c.name: i for i, c in enumerate(c for c in self.columns if c.type == T.JSON)}
        nbits = (len(json_no) + 7) // 8
        pairs: list[Any] = []
        while pos < end:
            before, pos = _decode_row(buf, pos, nb, cols)
            options, pos = lenenc(buf, pos)
            partial = 0
            if options & 1:
                partial = int.from_bytes(buf[pos:pos + nbits], "little")
                pos += nbits
            if not partial:
                after, pos = _decode_row(buf, pos, nb2, cols2)
                pairs.append((before, after))
                continue
            nulls = int.from_bytes(buf[pos:pos + nb2], "little")
            pos += nb2
            after: Row = {}
            for j, (name, dec) in enumerate(cols2):
                if nulls >> j & 1:
                    after[name] = None
                elif name in json_no and partial >> json_no[name] & 1:
                    n = int.from_bytes(buf[pos:pos + 4], "little")
                    # the before image lacks the document (binlog_row_image is not FULL in the writing
                    # session): the new one is not in the binlog; the group refuses the change by name
                    where_col = f"{self.database}.{self.table}.{name}"
                    after[name] = UNKNOWN if name not in before else \
                        apply_diffs(before[name], buf[pos + 4:pos + 4 + n], where, where_col)
                    pos += 4 + n
                else:
                    after[name], pos = dec(buf, pos)
            pairs.append((before, after))
        return pairs


def _decode_row(buf: bytes, pos: int, nb: int, cols: tuple[tuple[str, Decoder], ...]) -> tuple[Row, int]:
    nulls = int.from_bytes(buf[pos:pos + nb], "little")
    pos += nb
    row: Row = {}
    if not nulls:
        for name, dec in cols:
            row[name], pos = dec(buf, pos)
        return row, pos
    bit = 1
    for name, dec in cols:
        if nulls & bit:
            row[name] = None
        else:
            row[name], pos = dec(buf, pos)
        bit <<= 1
    return row, pos


def _duplicate_names(database: str, table: str, names: list[str]) -> None:
    raise SourceError(f"{database}.{table}: the binlog table map has no usable column names ({names[:5]}...)",
                      hint="set binlog_row_metadata=FULL on the source before the rows are written")


class CodecCache:
    """TableCodecs keyed by the table-map's content (not its table id, which is reused)."""

    def __init__(self) -> None:
        self._by_key: dict[tuple, TableCodec] = {}

    def for_table_map(self, ev: Any) -> TableCodec:
        """The codec for a library ``TableMapEvent`` (built on first sight of this layout)."""
        cols = ev.columns
        key = (ev.schema, ev.table, tuple(
            (c.type, c.name, c.unsigned, c.collation_name, tuple(c.enum_values or c.set_values or ()),
             c.__dict__.get("max_length"), c.__dict__.get("length_size"), c.__dict__.get("fsp"),
             c.__dict__.get("precision"), c.__dict__.get("decimals"), c.__dict__.get("bits"),
             c.is_primary) for c in cols))
        codec = self._by_key.get(key)
        if codec is None:
            meta = ev.optional_metadata
            pk_order = list(meta.simple_primary_key_list or ()) or list(meta.primary_keys_with_prefix or {})
            geo = list(meta.geometry_type_list or ())
            specs, g = [], 0
            for i, c in enumerate(cols):
                gtype = 0
                if c.type == T.GEOMETRY:
                    gtype = geo[g] if g < len(geo) else 0
                    g += 1
                specs.append(spec_from_library(c, i, set(pk_order), gtype, f"{ev.schema}.{ev.table}"))
            codec = TableCodec.build(ev.schema, ev.table, specs, pk_order)
            if len(self._by_key) > 10000:
                self._by_key.clear()
            self._by_key[key] = codec
        return codec
