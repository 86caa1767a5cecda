"""Read an HBase table back as source rows (Dml strings): for verification and tests.

The inverse of the writer for one mapping: every row becomes ``{column: text or None}``
over the source columns the mapping writes (excluded columns left out), the single
``ROWKEY`` column decoded from the row key, NATIVE cells decoded per type. Cells that no
source column maps to are reported under ``"<family:qualifier>"`` so stray data shows.
"""

from __future__ import annotations

from typing import Any

import happybase

from adapters.hbase.values import decoder


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
