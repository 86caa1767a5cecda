"""``esMapping``: a SELECT over source tables to documents of one Elasticsearch index.

Canal's es6/es7/es8 adapter format. ``sql`` is kept as written and parsed at load time
into a :class:`~pipeline.mapping.select_sql.SelectQuery` (main table, LEFT JOINs, output
fields and the columns each reads); SQL the adapter could not keep in sync is refused
here. ``_id`` (or ``pk``), ``skips``, ``objFields`` and ``relations`` name output fields.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import BeforeValidator, ConfigDict, Field, PrivateAttr, ValidationInfo, field_validator, model_validator

from pipeline.mapping.fieldtypes import (
    Flag,
    Frozen,
    Name,
    NameList,
    OptionalName,
    PositiveInt,
    Section,
    Text,
    dict_or_empty,
    listing,
)
from pipeline.mapping.select_sql import SelectQuery, SqlError, parse_select

#: objFields types: a separator-joined string to an array, or JSON text to an object
OBJECT_FIELD_TYPES = ("array:<separator>", "object", "json")


class Relation(Frozen):
    """One ``relations`` entry: this index's join field (parent/child documents)."""

    #: the relation name of the documents this mapping writes (e.g. ``customer``, ``order``)
    name: Name
    #: for child documents: the output field holding the parent's id (also used as routing)
    parent: OptionalName = None


def _object_type(value: Any) -> Any:
    if isinstance(value, str):
        text = value.strip()
        if text in ("object", "json") or (text.startswith("array:") and text[len("array:"):].strip()):
            return text
    raise ValueError(f"must be one of {', '.join(OBJECT_FIELD_TYPES)}, got {value!r}")


#: characters Elasticsearch refuses in an index (or alias) name
_INDEX_FORBIDDEN = set('\\/*?"<>| ,#:')


def index_name_problem(name: str) -> str | None:
    """Why Elasticsearch would refuse ``name`` as an index or alias name (None: it is valid)."""
    if name != name.lower():
        return "must be lower case (Elasticsearch refuses upper-case index names)"
    bad = sorted(_INDEX_FORBIDDEN & set(name))
    if bad:
        return f"must not contain {' '.join(repr(c) for c in bad)} (Elasticsearch refuses it in an index name)"
    if name[0] in "-_+":
        return f"must not start with {name[0]!r} (Elasticsearch refuses it)"
    if name in (".", ".."):
        return "must be a name, not '.' or '..'"
    if len(name.encode()) > 255:
        return "is longer than 255 bytes (Elasticsearch's limit)"
    return None


class EsMapping(Section):
    """The ``esMapping`` section."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=False)
    KEY: ClassVar[str] = "esMapping"

    index: Name = Field(alias="_index")
    #: ES 6 mapping type (canal's es6 files have it); ignored by ES 7 and later
    type: OptionalName = Field(None, alias="_type")
    #: the output field whose value is the document ``_id``
    id: OptionalName = Field(None, alias="_id")
    upsert: Flag = False
    #: without ``_id``: the output field that finds documents (ES generates their ids)
    pk: OptionalName = None
    sql: Text
    objFields: Annotated[dict[Name, Annotated[str, BeforeValidator(_object_type)]],
                         BeforeValidator(dict_or_empty)] = {}
    skips: NameList = ()
    relations: Annotated[dict[Name, Relation], BeforeValidator(dict_or_empty)] = {}
    etlCondition: Text | None = None
    commitBatch: PositiveInt = 3000

    _query: SelectQuery | None = PrivateAttr(None)

    @field_validator("index")
    @classmethod
    def _index_name(cls, value: str) -> str:
        problem = index_name_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _check(self, info: ValidationInfo) -> EsMapping:
        self._bind(info)
        try:
            self._query = parse_select(self.sql)
        except SqlError as e:
            raise self.fail("sql", str(e)) from None
        fields = self._query.field_names
        if self.id is None and self.pk is None:
            raise self.fail("_id", "is required (the field that becomes the document id), or set pk")
        self._need_field("_id", self.id)
        if self.id is None:
            self._need_field("pk", self.pk)
        for name in self.skips:
            self._need_field("skips", name)
        for name in self.objFields:
            self._need_field(f"objFields.{name}", name)
        if len(self.relations) > 1:
            raise self.fail("relations", f"an index has one join field, got {len(self.relations)}: "
                            f"{', '.join(self.relations)}")
        for field, rel in self.relations.items():
            if field in fields:
                raise self.fail(f"relations.{field}", "the join field must not also be a selected field")
            self._need_field(f"relations.{field}.parent", rel.parent)
        return self

    def _need_field(self, key: str, name: str | None) -> None:
        if name is not None and self._query is not None and self._query.field(name) is None:
            raise self.fail(key, f"'{name}' is not a field selected by esMapping.sql "
                            f"(fields: {listing(list(self._query.field_names))})")

    # -- what the adapter and the job use -------------------------------------------------
    @property
    def query(self) -> SelectQuery:
        """The parsed ``sql``."""
        assert self._query is not None
        return self._query

    @property
    def id_field(self) -> str:
        """The output field that identifies a document (``_id``, else ``pk``)."""
        return self.id or self.pk or ""

    @property
    def source_key(self) -> str:
        """The main table, ``schema.table`` (``*.table`` when the SQL names no schema)."""
        return self.query.main.key

    @property
    def source_keys(self) -> tuple[str, ...]:
        """Every table whose changes can change documents: main, then joined."""
        return tuple(dict.fromkeys(t.key for t in self.query.tables))

    def matches(self, database: str, table: str) -> bool:
        """Whether a change of ``database.table`` can change documents of this mapping.

        Table names compare case-insensitively (as canal does); an unqualified table in
        the SQL matches any database (the data source of ``dataSourceKey`` decides).
        """
        return any(t.name.casefold() == table.casefold()
                   and (t.schema is None or t.schema.casefold() == database.casefold())
                   for t in self.query.tables)

    def validate_against_source(self, columns: list[str], pk: list[str] | None = None,
                                table: str | None = None) -> None:
        """Check that every column the SQL reads from ``table`` (default: the main table) exists.

        ``pk`` is accepted for a signature shared by every kind.
        """
        table = table or self.query.main.name
        have = {c.casefold() for c in columns}
        for t in self.query.tables:
            if t.name.casefold() != table.casefold():
                continue
            for col in self.query.columns_of(t.alias):
                if col.casefold() not in have:
                    raise self.fail("sql", f"column '{col}' ({t.alias}.{col}) is not in the source table "
                                    f"{t.name} (columns: {listing(list(columns))})")
