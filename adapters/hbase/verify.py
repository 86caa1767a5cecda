"""The HBase adapter's face for ``sluice verify`` (and tests): counts, sampled compare, read-back.

An HBase table holds rows built from the source, not a copy of a table: :func:`check` counts
the table's rows (a key-only scan) and compares sampled source rows, as changes whose values
are Dml text, encoded by this adapter's own row-key and cell encoders (plan.py), byte for
byte with the stored rows. The caller (pipeline/ops/verify_docs.py) reads the source side.

:func:`read_rows` is the inverse of the writer for one mapping: every row becomes
``{column: text or None}`` over the source columns the mapping writes (excluded columns left
out), the single ``ROWKEY`` column decoded from the row key, NATIVE cells decoded per type.
Cells that no source column maps to are reported under ``"<family:qualifier>"`` so stray
data shows.

:class:`HbaseVerifier` (factory ``make_verifier``) is what verify and repair call: the sample
check, and for ``sluice repair`` :meth:`HbaseVerifier.differing`, a key range's source rows
encoded the same way and compared with the stored rows by row key.
"""

from __future__ import annotations

from typing import Any

import happybase

from adapters.base import Change, SampleCheck, Verifier
from adapters.hbase.client import connect
from adapters.hbase.plan import MappingPlan
from adapters.hbase.values import decoder
from sluice_common.errors import TargetMismatchError


def describe(mapping: Any) -> tuple[str, str]:
    """``(source table, target)`` of a mapping, as verify names them."""
    spec = mapping.spec
    return f"{spec.database}.{spec.table}", f"HBase {spec.hbaseTable}"


def check(mapping: Any, target: Any, source_rows: int, changes: list[Change]) -> SampleCheck:
    """Count the rows of ``mapping``'s HBase table and compare the sampled source rows
    ``changes`` (INSERTs with Dml text values) with the stored rows; keys are reported as the
    source key values (or the row key)."""
    spec = mapping.spec
    plan = MappingPlan(mapping)
    out = SampleCheck(source=f"{spec.database}.{spec.table}", source_rows=source_rows, sampled=len(changes))
    pc = connect(target)
    try:
        if spec.hbaseTable.encode() not in pc.conn.tables():
            raise TargetMismatchError(f"{mapping.file}: hbaseMapping.hbaseTable: HBase table {spec.hbaseTable} "
                                      f"does not exist on {target.label}",
                                      hint="run `sluice sync` or `sluice etl` first, or fix hbaseTable")
        ht = pc.conn.table(spec.hbaseTable)
        out.target_rows = sum(1 for _ in ht.scan(filter=b"FirstKeyOnlyFilter() AND KeyOnlyFilter()",
                                                 batch_size=5000))
        for change in changes:
            key = plan.rowkey(change)
            want = {c: v for c, v in plan.cells(change).items() if v is not None}
            got = ht.row(key)
            label = tuple(change.data.get(k) for k in change.pk_names) or key.decode("latin-1")
            if not got:
                out.missing.append(label)
            elif dict(got) != want:
                out.changed.append(label)
    finally:
        pc.close()
    out.count_note = (f"{out.source_rows} source rows but {out.target_rows} rows in HBase table "
                      f"{spec.hbaseTable} (the sample matched)")
    return out



class HbaseVerifier(Verifier):
    """``compare == "rows"``: counts and sampled rows by row key (factory.make_verifier)."""

    def __init__(self, target: Any, mappings: tuple[Any, ...]):
        super().__init__(target, mappings)
        self._repair: dict[str, MappingPlan] = {}  # mapping file -> its plan
        self._conn = None

    def preflight(self) -> None:
        """The writer's check of the mappings without ``autoCreateTable`` (for those, check() would
        create the table; the compare reports a missing one)."""
        from adapters.hbase.writer import HbaseWriter

        checked = tuple(m for m in self.mappings if not m.spec.autoCreateTable)
        if checked:
            HbaseWriter(self.target, checked).check()

    def describe(self, mapping: Any) -> tuple[str, str]:
        return describe(mapping)

    def source_table(self, mapping: Any) -> tuple[str | None, str]:
        return mapping.spec.database, mapping.spec.table

    def check_sample(self, mapping: Any, sample: int, read_source: Any) -> SampleCheck:
        source_rows, changes = read_source()
        return check(mapping, self.target, source_rows, changes)

    def differing(self, mapping: Any, database: str, key_names: list[str], read_keys: Any,
                  read_changes: Any) -> int:
        """The rows of ``read_changes()`` that the HBase table holds otherwise or lacks: the stored
        rows are read first, the source again after them (newer than all the table had applied)."""
        first = read_changes()
        if not first:
            return 0
        plan = self._repair.get(mapping.file)
        if plan is None:
            plan = self._repair[mapping.file] = MappingPlan(mapping)
        if self._conn is None:
            self._conn = connect(self.target)
        table = self._conn.conn.table(mapping.spec.hbaseTable)
        got = dict(table.rows(list(_encoded(plan, first))))
        want = _encoded(plan, read_changes())
        extra = [k for k in want if k not in got]
        if extra:
            got.update(dict(table.rows(extra)))
        return sum(1 for k, cells in want.items() if dict(got.get(k) or {}) != cells)

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:  # noqa: BLE001 - already broken
                pass
            self._conn = None


def _encoded(plan: MappingPlan, changes: list[Change]) -> dict[bytes, dict]:
    """``{row key: {family:qualifier: cell}}`` as the writer would put ``changes`` (NULL cells left out)."""
    return {plan.rowkey(c): {k: v for k, v in plan.cells(c).items() if v is not None} for c in changes}


def read_rows(conn: happybase.Connection, mapping: Any, mysql_type: dict[str, str]) -> dict[bytes, dict]:
    """``{row key: {column: text}}`` for the whole table of ``mapping`` (a Mapping or HbaseMapping)."""
    spec = getattr(mapping, "spec", mapping)
    cells: dict[bytes, tuple[str, Any]] = {}
    key_item = spec.rowkey_item if spec.rowKey is None else None
    key_dec = None
    columns = []
    for col, mt in mysql_type.items():
        item = spec.column_for(col)
        if item is None:
            continue
        columns.append(col)
        if item.is_rowkey:
            key_dec = decoder(spec.mode, item.type, mt)
            continue
        cells[f"{item.family}:{item.qualifier}".encode()] = (col, decoder(spec.mode, item.type, mt))
    out: dict[bytes, dict] = {}
    for key, data in conn.table(spec.hbaseTable).scan():
        row: dict[str, str | None] = dict.fromkeys(columns)
        if key_item is not None and key_dec is not None:
            row[key_item.source] = _key_text(key, key_item.rowkey_len, key_dec)
        for col, value in data.items():
            hit = cells.get(col)
            if hit is None:
                row[f"<{col.decode('utf-8', 'replace')}>"] = value.decode("latin-1")
            else:
                row[hit[0]] = hit[1](value)
        out[key] = row
    return out


def _key_text(key: bytes, rowkey_len: int | None, dec) -> str:
    if rowkey_len:
        try:
            return str(int(key.decode("ascii")))
        except (UnicodeDecodeError, ValueError):
            pass
    return dec(key)
