"""Foreign keys whose actions the binlog does not carry, and what a target must have for them.

InnoDB does not log the rows an ``ON DELETE/UPDATE CASCADE`` or ``SET NULL`` changes: a replica
must perform them itself. So a mapped child table whose source foreign key cascades needs the
same foreign key (same columns, same parent, same actions) between the mapped tables in its RDB
target, and the parent table must be mapped to that target too. :func:`expected_cascades`
reads the source's foreign keys and says, per target, which foreign keys the target must have;
the RDB adapter checks them at pre-flight (``check_cascades``) with one message per problem.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.mapping import DbMapping, Mapping
from pipeline.source import catalog
from sluice_common.errors import ConfigError

CASCADING = frozenset({"CASCADE", "SET NULL", "SET DEFAULT"})


class SourceFk(catalog.ForeignKey):
    """One foreign key of a source table (the catalog's record), and whether it cascades."""

    __slots__ = ()

    @property
    def cascades(self) -> bool:
        return self.on_delete in CASCADING or self.on_update in CASCADING

    def describe(self) -> str:
        return (f"foreign key {self.name} of {self.database}.{self.table} ({', '.join(self.columns)}) -> "
                f"{self.ref_database}.{self.ref_table} ({', '.join(self.ref_columns)}) "
                f"ON DELETE {self.on_delete} ON UPDATE {self.on_update}")


@dataclass(frozen=True)
class ExpectedFk:
    """A foreign key a target must have: the source's, in the target's names."""

    source: SourceFk
    origin: str  # the child's mapping file
    child: tuple[Mapping, str]  # the child's mapping and source table (the adapter resolves its target table)
    columns: tuple[str, ...]
    parent: tuple[Mapping, str]  # the parent's mapping and source table
    ref_columns: tuple[str, ...]


def read_source_fks(cur, databases: set[str]) -> list[SourceFk]:
    """The foreign keys of every table in ``databases`` (a pymysql cursor on the source)."""
    return [SourceFk(*fk) for fk in catalog.foreign_keys(cur, databases)]


def _mapped(mappings: tuple[Mapping, ...], database: str, table: str) -> list[tuple[int, Mapping]]:
    return [(i, m) for i, m in enumerate(mappings)
            if isinstance(m.spec, DbMapping) and m.matches(database, table)]


def _target_columns(m: Mapping, columns: tuple[str, ...]) -> tuple[str, ...] | None:
    mapped = m.spec.column_mapping(columns)
    return tuple(mapped[c] for c in columns) if all(c in mapped for c in columns) else None


def expected_cascades(fks: list[SourceFk], mappings: tuple[Mapping, ...], targets: tuple[str, ...]
                      ) -> dict[str, list[ExpectedFk]]:
    """Per target id, the foreign keys it must have; a cascading foreign key whose parent is not
    mapped to the child's target is a ConfigError naming the child's mapping file."""
    out: dict[str, list[ExpectedFk]] = {}
    for fk in fks:
        if not fk.cascades:
            continue
        for ci, child in _mapped(mappings, fk.database, fk.table):
            parents = [(pi, p) for pi, p in _mapped(mappings, fk.ref_database, fk.ref_table)
                       if targets[pi] == targets[ci]]
            cols = _target_columns(child, fk.columns)
            if not parents or cols is None:
                what = "its parent table is not mapped to the same target" if not parents else \
                    "its columns are not all mapped"
                raise ConfigError(child.file, "dbMapping", f"source {fk.describe()}: {what}; the binlog does not "
                                  "carry the rows the cascade changes, so the target cannot follow them",
                                  hint=f"map {fk.ref_database}.{fk.ref_table} to the same target in this group "
                                  "(and every column of the foreign key)")
            _, parent = parents[0]
            rcols = _target_columns(parent, fk.ref_columns)
            if rcols is None:
                raise ConfigError(parent.file, "dbMapping", f"source {fk.describe()}: the referenced columns are "
                                  "not all mapped", hint="map them")
            out.setdefault(targets[ci], []).append(ExpectedFk(
                fk, child.file, (child, fk.table), cols, (parent, fk.ref_table), rcols))
    return out
