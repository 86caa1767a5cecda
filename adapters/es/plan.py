"""What one esMapping needs to turn changes into documents: its :class:`DocPlan`.

Built once per mapping (cached per process) from the parsed SQL:

* the document id: the ``_id`` field (or ``pk``); it must be computed from main-table
  columns only (its *key columns*, the job's partition key for the main table);
* whether a main-table row alone gives the whole document (*row mode*: no joins and every
  field a plain main-table column) or the document is re-queried from the source;
* which main-table columns force a re-query when they change (join keys, inputs of
  computed fields), and for each joined table the equalities that find affected documents;
* ``skips``, ``objFields`` and ``relations`` (join field + routing).

Documents never contain the field named by ``_id`` (as in canal; ES forbids ``_id`` in a
source), but do contain the ``pk`` field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from adapters.es.values import column_kind
from sluice_common.errors import ConfigError

_plans: dict[int, tuple[Any, DocPlan]] = {}


@dataclass(frozen=True)
class JoinInfo:
    """A LEFT JOINed table: its own columns equal to ``other_alias.other_col``."""

    alias: str
    table: str
    schema: str | None
    keys: tuple[tuple[str, str, str], ...]  # (my column, other alias, other column)
    columns: frozenset[str]                 # casefolded columns of this table the query reads


@dataclass(frozen=True)
class Relation:
    """The index's join field: this mapping's relation name, and the parent-id field."""

    field: str
    name: str
    parent_field: str | None


@dataclass(frozen=True)
class DocPlan:
    file: str
    index: str
    id_field: str
    id_in_doc: bool                      # pk mode writes the field, _id mode does not
    main_alias: str
    main_table: str
    main_schema: str | None
    key_columns: tuple[str, ...]         # main columns the id field reads, in SQL order
    id_column: str | None                # the id field's column when it is a bare column
    row_mode: bool
    row_fields: tuple[tuple[str, str], ...]   # (document field, main column) written from a row
    requery_columns: frozenset[str]      # casefolded main columns whose change needs a re-query
    joins: tuple[JoinInfo, ...]
    obj_fields: tuple[tuple[str, str], ...]
    relation: Relation | None
    parent_column: str | None            # the relation's parent field when it is a bare main column
    eval_fields: tuple[tuple[str, str, tuple[str, ...]], ...]  # (field, SQL expr, main columns read)
    sql: str

    def is_main(self, database: str, table: str, default_db: str | None) -> bool:
        return _same(self.main_table, self.main_schema or default_db, database, table)

    def joins_of(self, database: str, table: str, default_db: str | None) -> list[JoinInfo]:
        return [j for j in self.joins if _same(j.table, j.schema or default_db, database, table)]

    def obj_type(self, field: str) -> str | None:
        return dict(self.obj_fields).get(field)


def reset() -> None:
    """Forget the cached document plans (the job calls this after DDL)."""
    _plans.clear()


def _same(name: str, schema: str | None, database: str, table: str) -> bool:
    return name.casefold() == table.casefold() and (schema is None or schema.casefold() == database.casefold())


def doc_plan(mapping: Any) -> DocPlan:
    """The plan of a ``Mapping`` with an ``esMapping`` (cached; ConfigError if unusable)."""
    hit = _plans.get(id(mapping))
    if hit is not None and hit[0] is mapping:
        return hit[1]
    plan = _build(mapping)
    _plans[id(mapping)] = (mapping, plan)
    return plan


def _build(mapping: Any) -> DocPlan:
    spec = mapping.spec
    file = getattr(mapping, "file", "<mapping>")
    q = spec.query
    main = q.main
    id_field = spec.id_field
    f = q.field(id_field)
    key_name = "_id" if spec.id else "pk"
    if f is None or not f.columns or any(c.alias != main.alias for c in f.columns):
        raise ConfigError(file, f"esMapping.{key_name}",
                          f"field '{id_field}' must be computed from columns of the main table "
                          f"{main.name} (alias {main.alias}) only: documents are identified by them")
    key_columns = tuple(dict.fromkeys(c.column for c in f.columns))
    id_column = f.columns[0].column if f.is_simple else None
    join_keys_on_main = {k.other.column.casefold() for j in q.joins for k in j.keys if k.other.alias == main.alias}
    requery = set(join_keys_on_main)
    skips = set(spec.skips)
    row_fields = []
    for fld in q.fields:
        reads_main_only = all(c.alias == main.alias for c in fld.columns)
        if not fld.is_simple or not reads_main_only:
            if reads_main_only:
                requery.update(c.column.casefold() for c in fld.columns)
            continue
        if fld.name in skips or (fld.name == id_field and spec.id):
            continue
        row_fields.append((fld.name, fld.columns[0].column))
    row_mode = not q.joins and all(fl.is_simple for fl in q.fields)
    joins = []
    for j in q.joins:
        keys = tuple((k.column, k.other.alias, k.other.column) for k in j.keys)
        cols = frozenset(c.casefold() for c in q.columns_of(j.table.alias))
        joins.append(JoinInfo(j.table.alias, j.table.name, j.table.schema, keys, cols))
    relation = None
    parent_column = None
    eval_fields = []
    if id_column is None:
        eval_fields.append((id_field, f.expression, key_columns))
    if spec.relations:
        rfield, rel = next(iter(spec.relations.items()))
        relation = Relation(rfield, rel.name, rel.parent)
        if rel.parent:
            pf = q.field(rel.parent)
            if pf is None or any(c.alias != main.alias for c in pf.columns):
                raise ConfigError(file, f"esMapping.relations.{rfield}.parent",
                                  f"field '{rel.parent}' must read main-table columns only (it routes the "
                                  "child documents)")
            if pf.is_simple:
                parent_column = pf.columns[0].column
            else:
                eval_fields.append((rel.parent, pf.expression, tuple(dict.fromkeys(c.column for c in pf.columns))))
    return DocPlan(file, spec.index, id_field, not spec.id, main.alias, main.name, main.schema, key_columns,
                   id_column, row_mode, tuple(row_fields), frozenset(requery), tuple(joins),
                   tuple(spec.objFields.items()), relation, parent_column, tuple(eval_fields), spec.sql)


def fold(image: dict[str, Any]) -> dict[str, Any]:
    """A row image with casefolded column names (SQL names columns case-insensitively)."""
    return {k.casefold(): v for k, v in image.items()}


def before_image(data: dict[str, Any], old: dict[str, Any] | None) -> dict[str, Any]:
    """The before-image of an UPDATE: the after-image with the changed columns' old values."""
    return {**data, **old} if old else data


def changed_columns(old: dict[str, Any] | None, data: dict[str, Any]) -> set[str] | None:
    """Casefolded names of the columns an UPDATE changed (None: unknown, treat all as changed)."""
    if old is None:
        return None
    return {k.casefold() for k, v in old.items() if data.get(k) != v}


@dataclass(slots=True)
class Op:
    kind: str                  # index_row | update_row | delete | sync
    image: dict[str, Any]      # column -> Dml string, as the change names them
    types: dict[str, str]      # column -> mysqlType
    cols: dict[str, str]       # casefolded column -> the image's own spelling
    fields: tuple = ()         # update_row: (field, column) pairs
    upsert: bool = False
    doc_id: str | None = None
    routing: str | None = None
    origin: str = ""           # db.table, for messages

    def get(self, column: str) -> Any:
        return self.image.get(self.cols.get(column.casefold(), column))

    def type_of(self, column: str) -> str | None:
        return self.types.get(self.cols.get(column.casefold(), column))

    def folded(self) -> tuple[dict[str, Any], dict[str, str]]:
        return fold(self.image), fold(self.types)

def joined_keys(j: JoinInfo, ch: Any) -> list[tuple]:
    """The join-key values (of ``j``'s own columns) a joined-table change affects: before and
    after images; none when the UPDATE changed no column the query reads."""
    types = fold(ch.mysql_type)
    mine = [c for c, _, _ in j.keys]
    if ch.kind in ("INSERT", "DELETE", "UPSERT"):
        images = [fold(ch.data)]
    else:
        changed = changed_columns(ch.old, ch.data)
        if changed is not None and not (changed & j.columns):
            return []
        images = [fold(ch.data), fold(before_image(ch.data, ch.old))]
    out = []
    for img in images:
        key = key_of(img, types, mine)
        if None not in key:
            out.append(key)
    return out


def key_of(image: dict[str, Any], types: dict[str, str], columns: tuple | list) -> tuple:
    """SQL parameters for ``columns`` of a casefolded image (binary strings as bytes)."""
    out = []
    for c in columns:
        v = image.get(c.casefold())
        if isinstance(v, str) and column_kind(types.get(c.casefold())) == "binary":
            v = v.encode("latin-1")
        out.append(v)
    return tuple(out)
