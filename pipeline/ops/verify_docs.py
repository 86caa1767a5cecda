"""Verification of Elasticsearch and HBase targets: counts plus a sampled comparison.

These targets hold documents/rows built from the source, not copies of tables, so there
is no checksum both sides can compute. Instead the target's verifier (``make_verifier`` through
adapters/registry.py; ``Capabilities.compare`` ``documents`` or ``rows``) checks a sample:

* **Elasticsearch / OpenSearch** (esMapping): the number of rows the mapping SQL returns on the source
  against the number of documents in the index (for a mapping with ``relations``, the
  documents whose join field names this mapping's relation); then ``sample`` random
  main-table keys are re-queried through the mapping SQL and turned into the document the
  adapter would write (its own re-query code path), and each is compared with ``_source`` of
  the indexed document (fetched with ``mget``). All of it is ``adapters/es/verify.py``.
* **HBase** (hbaseMapping): source ``COUNT(*)`` against the number of rows of the HBase table
  (a key-only scan); then ``sample`` random source rows are turned into Dml text
  (:func:`sluice_common.normalize.dml_text`, read here: :func:`source_sample`), encoded by the
  adapter's own row-key and cell encoders and compared byte for byte with the stored row
  (``adapters/hbase/verify.py``).

This module reads the source side and turns what a verifier found
(:class:`adapters.base.SampleCheck`) into the report's :class:`TableDiff`.
"""

from __future__ import annotations

import time
from typing import Any

from adapters.base import Change, SampleCheck
from sluice_common.normalize import dml_text

from .verify_source import TableDiff, source_columns


def _finish(diff: TableDiff, found: SampleCheck, t0: float) -> TableDiff:
    diff.source, diff.source_rows, diff.target_rows = found.source, found.source_rows, found.target_rows
    diff.sampled, diff.missing, diff.changed = found.sampled, found.missing, found.changed
    if diff.source_rows != diff.target_rows and not diff.missing and not diff.changed:
        diff.note = found.count_note
    diff.chunks = 1
    diff.differing_chunks = int(bool(diff.missing or diff.changed))
    diff.seconds = time.monotonic() - t0
    return diff


def verify_sampled(src_conn: Any, mapping: Any, kind: str, target: Any, sample: int) -> TableDiff:
    """Counts and ``sample`` documents/rows of ``mapping`` compared by the target's verifier."""
    from adapters.registry import make_verifier

    t0 = time.monotonic()
    verifier = make_verifier(kind, target, (mapping,))
    try:
        source, described = verifier.describe(mapping)
        diff = TableDiff(mapping.file, kind, source, described, method=f"count + sample {sample}")
        found = verifier.check_sample(mapping, sample, lambda: source_sample(src_conn, mapping, sample))
    finally:
        verifier.close()
    return _finish(diff, found, t0)


def source_sample(src_conn: Any, mapping: Any, sample: int) -> tuple[int, list[Change]]:
    """``(rows, sampled rows as INSERT changes with Dml text values)`` of the source table of
    ``mapping`` (an hbaseMapping: its ``database``/``table``)."""
    spec = mapping.spec
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
    return source_rows, changes
