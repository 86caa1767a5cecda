"""One chunk of changes of one esMapping -> bulk actions (docs/es.md, "Semantics").

Main-table changes become, per document (``_id`` from the row, or computed by SQL):

* row mode (no joins, only bare main-table columns): INSERT -> ``index`` of the row's
  document; UPDATE -> ``update`` with the changed fields and the whole row as ``upsert``;
* otherwise INSERT -> *sync*; UPDATE -> ``update`` with the changed fields when they are bare
  main-table columns, else (a join key or an input of a computed field changed) *sync*;
* DELETE -> ``delete``; an UPDATE that changes the id's (or the parent's) columns -> ``delete``
  of the old document, then index/sync of the new one.

*sync* = re-run the mapping SQL for the document's key columns and index the result (or delete
the document when the row is gone). It reads the source's current state, which is at least as
new as every change of the chunk, so a synced document's other actions in the chunk are dropped
(not a ``delete`` under another routing: that is another copy, left by a child moved to another
parent, and must go).
Joined-table changes find the affected documents with the mapping SQL (``WHERE other.col IN
(values of the joined row, before and after)``) and index them. Re-queried documents are
written after the chunk's row actions: they are the newest state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from adapters.base import ApplyStats, Change
from adapters.es import bulk, requery
from adapters.es.bulk import Action
from adapters.es.config import EsTarget
from adapters.es.plan import DocPlan, JoinInfo, Op, before_image, changed_columns, fold, joined_keys, key_of
from adapters.es.values import FieldValueError, capture_converter, capture_id, db_converter, from_db, id_text
from sluice_common.errors import ConfigError, RowError, TargetError

PAGE = 1000


@dataclass
class ChunkApplier:
    target: EsTarget
    plan: DocPlan
    mapping: Any
    stats: ApplyStats
    db_hint: str | None = None
    _src: Any = None
    _types: dict[str, str] = field(default_factory=dict)
    _row_conv: dict = field(default_factory=dict)
    _sigs: dict = field(default_factory=dict)
    _doc_plans: dict = field(default_factory=dict)

    # -- entry --------------------------------------------------------------------------------
    def run(self, changes: list[Change]) -> None:
        self._types = bulk.field_types(self.target, self.plan.index)
        ops: list[Op] = []
        joined: dict[str, list[tuple]] = {j.alias: [] for j in self.plan.joins}
        default_db = self._default_db()
        for ch in changes:
            key = f"{ch.database}.{ch.table}"
            if ch.kind == "TRUNCATE":
                self._truncate(ch, default_db)
                continue
            hit = False
            if self.plan.is_main(ch.database, ch.table, default_db):
                hit = True
                self.db_hint = self.db_hint or ch.database
                self._main(ch, ops)
            for j in self.plan.joins_of(ch.database, ch.table, default_db):
                hit = True
                self.db_hint = self.db_hint or ch.database
                joined[j.alias].extend(joined_keys(j, ch))
            counter = {"INSERT": self.stats.inserted, "UPSERT": self.stats.inserted,
                       "UPDATE": self.stats.updated,
                       "DELETE": self.stats.deleted}.get(ch.kind) if hit else self.stats.skipped
            (counter if counter is not None else self.stats.skipped)[key] += 1
        self._resolve_ids(ops)
        actions, syncs = self._row_actions(ops)
        missing = bulk.send(self.target, actions) if actions else []
        self._sync(syncs + [a.tag for a in missing], delete_gone=True)
        for j in self.plan.joins:
            if joined[j.alias]:
                self._refresh(j, joined[j.alias])

    # -- main table ---------------------------------------------------------------------------
    def _cols(self, data: dict[str, Any]) -> dict[str, str]:
        sig = tuple(data)
        cols = self._sigs.get(sig)
        if cols is None:
            cols = self._sigs[sig] = {k.casefold(): k for k in sig}
        return cols

    def _main(self, ch: Change, ops: list[Op]) -> None:
        p = self.plan
        types, data = ch.mysql_type, ch.data
        cols = self._cols(data)
        origin = f"{ch.database}.{ch.table}"
        new = "index_row" if p.row_mode else "sync"
        if ch.kind in ("INSERT", "UPSERT"):  # index/sync overwrite the document: INSERT is an upsert here
            ops.append(Op(new, data, types, cols, origin=origin))
        elif ch.kind == "DELETE":
            ops.append(Op("delete", data, types, cols, origin=origin))
        elif ch.kind == "UPDATE":
            changed = changed_columns(ch.old, data)
            if changed is None:
                ops.append(Op(new, data, types, cols, origin=origin))
                return
            if changed & self._identity_columns():
                ops.append(Op("delete", before_image(data, ch.old), types, cols, origin=origin))
                ops.append(Op(new, data, types, cols, origin=origin))
                return
            if not p.row_mode and changed & p.requery_columns:
                ops.append(Op("sync", data, types, cols, origin=origin))
                return
            fields = tuple((f, c) for f, c in p.row_fields if c.casefold() in changed)
            if fields:
                ops.append(Op("update_row", data, types, cols, fields, p.row_mode, origin=origin))

    def _identity_columns(self) -> set[str]:
        cols = {c.casefold() for c in self.plan.key_columns}
        if self.plan.parent_column:
            cols.add(self.plan.parent_column.casefold())
        for _, _, used in self.plan.eval_fields:
            cols.update(c.casefold() for c in used)
        return cols

    def _resolve_ids(self, ops: list[Op]) -> None:
        p = self.plan
        todo = []
        for op in ops:
            if p.id_column is not None:
                op.doc_id = capture_id(op.type_of(p.id_column))(op.get(p.id_column))
            if p.parent_column is not None:
                op.routing = capture_id(op.type_of(p.parent_column))(op.get(p.parent_column))
            if p.eval_fields:
                todo.append(op)
        if todo:
            names = [f for f, _, _ in p.eval_fields]
            cols = tuple(dict.fromkeys(c for _, _, used in p.eval_fields for c in used))
            results = requery.evaluate(self._source(), p.main_alias, [e for _, e, _ in p.eval_fields],
                                       [fold(op.image) for op in todo], fold(todo[0].types), cols,
                                       f"computing {', '.join(names)} of {p.file}")
            for op, (codes, values) in zip(todo, results, strict=True):
                for name, code, v in zip(names, codes, values, strict=True):
                    text = id_text(_canon(code, v))
                    if name == p.id_field:
                        op.doc_id = text
                    else:
                        op.routing = text
        for op in ops:
            if op.doc_id is None:
                raise RowError(f"{p.file}: the document id field '{p.id_field}' is NULL for a row of "
                               f"{op.origin}; every document needs an id", hint="make the id column NOT NULL")

    def _row_actions(self, ops: list[Op]) -> tuple[list[Action], list[Op]]:
        p = self.plan
        synced: dict[str, Op] = {}
        for op in ops:
            if op.kind == "sync":
                synced[op.doc_id] = op
        actions = []
        for op in ops:
            s = synced.get(op.doc_id)
            if s is not None and (op.kind != "delete" or op.routing == s.routing):
                # the re-queried document supersedes the row images of this chunk; but a delete
                # under another routing removes another copy (a child moved to another parent)
                continue
            if op.kind == "delete":
                actions.append(Action("delete", p.index, op.doc_id, routing=op.routing))
            elif op.kind == "index_row":
                actions.append(Action("index", p.index, op.doc_id, self._row_doc(op, p.row_fields, True),
                                      op.routing))
            elif op.kind == "update_row":
                body = {"doc": self._row_doc(op, op.fields, False)}
                if op.upsert:
                    body["upsert"] = self._row_doc(op, p.row_fields, True)
                actions.append(Action("update", p.index, op.doc_id, body, op.routing, tag=Op(
                    "sync", op.image, op.types, op.cols, doc_id=op.doc_id, routing=op.routing, origin=op.origin)))
        return actions, list(synced.values())

    def _row_doc(self, op: Op, fields: tuple, full: bool) -> dict:
        key = (fields, id(op.cols))
        steps = self._doc_plans.get(key)
        if steps is None:  # once per field list and column spelling: (field, image key, converter)
            steps = []
            for name, col in fields:
                k = op.cols.get(col.casefold(), col)
                steps.append((name, k, capture_converter(op.types.get(k), self._types.get(name),
                                                         self.plan.obj_type(name))))
            self._doc_plans[key] = steps
        doc = {}
        image = op.image
        try:
            for name, k, conv in steps:
                doc[name] = conv(image.get(k))
        except (FieldValueError, ValueError) as e:
            raise self._value_error(op.doc_id, name, e) from None
        if full:
            self._join_field(doc, op.routing)
        return doc

    def _join_field(self, doc: dict, parent: str | None) -> None:
        rel = self.plan.relation
        if rel is not None:
            doc[rel.field] = {"name": rel.name, "parent": parent} if rel.parent_field else rel.name

    def _value_error(self, doc_id: str | None, name: str, e: Exception) -> TargetError:
        es_type = self._types.get(name) or "unmapped"
        return RowError(f"index {self.plan.index}, document _id={doc_id}, field {name} ({es_type}): {e}",
                        hint=f"fix the index mapping or {self.plan.file} (objFields/sql), then sync again")

    # -- re-query -----------------------------------------------------------------------------
    def _sync(self, ops: list[Op], delete_gone: bool) -> None:
        if not ops:
            return
        p = self.plan
        cols = [(p.main_alias, c) for c in p.key_columns]
        by_key: dict[tuple, Op] = {}
        for op in ops:
            by_key[key_of(*op.folded(), p.key_columns)] = op
        seen = self._index_query(cols, list(by_key), f"re-querying {p.file} for {len(by_key)} document(s)")
        if delete_gone:
            gone = [Action("delete", p.index, op.doc_id, routing=op.routing)
                    for op in by_key.values() if op.doc_id not in seen]
            if gone:
                bulk.send(self.target, gone)

    def _refresh(self, j: JoinInfo, keys: list[tuple]) -> None:
        cols = [(other_alias, other_col) for _, other_alias, other_col in j.keys]
        self._index_query(cols, keys, f"re-querying {self.plan.file} for changes of {j.table} ({j.alias})")

    def _index_query(self, cols: list[tuple[str, str]], keys: list[tuple] | None, what: str) -> dict[str, int]:
        p = self.plan
        seen: dict[str, int] = {}  # _id -> a digest of its document (the same row met twice, e.g. by
        page: list[Action] = []    # two keys one _ci key equates, in two IN batches: the same document)
        rows = requery.requery(self._source(), self._database(), p.sql, cols, keys, what)
        for names, codes, row in rows:
            a = self._db_doc(names, codes, row)
            digest = hash((orjson.dumps(a.body, option=orjson.OPT_SORT_KEYS, default=str), a.routing))
            if a.doc_id in seen and seen[a.doc_id] != digest:
                # one-to-many: the index would keep one of the rows, whichever came last
                raise TargetError(f"{p.file}: esMapping.sql gives more than one row for document _id={a.doc_id} "
                                  f"(index {p.index}): a document holds one row, so all but one would be lost",
                                  hint=f"make {p.file}'s SQL give one row per document: every join many-to-one, on "
                                  "a key the joined table has once (to index the many side, make it the main table "
                                  "and join the other to it), then sync again")
            seen[a.doc_id] = digest
            page.append(a)
            if len(page) >= PAGE:
                bulk.send(self.target, page)
                page = []
        if page:
            bulk.send(self.target, page)
        return seen

    def _db_doc(self, names: list[str], codes: list[int], row: tuple) -> Action:
        p = self.plan
        sig = (tuple(names), tuple(codes))
        plan = self._row_conv.get(sig)
        if plan is None:
            skips = set(self.mapping.spec.skips)
            plan = []
            for i, (name, code) in enumerate(zip(names, codes, strict=True)):
                write = not (name in skips or (name == p.id_field and not p.id_in_doc))
                conv = db_converter(code, self._types.get(name), p.obj_type(name))
                plan.append((i, name, code, write, conv))
            self._row_conv[sig] = plan
        doc, doc_id, parent = {}, None, None
        rel = p.relation
        for i, name, code, write, conv in plan:
            v = row[i]
            if name == p.id_field:
                doc_id = id_text(_canon(code, v))
            if rel is not None and name == rel.parent_field:
                parent = id_text(_canon(code, v))
            if write:
                try:
                    doc[name] = conv(v)
                except (FieldValueError, ValueError) as e:
                    raise self._value_error(doc_id, name, e) from None
        if doc_id is None:
            raise TargetError(f"{p.file}: the document id field '{p.id_field}' is NULL in a re-queried row")
        self._join_field(doc, parent)
        return Action("index", p.index, doc_id, doc, parent if rel is not None and rel.parent_field else None)

    def _truncate(self, ch: Change, default_db: str | None) -> None:
        p = self.plan
        if p.is_main(ch.database, ch.table, default_db):
            if p.relation is not None:
                raise TargetError(f"TRUNCATE of {ch.database}.{ch.table}: index {p.index} holds documents of "
                                  "several mappings (relations); Sluice cannot tell which to delete",
                                  hint="delete this mapping's documents by hand, then sync again")
            bulk.delete_all(self.target, p.index)
        elif p.joins_of(ch.database, ch.table, default_db):
            self._index_query([], None, f"re-querying all of {p.file} after TRUNCATE of {ch.table}")

    # -- verify (adapters/es/verify.py) ---------------------------------------------------------
    def for_verify(self) -> tuple[Any, str | None]:
        """Read the index's field types (as :meth:`run` does); the source data source and the
        database the mapping SQL runs in."""
        self._types = bulk.field_types(self.target, self.plan.index)
        return self._source(), self.plan.main_schema or self._database()

    def document(self, names: list[str], codes: list[int], row: tuple) -> Action:
        """The action this adapter writes for one row of the mapping SQL."""
        return self._db_doc(names, codes, row)

    # -- sources ------------------------------------------------------------------------------
    def _source(self):
        if self._src is None:
            self._src = self.target.source_for(self.mapping)
        return self._src

    def _database(self) -> str | None:
        return self._source().database or self.db_hint

    def _default_db(self) -> str | None:
        p = self.plan
        if p.main_schema is not None and all(j.schema is not None for j in p.joins):
            return None
        try:
            return self._source().database
        except ConfigError:
            return None


def _canon(code: int, v: Any) -> Any:
    f = from_db(code)
    return v if f is None or v is None else f(v)
