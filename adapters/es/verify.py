"""The search-index adapter's face for ``sluice verify``: counts plus a sampled comparison.

An index holds documents built from the source, not a copy of a table, so there is no
checksum both sides can compute. :func:`check` counts the rows the mapping SQL returns on the
source against the documents in the index (for a mapping with ``relations``, the documents
whose join field names this mapping's relation); then re-queries ``sample`` random main-table
keys through the mapping SQL, turns them into the documents this adapter would write (its own
re-query code path, chunk.py) and compares each with ``_source`` of the indexed document
(fetched with ``mget``). The same for OpenSearch (the target's client, api.py).

:class:`EsVerifier` (factory ``make_verifier``) is what verify and repair call: the sample check,
and for ``sluice repair`` :meth:`EsVerifier.differing`, the documents of a key range's rows built
through the same re-query and compared the same way.
"""

from __future__ import annotations

import json
from typing import Any

from adapters.base import ApplyStats, SampleCheck, Verifier
from adapters.es import bulk, requery
from adapters.es.chunk import ChunkApplier
from adapters.es.plan import doc_plan
from adapters.es.values import default_json
from sluice_common.errors import TargetMismatchError


def describe(mapping: Any) -> tuple[str, str]:
    """``(source table, target)`` of a mapping, as verify names them."""
    plan = doc_plan(mapping)
    return plan.main_table, f"index {plan.index}"


def check(mapping: Any, target: Any, sample: int) -> SampleCheck:
    """Count both sides and compare ``sample`` documents of ``mapping`` (an esMapping)."""
    plan = doc_plan(mapping)
    out = SampleCheck(source=plan.main_table)
    api = bulk.client(target)
    if api.mapping(plan.index) is None:
        raise TargetMismatchError(f"{mapping.file}: esMapping._index: index {plan.index} does not exist on "
                                  f"{target.label}", hint="run `sluice sync` or `sluice etl` first, or fix _index")
    applier = ChunkApplier(target, plan, mapping, ApplyStats())
    src, db = applier.for_verify()
    out.source = f"{db}.{plan.main_table}" if db else plan.main_table
    with requery.connection(src) as conn:
        if db and not src.database:
            conn.select_db(db)
        with conn.cursor() as cur:
            cur.execute(f"SELECT COUNT(*) FROM ({requery.base_sql(plan.sql).replace('%%', '%')}) sluice_verify")
            out.source_rows = int(cur.fetchone()[0])
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
        out.target_rows = api.count(plan.index, query)
    except Exception as e:  # noqa: BLE001 - classified by the client's errors.py
        raise api.error(e, f"counting the documents of index {plan.index}") from None
    cols = [(plan.main_alias, c) for c in plan.key_columns]
    expected = _documents(applier, src, db, plan.sql, cols, keys, f"verifying {mapping.file}")
    out.sampled = len(keys)
    if expected:
        got = _indexed(api, plan.index, expected, "reading sampled documents")
        for doc_id, (_, body) in expected.items():
            if doc_id not in got:
                out.missing.append(doc_id)
            elif got[doc_id] != body:
                out.changed.append(doc_id)
    out.count_note = (f"{out.source_rows} rows from the mapping SQL but {out.target_rows} documents in "
                      f"{plan.index} (the sample matched)")
    return out


def _documents(applier: ChunkApplier, src: Any, db: str, sql: str, cols: list, keys: list[tuple],
               why: str) -> dict[str, tuple[Any, Any]]:
    """``{_id: (action, _source as indexed)}`` of the rows with these keys, through the mapping SQL
    re-queried and the writer's own document code."""
    out = {}
    for names, codes, row in requery.requery(src, db, sql, cols, keys, why):
        action = applier.document(names, codes, row)
        out[action.doc_id] = (action, json.loads(json.dumps(action.body, default=default_json)))
    return out


def _indexed(api: Any, index: str, expected: dict[str, tuple[Any, Any]], what: str) -> dict[str, Any]:
    """``{_id: _source}`` of the documents of ``expected`` that ``index`` holds (``mget`` by id and routing)."""
    docs = [{"_id": i, **({"routing": a.routing} if a.routing else {})} for i, (a, _) in expected.items()]
    try:
        found = api.mget(index, docs)
    except Exception as e:  # noqa: BLE001 - classified by the client's errors.py
        raise api.error(e, f"{what} of index {index}") from None
    return {d["_id"]: d.get("_source") for d in found if d.get("found")}


class EsVerifier(Verifier):
    """``compare == "documents"``: counts and sampled documents by ``_id`` (factory.make_verifier)."""

    def __init__(self, target: Any, mappings: tuple[Any, ...]):
        super().__init__(target, mappings)
        self._repair: dict[str, tuple] = {}  # mapping file -> (plan, applier, source, database, client)

    def preflight(self) -> None:
        from adapters.es.writer import EsWriter

        EsWriter(self.target, self.mappings).check()

    def describe(self, mapping: Any) -> tuple[str, str]:
        return describe(mapping)

    def source_table(self, mapping: Any) -> tuple[str | None, str]:
        plan = doc_plan(mapping)
        return plan.main_schema, plan.main_table

    def check_sample(self, mapping: Any, sample: int, read_source: Any) -> SampleCheck:
        return check(mapping, self.target, sample)  # the source side is re-queried here

    def _expected(self, mapping: Any, database: str, key_names: list[str], keys: list[tuple]
                  ) -> dict[str, tuple[Any, Any]]:
        state = self._repair.get(mapping.file)
        if state is None:
            plan = doc_plan(mapping)
            applier = ChunkApplier(self.target, plan, mapping, ApplyStats())
            src, db = applier.for_verify()
            db = db or database  # unqualified SQL: the database the sync meets its changes in
            state = self._repair[mapping.file] = (plan, applier, src, db, bulk.client(self.target))
        plan, applier, src, db, _ = state
        cols = [(plan.main_alias, c) for c in key_names]
        return _documents(applier, src, db, plan.sql, cols, keys, f"repairing {mapping.file}")

    def differing(self, mapping: Any, database: str, key_names: list[str], read_keys: Any,
                  read_changes: Any) -> int:
        """The documents of the rows whose main-table keys (values of ``key_names``) ``read_keys()``
        gives that the index holds otherwise or lacks; ``database``: the one unqualified SQL reads."""
        keys = read_keys()
        want = self._expected(mapping, database, key_names, keys) if keys else {}
        if not want:
            return 0
        plan, api = self._repair[mapping.file][0], self._repair[mapping.file][4]
        got = _indexed(api, plan.index, want, "reading documents")
        want = self._expected(mapping, database, key_names, keys)  # again, after the target was read
        return sum(1 for i, (_, body) in want.items() if got.get(i) != body)
