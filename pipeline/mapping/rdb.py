"""``dbMapping``: one source table (or a whole database) to a relational table.

Canal's rdb adapter format. ``targetPk`` and ``targetColumns`` map a *target* column to a
*source* column; a null value means "the same name". With ``mapAll: true`` every source
column is copied under its own name, except those renamed in ``targetColumns`` and those in
``excludeColumns`` (a Sluice extension). With ``mirrorDb: true`` every table of
``database`` is copied to ``targetDb`` (default: the same name) as it is.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar, Literal

from pydantic import PrivateAttr, ValidationInfo, model_validator

from pipeline.mapping.fieldtypes import (
    Flag,
    Name,
    NameList,
    NameMap,
    OptionalName,
    PositiveInt,
    Section,
    Text,
    listing,
    same_name,
)

_BAD_NAME_CHARS = set(" \t\r\n`'\"")


class DbMapping(Section):
    """The ``dbMapping`` section."""

    KEY: ClassVar[str] = "dbMapping"

    mirrorDb: Flag = False
    database: Name
    table: OptionalName = None
    targetDb: OptionalName = None
    targetTable: OptionalName = None
    targetPk: NameMap = {}
    mapAll: Flag = False
    targetColumns: NameMap = {}
    caseInsensitive: Flag = False
    etlCondition: Text | None = None
    commitBatch: PositiveInt = 3000
    readBatch: PositiveInt = 5000
    #: Sluice extension (the key canal's phoenix adapter uses): source columns mapAll skips
    excludeColumns: NameList = ()
    #: Sluice extension: targetPk need not be a unique key of the source table; source rows
    #: that share a key then share one target row (without it the pre-flight check refuses)
    allowDuplicateKeys: Flag = False
    #: Sluice extension: a source column the target table does not have (mapAll, mirrorDb): ``fail``
    #: stops the sync naming it, ``ignore`` leaves it out
    onNewColumn: Literal["fail", "ignore"] = "fail"

    _schema: str | None = PrivateAttr(None)
    _name: str | None = PrivateAttr(None)
    _pairs: tuple[tuple[str, str], ...] = PrivateAttr(())
    _pk: tuple[tuple[str, str], ...] = PrivateAttr(())

    @model_validator(mode="after")
    def _check(self, info: ValidationInfo) -> DbMapping:
        self._bind(info)
        if self.mirrorDb:
            self._check_mirror()
            self._schema = self.targetDb or self.database
            return self
        if self.table is None:
            raise self.fail("table", "is required (the source table; or set mirrorDb: true)")
        if self.targetTable is None:
            raise self.fail("targetTable", "is required (the target table, 'table' or 'db.table')")
        self._schema, self._name = self._split_target()
        if not self.targetPk:
            raise self.fail("targetPk", "is required: map each target primary key column to its source "
                            "column, e.g. targetPk: {id: id}")
        if not self.mapAll and not self.targetColumns:
            raise self.fail("targetColumns", "is required unless mapAll: true (map target column: "
                            "source column; an empty value means the same name)")
        self._pk = tuple((t, s or t) for t, s in self.targetPk.items())
        self._pairs = self._merge_columns()
        self._check_excludes()
        if self.onNewColumn != "fail" and not self.mapAll:
            raise self.fail("onNewColumn", "only applies with mapAll: true or mirrorDb: true (targetColumns "
                            "names every column written)")
        return self

    def _check_mirror(self) -> None:
        if self.table is not None:
            raise self.fail("table", "must be absent or empty with mirrorDb: true "
                            "(every table of the database is mirrored)")
        for key in ("targetTable", "targetPk", "targetColumns", "excludeColumns", "allowDuplicateKeys"):
            if getattr(self, key):
                raise self.fail(key, "is not used with mirrorDb: true (each table is copied as it is "
                                "to targetDb)", hint=f"remove {key}, or set mirrorDb: false")

    def _split_target(self) -> tuple[str | None, str]:
        text = self.targetTable or ""
        parts = text.split(".")
        if len(parts) > 2 or any(not p or _BAD_NAME_CHARS & set(p) for p in parts):
            raise self.fail("targetTable", f"must be 'table' or 'db.table', got {text!r}")
        if len(parts) == 1:
            return self.targetDb, parts[0]
        if self.targetDb is not None and self.targetDb != parts[0]:
            raise self.fail("targetTable", f"names database '{parts[0]}' but targetDb is "
                            f"'{self.targetDb}'", hint="give the database in one place only")
        return parts[0], parts[1]

    def _merge_columns(self) -> tuple[tuple[str, str], ...]:
        pairs = dict(self._pk)
        for target, source in self.targetColumns.items():
            source = source or target
            if target in pairs and pairs[target] != source:
                raise self.fail("targetPk", f"target column '{target}' comes from '{pairs[target]}' here "
                                f"but from '{source}' in targetColumns")
            pairs[target] = source
        seen: dict[str, str] = {}
        for target, source in pairs.items():
            if source in seen:
                raise self.fail("targetColumns", f"source column '{source}' is mapped to both "
                                f"'{seen[source]}' and '{target}'")
            seen[source] = target
        return tuple(pairs.items())

    def _check_excludes(self) -> None:
        if self.excludeColumns and not self.mapAll:
            raise self.fail("excludeColumns", "only applies with mapAll: true (otherwise just leave "
                            "the column out of targetColumns)")
        for col in self.excludeColumns:
            if col in self.source_pk_columns:
                raise self.fail("excludeColumns", f"'{col}' feeds the target primary key and cannot "
                                "be excluded")
            if col in dict(self._pairs).values():
                raise self.fail("excludeColumns", f"'{col}' is both mapped in targetColumns and excluded")

    # -- what the adapter and the job use -------------------------------------------------
    @property
    def source_key(self) -> str:
        """``database.table``, or ``database.*`` for a mirrored database."""
        return f"{self.database}.{'*' if self.mirrorDb else self.table}"

    @property
    def column_pairs(self) -> tuple[tuple[str, str], ...]:
        """``(target column, source column)`` of every mapped column (targetColumns merged with
        the primary key's)."""
        return self._pairs

    def matches(self, database: str, table: str) -> bool:
        """Whether changes of ``database.table`` feed this mapping (caseInsensitive aware)."""
        if not same_name(database, self.database, self.caseInsensitive):
            return False
        return self.mirrorDb or same_name(table, self.table or "", self.caseInsensitive)

    @property
    def target_schema(self) -> str | None:
        """The target database/schema (None: the data source's default)."""
        return self._schema

    @property
    def target_name(self) -> str | None:
        """The target table name (None for mirrorDb: it is the source table's name)."""
        return self._name

    def target(self, table: str | None = None) -> tuple[str | None, str]:
        """``(schema, table)`` of the target; with mirrorDb, of the source ``table``."""
        if self.mirrorDb:
            if not table:
                raise ValueError("a mirrorDb mapping needs the source table name")
            return self._schema, table
        return self._schema, self._name or ""

    @property
    def primary_key(self) -> tuple[tuple[str, str], ...]:
        """``(target column, source column)`` pairs of the target primary key."""
        return self._pk

    @property
    def target_pk_columns(self) -> tuple[str, ...]:
        return tuple(t for t, _ in self._pk)

    @property
    def source_pk_columns(self) -> tuple[str, ...]:
        return tuple(s for _, s in self._pk)

    def column_mapping(self, source_columns: Iterable[str]) -> dict[str, str]:
        """``{source column: target column}`` for the given source columns, in their order.

        mirrorDb: identity. mapAll: identity minus ``excludeColumns``, with the renames of
        ``targetColumns``/``targetPk``. Otherwise: only ``targetColumns`` and ``targetPk``.
        """
        ci = self.caseInsensitive
        result: dict[str, str] = {}
        for col in source_columns:
            target = next((t for t, s in self._pairs if same_name(s, col, ci)), None)
            if target is not None:
                result[col] = target
            elif self.mirrorDb or (self.mapAll and not any(same_name(x, col, ci) for x in self.excludeColumns)):
                result[col] = col
        return result

    def validate_against_source(self, columns: list[str], pk: list[str],
                                table: str | None = None) -> None:
        """Check this mapping against the source table's columns and primary key.

        The loader cannot see the database, so the job calls this at start, for each
        mapped table (with mirrorDb, for each table of the database, naming ``table``).
        """
        table = table or self.table or "?"
        have = list(columns)
        ci = self.caseInsensitive

        def check(key: str, names: Iterable[str], hint) -> None:
            for name in names:
                if not any(same_name(name, c, ci) for c in have):
                    raise self.fail(key, f"column '{name}' is not in the source table {table} "
                                    f"(columns: {listing(have)})", hint=hint(name))

        if self.mirrorDb:  # tables without a primary key work too (docs/rdb.md: matching rule)
            return
        target_of = {s: t for t, s in self._pairs}
        check("targetPk", self.source_pk_columns,
              lambda n: f"if it was renamed, name the key's column as the source calls it now in dbMapping.targetPk "
              f"of {self._file}")
        check("targetColumns", [s for t, s in self._pairs if t not in self.target_pk_columns],
              lambda n: f"if it was renamed, set `{target_of.get(n, n)}: <its new name>` under dbMapping.targetColumns "
              f"of {self._file} (the sync then names the `sluice repair` for the changes made under the old "
              "name); if it was dropped, remove it from there")
        check("excludeColumns", self.excludeColumns,
              lambda n: f"remove '{n}' from dbMapping.excludeColumns of {self._file}, or write its new name there")

    def validate_key(self, unique_keys: Iterable[tuple[str, ...]], table: str | None = None) -> None:
        """Refuse a ``targetPk`` that is not unique at the source (``unique_keys``: the source
        table's primary key and unique keys whose columns are all NOT NULL).

        Two source rows with the same key would become one target row: the second INSERT is
        skipped as a duplicate and an UPDATE or DELETE of either hits the one row, so rows
        disappear without an error. ``allowDuplicateKeys: true`` says that is intended.
        """
        if self.mirrorDb or self.allowDuplicateKeys:
            return
        ci = self.caseInsensitive
        mine = {c.casefold() if ci else c for c in self.source_pk_columns}
        keys = [tuple(k) for k in unique_keys]
        if any(k and {c.casefold() if ci else c for c in k} <= mine for k in keys):
            return
        table = table or self.table or "?"
        shown = "; ".join(f"({', '.join(k)})" for k in keys) or "none"
        raise self.fail("targetPk", f"source column(s) ({', '.join(self.source_pk_columns)}) are not a primary key "
                        f"or unique NOT NULL key of the source table {self.database}.{table} (its keys: {shown}); "
                        "two source rows with the same value would become one target row and rows would be "
                        "lost without an error",
                        hint="map targetPk to the source's primary key (or a unique NOT NULL key), or set "
                        "dbMapping.allowDuplicateKeys: true if rows sharing a key are meant to share one target row")
