"""Verification of Elasticsearch and HBase targets: counts plus a sampled comparison.

These targets hold documents/rows built from the source, not copies of tables, so there
is no checksum both sides can compute. Instead:

* **Elasticsearch / OpenSearch** (esMapping): the number of rows the mapping SQL returns on the source
  against the number of documents in the index (for a mapping with ``relations``, the
  documents whose join field names this mapping's relation); then ``sample`` random
  main-table keys are re-queried through the mapping SQL and turned into the document the
  adapter would write (its own re-query code path), and each is compared with ``_source`` of
  the indexed document (fetched with ``mget``). All of it is ``adapters/es/verify.py``.
* **HBase** (hbaseMapping): source ``COUNT(*)`` against the number of rows of the HBase table
  (a key-only scan); then ``sample`` random source rows are turned into Dml text
  (:func:`pipeline.ops.normalize.dml_text`), encoded by the adapter's own row-key and cell
  encoders and compared byte for byte with the stored row (``adapters/hbase/verify.py``).

This module reads the source side and turns what an adapter's ``verify.check`` found
(:class:`adapters.base.SampleCheck`) into the report's :class:`TableDiff`.
"""

from __future__ import annotations

import time
from typing import Any

from adapters.base import Change, SampleCheck

from .normalize import dml_text
from .verify_rdb import TableDiff, source_columns


def _diff(mapping: Any, kind: str, described: tuple[str, str], sample: int) -> TableDiff:
    return TableDiff(mapping.file, kind, described[0], described[1], method=f"count + sample {sample}")


def _finish(diff: TableDiff, found: SampleCheck, t0: float) -> TableDiff:
    diff.source, diff.source_rows, diff.target_rows = found.source, found.source_rows, found.target_rows
    diff.sampled, diff.missing, diff.changed = found.sampled, found.missing, found.changed
    if diff.source_rows != diff.target_rows and not diff.missing and not diff.changed:
        diff.note = found.count_note
    diff.chunks = 1
    diff.differing_chunks = int(bool(diff.missing or diff.changed))
    diff.seconds = time.monotonic() - t0
    return diff


def verify_es(mapping: Any, target: Any, sample: int) -> TableDiff:
    from adapters.es import verify as es_verify

    t0 = time.monotonic()
    diff = _diff(mapping, "es", es_verify.describe(mapping), sample)
    return _finish(diff, es_verify.check(mapping, target, sample), t0)


def verify_hbase(src_conn: Any, mapping: Any, target: Any, sample: int) -> TableDiff:
    from adapters.hbase import verify as hbase_verify

    t0 = time.monotonic()
    spec = mapping.spec
    diff = _diff(mapping, "hbase", hbase_verify.describe(mapping), sample)
    with src_conn.cursor() as cur:
        cols, pk = source_columns(cur, spec.database, spec.table)
        types = {n: (dt, ct) for n, dt, ct in cols}
        mysql_type = {n: ct for n, _, ct in cols}
        table = f"`{spec.database}`.`{spec.table}`"
        cur.execute(f"SELECT COUNT(*) FROM {table}")
        source_rows = int(cur.fetchone()[0])
        names = ", ".join(f"`{n}`" for n, _, _ in cols)
        cur.execute(f"SELECT {names} FROM {table} ORDER BY RAND() LIMIT {int(sample)}")
        rows = cur.fetchall()
    changes = []
    for r in rows:
        data = {n: dml_text(*types[n], v) for (n, _, _), v in zip(cols, r, strict=True)}
        changes.append(Change("INSERT", spec.database, spec.table, data, pk_names=tuple(pk), mysql_type=mysql_type))
    return _finish(diff, hbase_verify.check(mapping, target, source_rows, changes), t0)
