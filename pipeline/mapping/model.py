"""One mapping file: canal's common top-level keys plus exactly one kind-specific section."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import PrivateAttr, ValidationError, ValidationInfo, model_validator

from pipeline.mapping.es import EsMapping
from pipeline.mapping.fieldtypes import Flag, Frozen, OptionalName
from pipeline.mapping.hbase import HbaseMapping
from pipeline.mapping.problems import UNSUPPORTED_SECTIONS, to_config_error
from pipeline.mapping.rdb import DbMapping
from sluice_common.errors import ConfigError

Kind = Literal["rdb", "es", "hbase"]
SECTIONS: dict[str, Kind] = {"dbMapping": "rdb", "esMapping": "es", "hbaseMapping": "hbase"}


class Mapping(Frozen):
    """A parsed mapping file (frozen and picklable: it is shipped to Spark executors)."""

    dataSourceKey: OptionalName = None
    destination: OptionalName = None
    groupId: OptionalName = None
    outerAdapterKey: OptionalName = None
    concurrent: Flag = True
    #: Sluice extension: rows a target rejects terminally for their own data go to the
    #: dead-letter store instead of failing the run (docs/deadletter.md)
    deadLetter: Flag = False
    dbMapping: DbMapping | None = None
    esMapping: EsMapping | None = None
    hbaseMapping: HbaseMapping | None = None

    _file: str = PrivateAttr("<mapping>")

    @model_validator(mode="after")
    def _remember_file(self, info: ValidationInfo) -> Mapping:
        self._file = (info.context or {}).get("file", "<mapping>")
        return self

    @property
    def file(self) -> str:
        """The file this mapping was read from."""
        return self._file

    @property
    def spec(self) -> DbMapping | EsMapping | HbaseMapping:
        """The kind-specific section."""
        section = self.dbMapping or self.esMapping or self.hbaseMapping
        assert section is not None
        return section

    @property
    def kind(self) -> Kind:
        """``rdb``, ``es`` or ``hbase``."""
        return SECTIONS[self.spec.KEY]

    @property
    def source_key(self) -> str:
        """``db.table`` of the (main) source table; ``db.*`` for mirrorDb, ``*.t`` for ES
        SQL that names no schema."""
        return self.spec.source_key

    def matches(self, database: str, table: str) -> bool:
        """Whether changes of ``database.table`` feed this mapping."""
        return self.spec.matches(database, table)

    def validate_against_source(self, columns: list[str], pk: list[str], table: str | None = None) -> None:
        """Check the mapping against a source table's columns and primary key (see each kind)."""
        if isinstance(self.spec, HbaseMapping):
            self.spec.validate_against_source(columns, pk)
        else:
            self.spec.validate_against_source(columns, pk, table)


def parse_mapping(raw: Any, file: str = "<mapping>") -> Mapping:
    """Validate one loaded YAML document; every error names ``file`` and the key."""
    if not isinstance(raw, dict):
        got = "an empty file" if raw is None else f"a {type(raw).__name__}"
        raise ConfigError(file, None, f"expected a mapping of keys at the top, got {got}")
    for key in raw:
        if key in UNSUPPORTED_SECTIONS:
            raise ConfigError(file, str(key), f"{UNSUPPORTED_SECTIONS[key]} is not supported by Sluice",
                              hint="Sluice supports dbMapping (rdb), esMapping and hbaseMapping")
    present = [k for k in SECTIONS if k in raw]
    if not present:
        others = [str(k) for k in raw if str(k).endswith("Mapping")]
        if others:
            raise ConfigError(file, others[0], "is not a mapping kind Sluice supports",
                              hint="use dbMapping (rdb), esMapping or hbaseMapping")
        raise ConfigError(file, None, "no dbMapping, esMapping or hbaseMapping section",
                          hint="a mapping file has exactly one of them")
    if len(present) > 1:
        raise ConfigError(file, present[1], f"a mapping file has exactly one section, but this one "
                          f"also has {present[0]}", hint="split it into one file per target")
    if raw[present[0]] is None:
        raise ConfigError(file, present[0], "is empty; it needs the keys of the mapping",
                          hint="see docs/mappings.md")
    try:
        return Mapping.model_validate(raw, context={"file": file})
    except ValidationError as e:
        raise to_config_error(e, file, Mapping) from None
