"""How the job partitions one RDB target's changes: by key as the target compares it, or as one
ordered stream for tables whose rows constrain each other.

Hash-partitioning by primary key is correct when a row's changes only ever touch that row.
Two things in a target break that, and :func:`key_rules` finds them in the target's schema:

* **rows that constrain each other**: a unique key besides the primary key (a value moved from
  one row to another must be released before it is taken) and foreign keys between mapped
  tables (a parent before its children; and the target's own ``ON DELETE/UPDATE CASCADE`` /
  ``SET NULL`` must act exactly as the source's did, because the binlog does not carry the
  cascaded changes). Such tables, joined through their foreign keys, form one *ordered group*:
  all its changes go to one partition and are applied in source order (docs/rdb.md proves that
  the end state equals the source's). A table without a primary key is ordered too: its rows
  are matched by value, so only the recorded position (:mod:`adapters.rdb.progress`) makes a
  replay of its INSERTs idempotent;
* **keys the collation equates**: the partition key of a string key column is a fold
  (:mod:`adapters.rdb.collation`); a column no fold is known for makes its table ordered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from sqlalchemy import inspect
from sqlalchemy.engine import Connection

from adapters.rdb.collation import ORDERED, fold_kind
from adapters.rdb.config import RdbTable
from adapters.rdb.schema import TableInfo, prefetch, table_info


@dataclass(frozen=True)
class KeyRules:
    """The partitioning of one group's RDB changes, per (mapping index, source table)."""

    #: -> the ordered group (every table of a group shares its id, across mappings of one target)
    ordered: dict[tuple[int, str], str] = field(default_factory=dict)
    #: -> ((source key column, fold kind), ...) for hash-partitioned tables with a non-exact key column
    folds: dict[tuple[int, str], tuple[tuple[str, str], ...]] = field(default_factory=dict)

    def merge(self, other: KeyRules) -> KeyRules:
        return KeyRules({**self.ordered, **other.ordered}, {**self.folds, **other.folds})

    @staticmethod
    def folder(target: Any) -> Callable[[str, list[str]], list[str]]:
        """``(fold kind, key column texts) -> their folds`` on ``target`` (a kind of :attr:`folds`;
        ``w:`` kinds ask the target server). Picklable: the job's part-key UDF runs it on executors."""
        from adapters.rdb.collation import fold_values

        return partial(fold_values, target)


def current_schema(conn: Connection, family: str) -> str:
    """The schema unqualified names resolve to."""
    if family == "mysql":
        return conn.exec_driver_sql("SELECT DATABASE()").scalar() or ""
    if family == "postgresql":
        return conn.exec_driver_sql("SELECT current_schema()").scalar() or "public"
    return "main"


def list_tables(conn: Connection, family: str, schema: str | None) -> list[str]:
    """The base tables (MariaDB: system-versioned ones too) of a target schema (None: the connection's own)."""
    if family == "mysql":
        db = "%s" if schema is not None else "DATABASE()"
        rows = conn.exec_driver_sql(
            f"SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = {db} AND TABLE_TYPE IN "
            "('BASE TABLE', 'SYSTEM VERSIONED') AND TABLE_NAME NOT LIKE '\\_sluice\\_%%' ORDER BY TABLE_NAME",
            (schema,) if schema is not None else ()).fetchall()
        return [r[0] for r in rows]
    return [t for t in inspect(conn).get_table_names(schema=schema) if not t.startswith("_sluice_")]


class _Components:
    """Union-find over qualified table names."""

    def __init__(self) -> None:
        self.parent: dict[tuple, tuple] = {}

    def find(self, x: tuple) -> tuple:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: tuple, b: tuple) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def key_rules(conn: Connection, target: Any, target_id: str, family: str,
              mappings: list[tuple[int, Any]]) -> KeyRules:
    """The rules for the dbMapping ``mappings`` ``[(midx, Mapping)]`` of one target."""
    here = current_schema(conn, family)
    routes: list[tuple[int, str, RdbTable, TableInfo]] = []
    for midx, m in mappings:
        spec = m.spec
        names = list_tables(conn, family, spec.target_schema) if spec.mirrorDb else [spec.table]
        if spec.mirrorDb:  # every table of the database: read together, not three queries each
            prefetch(conn, target, family, spec.target_schema, names)
        for name in names:
            route = RdbTable.from_mapping(m, name)
            info = table_info(conn, target, family, route.target_schema, route.target_table)
            if info is not None:
                routes.append((midx, name, route, info))
    mapped = {(info.schema or here, info.name) for _, _, _, info in routes}
    comps, ordered_tables = _Components(), set()
    folds: dict[tuple[int, str], tuple[tuple[str, str], ...]] = {}
    for midx, name, route, info in routes:
        me = (info.schema or here, info.name)
        comps.find(me)
        if not info.pk or len(info.unique) > 1:  # a unique key besides the primary key, or no primary key
            ordered_tables.add(me)
        if info.period is not None:  # system-versioned: current and history rows of one key, DELETE HISTORY
            ordered_tables.add(me)
        for fk in info.fks:
            parent = (fk.ref_schema or info.schema or here, fk.ref_table)
            if parent == me:
                ordered_tables.add(me)
            elif parent in mapped:
                comps.union(me, parent)
                ordered_tables.update((me, parent))
        kinds = _key_folds(route, info, family)
        if any(k == ORDERED for _, k in kinds):
            ordered_tables.add(me)
        elif kinds:
            folds[(midx, name)] = kinds
    ordered = {}
    for midx, name, _, info in routes:
        me = (info.schema or here, info.name)
        if me in ordered_tables:  # foreign keys join only tables that are both ordered
            root = comps.find(me)
            ordered[(midx, name)] = f"{target_id}/{root[0]}.{root[1]}"
            folds.pop((midx, name), None)
    return KeyRules(ordered, folds)


def _key_folds(route: RdbTable, info: TableInfo, family: str) -> tuple[tuple[str, str], ...]:
    """``((source column, kind), ...)`` of the key columns that do not compare exactly."""
    if route.pk is not None:
        pairs = [(s, info.find(t, route.case_insensitive)) for t, s in route.pk]
    else:  # mirror: the source primary key under the same names
        pairs = [(c, c) for c in info.pk]
    out = []
    for source, target in pairs:
        col = info.columns.get(target) if target else None
        kind = fold_kind(family, col) if col is not None else None
        if kind is not None:
            out.append((source, kind))
    return tuple(out)
