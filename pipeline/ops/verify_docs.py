"""Verification of Elasticsearch and HBase targets: counts plus a sampled comparison.

These targets hold documents/rows built from the source, not copies of tables, so there
is no checksum both sides can compute. Instead:

* **Elasticsearch / OpenSearch** (esMapping): the number of rows the mapping SQL returns on the source
  against the number of documents in the index (for a mapping with ``relations``, the
  documents whose join field names this mapping's relation); then ``sample`` random
  main-table keys are re-queried through the mapping SQL and turned into the document the
  adapter would write (its own re-query code path, ``adapters/es/chunk.py``), and each is
  compared with ``_source`` of the indexed document (fetched with ``mget``).
* **HBase** (hbaseMapping): source ``COUNT(*)`` against the number of rows of the HBase table
  (a key-only scan); then ``sample`` random source rows are turned into Dml text
  (:func:`pipeline.ops.normalize.dml_text`), encoded by the adapter's own row-key and cell
  encoders (``adapters/hbase/rows.py``) and compared byte for byte with the stored row.
"""

from __future__ import annotations

import json
import time
from typing import Any

from adapters.base import ApplyStats, Change
from pipeline.errors import TargetMismatchError

from .normalize import dml_text
from .verify_rdb import TableDiff, source_columns


def verify_es(mapping: Any, target: Any, sample: int) -> TableDiff:
    from adapters.es import bulk, requery
    from adapters.es.chunk import ChunkApplier
    from adapters.es.plan import doc_plan
    from adapters.es.values import default_json

    t0 = time.monotonic()
    plan = doc_plan(mapping)
    diff = TableDiff(mapping.file, "es", plan.main_table, f"index {plan.index}", method=f"count + sample {sample}")
    api = bulk.client(target)
    if api.mapping(plan.index) is None:
        raise TargetMismatchError(f"{mapping.file}: esMapping._index: index {plan.index} does not exist on "
                                  f"{target.label}", hint="run `sluice sync` or `sluice etl` first, or fix _index")
    applier = ChunkApplier(target, plan, mapping, ApplyStats())
    applier._types = bulk.field_types(target, plan.index)
    src = applier._source()
    db = plan.main_schema or applier._database()
    diff.source = f"{db}.{plan.main_table}" if db else plan.main_table
    with requery.connection(src) as conn:
        if db and not src.database:
            conn.select_db(db)
        with conn.cursor() as cur:
            cur.execute(f"SELECT COUNT(*) FROM ({requery.base_sql(plan.sql).replace('%%', '%')}) sluice_verify")
            diff.source_rows = int(cur.fetchone()[0])
            main = requery.q(plan.main_table) if not plan.main_schema else \
                f"{requery.q(plan.main_schema)}.{requery.q(plan.main_table)}"
            kc = ", ".join(requery.q(c) for c in plan.key_columns)
            cur.execute(f"SELECT {kc} FROM {main} ORDER BY RAND() LIMIT {int(sample)}")
            keys = [tuple(r) for r in cur.fetchall()]
    if plan.relation is not None:
        query = {"term": {plan.relation.field: plan.relation.name}}
    else:
        query = {"match_all": {}}
    try:
        api.refresh(plan.index)
        diff.target_rows = api.count(plan.index, query)
    except Exception as e:  # noqa: BLE001 - classified by the client's errors.py
        raise api.error(e, f"counting the documents of index {plan.index}") from None
    expected: dict[str, Any] = {}
    cols = [(plan.main_alias, c) for c in plan.key_columns]
    for names, codes, row in requery.requery(src, db, plan.sql, cols, keys, f"verifying {mapping.file}"):
        action = applier._db_doc(names, codes, row)
        expected[action.doc_id] = (action, json.loads(json.dumps(action.body, default=default_json)))
    diff.sampled = len(keys)
    if expected:
        docs = [{"_id": i, **({"routing": a.routing} if a.routing else {})} for i, (a, _) in expected.items()]
        try:
            found = api.mget(plan.index, docs)
        except Exception as e:  # noqa: BLE001 - classified by the client's errors.py
            raise api.error(e, f"reading sampled documents of index {plan.index}") from None
        got = {d["_id"]: d.get("_source") for d in found if d.get("found")}
        for doc_id, (_, body) in expected.items():
            if doc_id not in got:
                diff.missing.append(doc_id)
            elif got[doc_id] != body:
                diff.changed.append(doc_id)
    if diff.source_rows != diff.target_rows and not diff.missing and not diff.changed:
        diff.note = (f"{diff.source_rows} rows from the mapping SQL but {diff.target_rows} documents in "
                     f"{plan.index} (the sample matched)")
    diff.chunks = 1
    diff.differing_chunks = int(bool(diff.missing or diff.changed))
    diff.seconds = time.monotonic() - t0
    return diff


def verify_hbase(src_conn: Any, mapping: Any, target: Any, sample: int) -> TableDiff:
    from adapters.hbase.client import connect
    from adapters.hbase.plan import MappingPlan

    t0 = time.monotonic()
    spec = mapping.spec
    plan = MappingPlan(mapping)
    diff = TableDiff(mapping.file, "hbase", f"{spec.database}.{spec.table}", f"HBase {spec.hbaseTable}",
                     method=f"count + sample {sample}")
    with src_conn.cursor() as cur:
        cols, pk = source_columns(cur, spec.database, spec.table)
        types = {n: (dt, ct) for n, dt, ct in cols}
        mysql_type = {n: ct for n, _, ct in cols}
        table = f"`{spec.database}`.`{spec.table}`"
        cur.execute(f"SELECT COUNT(*) FROM {table}")
        diff.source_rows = int(cur.fetchone()[0])
        names = ", ".join(f"`{n}`" for n, _, _ in cols)
        cur.execute(f"SELECT {names} FROM {table} ORDER BY RAND() LIMIT {int(sample)}")
        rows = cur.fetchall()
    pc = connect(target)
    try:
        if spec.hbaseTable.encode() not in pc.conn.tables():
            raise TargetMismatchError(f"{mapping.file}: hbaseMapping.hbaseTable: HBase table {spec.hbaseTable} "
                                      f"does not exist on {target.label}",
                                      hint="run `sluice sync` or `sluice etl` first, or fix hbaseTable")
        ht = pc.conn.table(spec.hbaseTable)
        diff.target_rows = sum(1 for _ in ht.scan(filter=b"FirstKeyOnlyFilter() AND KeyOnlyFilter()",
                                                  batch_size=5000))
        for r in rows:
            data = {n: dml_text(*types[n], v) for (n, _, _), v in zip(cols, r, strict=True)}
            change = Change("INSERT", spec.database, spec.table, data, pk_names=tuple(pk), mysql_type=mysql_type)
            key = plan.rowkey(change)
            want = {c: v for c, v in plan.cells(change).items() if v is not None}
            got = ht.row(key)
            label = tuple(data.get(k) for k in pk) or key.decode("latin-1")
            if not got:
                diff.missing.append(label)
            elif dict(got) != want:
                diff.changed.append(label)
    finally:
        pc.close()
    diff.sampled = len(rows)
    if diff.source_rows != diff.target_rows and not diff.missing and not diff.changed:
        diff.note = (f"{diff.source_rows} source rows but {diff.target_rows} rows in HBase table "
                     f"{spec.hbaseTable} (the sample matched)")
    diff.chunks = 1
    diff.differing_chunks = int(bool(diff.missing or diff.changed))
    diff.seconds = time.monotonic() - t0
    return diff
