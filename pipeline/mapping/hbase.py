"""``hbaseMapping``: one source table to one HBase table (canal's hbase adapter format).

``columns`` maps a source column to ``QUALIFIER``, ``FAMILY:QUALIFIER``, ``ROWKEY`` or
``ROWKEY LEN:n`` (null: the column's own name), each optionally suffixed ``$TYPE``; it is
parsed into :class:`HbaseColumn` items. Columns not listed are still written (default
family, their own name) unless listed in ``excludeColumns``. The row key is one column
mapped as ``ROWKEY`` or a composite ``rowKey: a,b`` joined with ``rowKeySeparator``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BeforeValidator, PrivateAttr, ValidationInfo, field_validator, model_validator

from pipeline.mapping.fieldtypes import Flag, Name, NameList, NameMap, PositiveInt, Section, Text, listing, same_name

#: ``$TYPE`` names for STRING and NATIVE modes (from canal's example mapping)
NATIVE_TYPES = ("DEFAULT", "STRING", "INTEGER", "LONG", "SHORT", "BOOLEAN", "FLOAT", "DOUBLE",
                "BIGDECIMAL", "DATE", "BYTE", "BYTES")
#: ``$TYPE`` names for PHOENIX mode (Phoenix's own type names)
PHOENIX_TYPES = ("DEFAULT", "UNSIGNED_INT", "UNSIGNED_LONG", "UNSIGNED_TINYINT", "UNSIGNED_SMALLINT",
                 "UNSIGNED_FLOAT", "UNSIGNED_DOUBLE", "INTEGER", "BIGINT", "TINYINT", "SMALLINT", "FLOAT",
                 "DOUBLE", "BOOLEAN", "TIME", "DATE", "TIMESTAMP", "UNSIGNED_TIME", "UNSIGNED_DATE",
                 "UNSIGNED_TIMESTAMP", "VARCHAR", "VARBINARY", "DECIMAL")
_ROWKEY = re.compile(r"ROWKEY(?:\s+LEN\s*:\s*(\d+))?", re.IGNORECASE)


def _mode(value: Any) -> Any:
    if isinstance(value, str) and value.strip().upper() in ("STRING", "NATIVE", "PHOENIX"):
        return value.strip().upper()
    raise ValueError("must be one of STRING, NATIVE, PHOENIX")


def _family(value: Any) -> Any:
    return "CF" if value is None else value


def family_problem(name: str) -> str | None:
    """Why HBase would refuse ``name`` as a column family (``isLegalColumnFamilyName``), or None."""
    if name.startswith("."):
        return "must not start with '.' (HBase refuses such a column family)"
    if ":" in name:
        return "must not contain ':' (it separates the family from the qualifier)"
    if any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in name):
        return "must not contain control characters"
    if name == "recovered.edits":
        return "'recovered.edits' is reserved by HBase"
    return None


#: HBase table names (``TableName``): an optional namespace of word characters, then a qualifier
#: of word characters, '_', '-' and '.' that does not start with '.' or '-'
_TABLE_NAME = re.compile(r"(?:\w+:)?(?![.-])[\w.-]+")


def table_problem(name: str) -> str | None:
    """Why HBase would refuse ``name`` as a table name, or None."""
    if not _TABLE_NAME.fullmatch(name):
        return ("must be [namespace:]name with letters, digits, '_', '-' and '.' in the name (not first: "
                "'.' or '-'), and letters, digits and '_' in the namespace (HBase refuses anything else)")
    return None


@dataclass(frozen=True, slots=True)
class HbaseColumn:
    """Where one source column goes: a cell (family, qualifier) or the row key."""

    source: str
    family: str | None
    qualifier: str | None
    #: the ``$TYPE`` suffix (upper case), or None for the mode's default encoding
    type: str | None = None
    is_rowkey: bool = False
    #: ``ROWKEY LEN:n``: the row key is left-padded to n characters
    rowkey_len: int | None = None


class HbaseMapping(Section):
    """The ``hbaseMapping`` section."""

    KEY: ClassVar[str] = "hbaseMapping"

    mode: Annotated[Literal["STRING", "NATIVE", "PHOENIX"], BeforeValidator(_mode)] = "STRING"
    database: Name
    table: Name
    hbaseTable: Name
    family: Annotated[Name, BeforeValidator(_family)] = "CF"
    uppercaseQualifier: Flag = True
    autoCreateTable: Flag = False
    rowKey: Name | None = None
    #: Sluice extension: what joins a composite rowKey's values (canal hard-codes "|")
    rowKeySeparator: Text = "|"
    columns: NameMap = {}
    excludeColumns: NameList = ()
    etlCondition: Text | None = None
    commitBatch: PositiveInt = 3000
    readBatch: PositiveInt = 5000

    _items: tuple[HbaseColumn, ...] = PrivateAttr(())

    @field_validator("hbaseTable")
    @classmethod
    def _table_name(cls, value: str) -> str:
        problem = table_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("family")
    @classmethod
    def _family_name(cls, value: str) -> str:
        problem = family_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _parse(self, info: ValidationInfo) -> HbaseMapping:
        self._bind(info)
        if self.rowKeySeparator == "":
            raise self.fail("rowKeySeparator", "must not be empty (values would run together)")
        self._items = tuple(self._parse_column(src, spec) for src, spec in self.columns.items())
        self._check_rowkey()
        return self

    def _parse_column(self, source: str, spec: str | None) -> HbaseColumn:
        target, type_ = (spec or ""), None
        if "$" in target:
            target, type_ = target.split("$", 1)
            type_ = type_.strip().upper()
            known = PHOENIX_TYPES if self.mode == "PHOENIX" else NATIVE_TYPES
            if type_ not in known:
                raise self.fail(f"columns.{source}", f"unknown type ${type_} for mode {self.mode}",
                                hint="use one of " + ", ".join("$" + t for t in known))
        target = target.strip()
        if target.upper().startswith("ROWKEY"):
            m = _ROWKEY.fullmatch(target)
            if not m:
                raise self.fail(f"columns.{source}", f"bad row key spec {target!r}",
                                hint="write ROWKEY or ROWKEY LEN:<n>")
            length = int(m.group(1)) if m.group(1) else None
            if length == 0:
                raise self.fail(f"columns.{source}", "ROWKEY LEN must be a positive integer")
            return HbaseColumn(source, None, None, type_, True, length)
        family, qualifier = self.family, target or source
        if ":" in target:
            family, qualifier = (p.strip() for p in target.split(":", 1))
            if not family or not qualifier:
                raise self.fail(f"columns.{source}", f"bad cell {target!r}: write FAMILY:QUALIFIER or QUALIFIER")
            problem = family_problem(family)
            if problem:
                raise self.fail(f"columns.{source}", f"column family {family!r} {problem}")
        if self.uppercaseQualifier:
            qualifier = qualifier.upper()
        return HbaseColumn(source, family, qualifier, type_)

    def _check_rowkey(self) -> None:
        singles = [c for c in self._items if c.is_rowkey]
        if len(singles) > 1:
            raise self.fail(f"columns.{singles[1].source}",
                            f"only one column can be ROWKEY (already: {singles[0].source})",
                            hint="for a composite row key write rowKey: col1,col2 and map no column as ROWKEY")
        if self.rowKey is not None:
            parts = self.rowkey_columns
            if any(not p for p in parts):
                raise self.fail("rowKey", f"empty column name in {self.rowKey!r}; write rowKey: col1,col2")
            for p in parts:
                if parts.count(p) > 1:
                    raise self.fail("rowKey", f"column '{p}' appears twice")
            if singles:
                col = singles[0].source
                if col in parts:
                    raise self.fail("rowKey", f"column '{col}' is mapped as ROWKEY in columns and repeated "
                                    f"in the composite rowKey ({self.rowKey}); a composite rowKey must not "
                                    "repeat it", hint=f"remove '{col}: ROWKEY' from columns")
                raise self.fail(f"columns.{col}", f"ROWKEY cannot be used while the composite rowKey "
                                f"({self.rowKey}) is set (canal refuses it too)", hint="use one or the other")
        elif not singles:
            raise self.fail("rowKey", "no row key: set rowKey: col1,col2 or map one column as ROWKEY "
                            "in columns (e.g. id: ROWKEY)")
        for col in self.excludeColumns:
            if col in self.rowkey_columns:
                raise self.fail("excludeColumns", f"'{col}' is part of the row key and cannot be excluded")
            if col in self.columns:
                raise self.fail("excludeColumns", f"'{col}' is both mapped in columns and excluded")

    # -- what the adapter and the job use -------------------------------------------------
    @property
    def source_key(self) -> str:
        """``database.table`` of the source table."""
        return f"{self.database}.{self.table}"

    def matches(self, database: str, table: str) -> bool:
        """Whether changes of ``database.table`` feed this mapping."""
        return database == self.database and table == self.table

    @property
    def column_items(self) -> tuple[HbaseColumn, ...]:
        """The parsed ``columns`` entries, in file order."""
        return self._items

    @property
    def rowkey_columns(self) -> tuple[str, ...]:
        """The source columns that make the row key, in order."""
        if self.rowKey is not None:
            return tuple(p.strip() for p in self.rowKey.split(","))
        return tuple(c.source for c in self._items if c.is_rowkey)

    @property
    def rowkey_item(self) -> HbaseColumn | None:
        """The column mapped as ``ROWKEY`` (with its LEN and type), if not composite."""
        return next((c for c in self._items if c.is_rowkey), None)

    @property
    def families(self) -> tuple[str, ...]:
        """Every column family written: the default one and those named in columns."""
        fams = [self.family] + [c.family for c in self._items if c.family]
        return tuple(dict.fromkeys(fams))

    def column_for(self, source: str) -> HbaseColumn | None:
        """Where source column ``source`` goes; None if excluded."""
        if source in self.excludeColumns:
            return None
        item = next((c for c in self._items if c.source == source), None)
        if item is not None:
            return item
        return HbaseColumn(source, self.family, source.upper() if self.uppercaseQualifier else source)

    def validate_against_source(self, columns: list[str], pk: list[str] | None = None) -> None:
        """Check the named columns exist in the source table (called by the job at start).

        ``pk`` (the source primary key) is accepted for a signature shared by every kind.
        """
        have = list(columns)

        def check(key: str, names: tuple[str, ...] | list[str]) -> None:
            for name in names:
                if not any(same_name(name, c, False) for c in have):
                    raise self.fail(key, f"column '{name}' is not in the source table {self.table} "
                                    f"(columns: {listing(have)})")

        check("rowKey" if self.rowKey is not None else "columns", self.rowkey_columns)
        check("columns", list(self.columns))
        check("excludeColumns", self.excludeColumns)
