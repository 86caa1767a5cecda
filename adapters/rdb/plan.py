"""How the changes of one route land in one reflected table: columns, key, converters.

A :class:`Plan` is built once per (route, source column set, key) and cached on the
:class:`TableInfo`, so the per-row work is an ``itemgetter`` and the few converters that
are not the identity. What a plan also takes from the change's ``mysqlType`` (its converters,
the columns its table lacked, the fractional-digit guards) is the same for every change of that
column set until a DDL, and each DDL barrier makes the executors reflect their tables afresh
(a new epoch: new TableInfos, no cached plan).
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from sqlalchemy.dialects import mysql as _my
from sqlalchemy.dialects import postgresql as _pg

from adapters.base import Change
from adapters.rdb.config import RdbTable
from adapters.rdb.lossy import loss
from adapters.rdb.narrowing import Rounded, alter_statement, guard, lost_digits, widened_type
from adapters.rdb.schema import TableInfo
from adapters.rdb.values import Converter, converter, needs_relaxed, suggest_type
from sluice_common.errors import TargetError


@dataclass
class Plan:
    info: TableInfo
    src: tuple[str, ...]  # mapped source columns
    tgt: tuple[str, ...]  # their target columns (same order)
    convs: tuple[Converter | None, ...]
    key_src: tuple[str, ...]  # () = the table has no key: match on all columns
    key_tgt: tuple[str, ...]
    relax: tuple[int, ...]  # positions (in src) of MySQL ENUM columns without a '' member
    source: str  # "db.table", for messages
    #: (source, target) columns the mapping maps that the change's table did not have when it was
    #: written (its ``mysqlType`` lists every column the table had): added or renamed since
    lacking: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        self.getter = _getter(self.src)
        self._fix = tuple((i, f) for i, f in enumerate(self.convs) if f is not None)
        self.index = {s: i for i, s in enumerate(self.src)}
        self.key_pos = tuple(self.index[s] for s in self.key_src)
        self._key_get = _getter(self.key_src)
        self._key_fix = tuple((j, self.convs[i]) for j, i in enumerate(self.key_pos) if self.convs[i] is not None)

    def rows(self, changes: list[Change]) -> list[tuple]:
        """Converted target values, one tuple per change, in ``src`` order."""
        get, fix = self.getter, self._fix
        if not fix:
            return [get(c.data) for c in changes]
        out = []
        for c in changes:
            r = list(get(c.data))
            for i, f in fix:
                r[i] = f(r[i])
            out.append(tuple(r))
        return out

    def key_rows(self, changes: list[Change]) -> list[tuple]:
        """Converted key values, one tuple per change."""
        if not self._key_fix:
            get = self._key_get
            return [get(c.data) for c in changes]
        return [self.key_values(c.data) for c in changes]

    def key_values(self, values: dict[str, str | None]) -> tuple:
        """The converted key of any image (only the key's columns are converted: a before-image's
        other values are not written, so no guard of theirs applies)."""
        r = list(self._key_get(values))
        for j, f in self._key_fix:
            r[j] = f(r[j])
        return tuple(r)

    def image(self, values: dict[str, str | None]) -> tuple:
        """One converted row from any image (e.g. the before-image of an UPDATE)."""
        r = list(self.getter(values))
        for i, f in self._fix:
            r[i] = f(r[i])
        return tuple(r)

    def key_of(self, change: Change) -> dict[str, Any]:
        """The row's key for messages: ``{source column: Dml value}`` (all columns if key-less)."""
        cols = self.key_src or self.src
        return {c: change.data.get(c) for c in cols}

    def set_columns(self, change: Change) -> tuple[int, ...]:
        """Positions of the columns an UPDATE sets: every mapped column of the after-image (the
        Dml's ``data``, which holds exactly the columns the row image carries) except key columns
        the UPDATE did not change. Setting the unchanged ones too keeps the target's own ``ON UPDATE``
        clauses from stamping values the source did not write (docs/rdb.md, "What an UPDATE sets")."""
        old = change.old or {}
        keys = set(self.key_pos)
        return tuple(i for i, s in enumerate(self.src) if i not in keys or s in old)

    def changes_nothing(self, change: Change) -> bool:
        """An UPDATE whose before-image differs only in columns this plan does not write (the
        target row already holds its after-image): nothing to apply."""
        return bool(change.old) and not any(s in change.old for s in self.src)

    def changes_key(self, change: Change) -> bool:
        """An UPDATE that changes a key column (applied as one key-changing UPDATE)."""
        return bool(self.key_pos and change.old) and any(self.src[i] in change.old for i in self.key_pos)


def _getter(cols: tuple[str, ...]):
    if len(cols) == 1:
        one = cols[0]
        return lambda d: (d[one],)
    if not cols:
        return lambda d: ()
    return itemgetter(*cols)


def _fail(route: RdbTable, info: TableInfo, problem: str, hint: str | None = None) -> TargetError:
    origin = f"{route.origin}: " if route.origin else ""
    return TargetError(f"{origin}{problem}", hint=hint)


def build_plan(route: RdbTable, info: TableInfo, family: str, change: Change, database: str | None = None,
               complete_types: bool = True, exact_digits: bool = True) -> Plan:
    """Resolve the mapping against the reflected table for changes shaped like ``change``
    (``database``: the target URL's, where the table is named without one, for messages;
    ``complete_types``: the change's ``mysqlType`` lists every column its table had, so a mapped
    column missing there is one the table did not have; ``exact_digits``: a value the target would
    round is refused)."""
    ci = route.case_insensitive
    source = f"{change.database}.{change.table}"
    pairs: list[tuple[str, str]] = []
    lacking = []
    if route.columns is not None:
        had = change.mysql_type or {}  # every column of the table then (a MINIMAL image carries fewer)
        for s, t in route.columns:
            if s not in change.data:
                if complete_types and had and s not in had:
                    lacking.append((s, t))
                continue
            found = info.find(t, ci)
            if found is None:
                raise _fail(route, info, f"target column {t} (from source column {s}) is not in target table "
                            f"{info.label}", hint="add it to the target table or fix targetColumns")
            pairs.append((s, found))
    else:
        renames = dict(route.renames)
        for s in change.data:
            if s in route.exclude:
                continue
            found = info.find(renames.get(s, s), ci)
            if found is None:
                if route.on_new_column == "ignore":
                    continue
                raise _fail(route, info, f"source column {s} of {source} is not in target table {info.label}",
                            hint=f"add it to the target (ALTER TABLE {info.label} ADD COLUMN {s} ...) and sync "
                            "again, then fill it in the rows the target held before (`sluice repair`: "
                            f"docs/operations.md); or set dbMapping.onNewColumn: ignore in "
                            f"{route.origin or 'the mapping'} to leave it out")
            pairs.append((s, found))
    key_cols = {t for t, _ in route.pk} if route.pk is not None else set(change.pk_names)
    generated = [p for p in pairs if info.columns[p[1]].generated]
    for s, t in generated:  # computed by the target: compared by verify, never written
        if t in key_cols or s in key_cols:
            raise _fail(route, info, f"key column {t} of {info.label} is a generated column",
                        hint="key the target on columns it stores as written")
        pairs.remove((s, t))
    by_src = dict(pairs)
    if route.pk is not None:
        key = []
        for t, s in route.pk:
            found = info.find(t, ci)
            if found is None or s not in change.data:
                missing = f"target column {t}" if found is None else f"source column {s}"
                raise _fail(route, info, f"primary key {missing} of {info.label} is missing",
                            hint="check targetPk against the source and target tables")
            key.append((s, found))
            if s not in by_src:
                pairs.append((s, found))
                by_src[s] = found
    else:
        key = []
        for s in change.pk_names:
            if s not in by_src:
                raise _fail(route, info, f"primary key column {s} of {source} is not mapped to {info.label}",
                            hint="map it in targetColumns/targetPk")
            key.append((s, by_src[s]))
    src = tuple(s for s, _ in pairs)
    tgt = tuple(t for _, t in pairs)
    types = change.mysql_type or {}
    convs = tuple(converter(family, info.columns[t].type, types.get(s)) for s, t in pairs)
    if exact_digits:  # a value the target would round: refused by name (adapters/rdb/narrowing.py)
        convs = tuple(_guarded(route, info, family, s, t, types.get(s), c, source, database)
                      for (s, t), c in zip(pairs, convs, strict=True))
    relax = tuple(i for i, t in enumerate(tgt) if needs_relaxed(family, info.columns[t].type))
    return Plan(info, src, tgt, convs, tuple(s for s, _ in key), tuple(t for _, t in key), relax, source,
                tuple(lacking))


def _guarded(route: RdbTable, info: TableInfo, family: str, s: str, t: str, mysql_type: str | None,
             conv: Converter | None, source: str, database: str | None) -> Converter | None:
    """``conv``, guarded when target column ``t`` keeps fewer fractional digits than source column
    ``s`` (:mod:`adapters.rdb.narrowing`)."""
    col = info.columns[t]
    schema = info.schema or (database if family == "mysql" else None)
    label = f"{schema}.{info.name}" if schema else info.name
    lost = lost_digits(family, col.type, mysql_type)
    if lost is None:
        return _lossless(info, family, s, t, mysql_type, conv, source, schema, label)
    alter = alter_statement(family, (schema, info.name), t, widened_type(family, col.type, mysql_type), col.nullable)
    kept = f"{type(col.type).__name__.upper()}, {lost[1]} fractional digits"

    def refuse(value: str) -> Rounded:
        return Rounded(f"value {value} of source column {s} of {source} ({mysql_type}) has more fractional digits "
                       f"than target column {t} of {label} keeps ({kept}): it would be rounded",
                       hint=f"widen it: {alter} (restate its DEFAULT, ON UPDATE or UNSIGNED, if it has them), "
                       "then sync again")
    return guard(lost[1], conv, refuse)


#: how a column's type is written in a refusal
_DIALECTS = {"mysql": _my.dialect, "postgresql": _pg.dialect}


def _lossless(info: TableInfo, family: str, s: str, t: str, mysql_type: str | None, conv: Converter | None,
              source: str, schema: str | None, label: str) -> Converter | None:
    """``conv``, guarded when target column ``t`` is of a kind that changes some values of source
    column ``s`` (:mod:`adapters.rdb.lossy`)."""
    col = info.columns[t]
    lost = loss(family, col.type, mysql_type)
    if lost is None:
        return conv
    new_type = lost.fix or suggest_type(family, mysql_type or "")
    collation = getattr(col.type, "collation", None)
    if collation and lost.text:  # the column's collation kept (MODIFY would take the table's)
        new_type += f' COLLATE "{collation}"' if family == "postgresql" else f" COLLATE {collation}"
    alter = alter_statement(family, (schema, info.name), t, new_type, col.nullable)
    kind = col.type.compile(dialect=_DIALECTS[family]()) if family in _DIALECTS else type(col.type).__name__

    def check(v: Any) -> Any:
        if isinstance(v, str) and lost.changes(v):
            raise Rounded(f"value {v!r} of source column {s} of {source} ({mysql_type}) would be changed by target "
                          f"column {t} of {label} ({kind}): {lost.what}",
                          hint=f"give it the source's kind: {alter} (restate its DEFAULT, ON UPDATE or comment, if "
                          "it has them), then sync again")
        return conv(v) if conv is not None else v
    return check
