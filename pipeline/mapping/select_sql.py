"""A small parser for the SELECT of an ``esMapping.sql``, and the structure it yields.

It accepts what canal's ES adapter can keep in sync: one main table, LEFT JOINs whose ON
conditions are ``a.col = b.col`` equalities joined with AND, and a select list of columns
and simple expressions (functions such as ``concat``/``ifnull``, CASE, arithmetic), each
with a name. It refuses, with a message saying why, what cannot be kept in sync by
re-querying one row: ``*``, subqueries, aggregates, GROUP BY, WHERE, ORDER BY, LIMIT,
UNION, DISTINCT, non-LEFT joins, non-equality or constant join conditions.

The result tells the ES adapter which document field reads which column of which table.
Tokens and grammar live in :mod:`pipeline.mapping.sql_grammar`.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.mapping.sql_grammar import ColumnUse, RawItem, RawJoin, SqlError, parse_raw

__all__ = ["ColumnRef", "JoinKey", "JoinedTable", "OutputField", "SelectQuery", "SqlError",
           "TableRef", "parse_select"]


@dataclass(frozen=True, slots=True)
class ColumnRef:
    """A source column, named by the alias of the table it belongs to."""

    alias: str
    column: str

    def __str__(self) -> str:
        return f"{self.alias}.{self.column}"


@dataclass(frozen=True, slots=True)
class TableRef:
    """A table of the query: ``schema`` is None when the SQL does not name one."""

    name: str
    alias: str
    schema: str | None = None

    @property
    def key(self) -> str:
        """``schema.table``, or ``*.table`` when the SQL names no schema."""
        return f"{self.schema or '*'}.{self.name}"


@dataclass(frozen=True, slots=True)
class JoinKey:
    """One ``ON`` equality: ``column`` of the joined table = ``other`` (an earlier table)."""

    column: str
    other: ColumnRef


@dataclass(frozen=True, slots=True)
class JoinedTable:
    """A LEFT JOINed table and the equalities that join it."""

    table: TableRef
    keys: tuple[JoinKey, ...]


@dataclass(frozen=True, slots=True)
class OutputField:
    """A select-list item: the document field ``name``, its SQL text and what it reads."""

    name: str
    expression: str
    columns: tuple[ColumnRef, ...]
    #: True when the expression is one bare column (its value is that column's value)
    is_simple: bool

    def reads(self, alias: str, column: str | None = None) -> bool:
        """Whether this field reads (this column of) the table with this alias."""
        return any(c.alias == alias and (column is None or c.column == column) for c in self.columns)


@dataclass(frozen=True, slots=True)
class SelectQuery:
    """The parsed ``esMapping.sql``."""

    sql: str
    main: TableRef
    joins: tuple[JoinedTable, ...]
    fields: tuple[OutputField, ...]

    @property
    def tables(self) -> tuple[TableRef, ...]:
        """The main table, then the joined ones, in query order."""
        return (self.main, *(j.table for j in self.joins))

    def table(self, alias: str) -> TableRef | None:
        """The table with this alias, if any."""
        return next((t for t in self.tables if t.alias == alias), None)

    def field(self, name: str) -> OutputField | None:
        """The output field with this name, if any."""
        return next((f for f in self.fields if f.name == name), None)

    @property
    def field_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    def fields_reading(self, alias: str, column: str | None = None) -> tuple[OutputField, ...]:
        """The fields whose value depends on (this column of) the table ``alias``."""
        return tuple(f for f in self.fields if f.reads(alias, column))

    def columns_of(self, alias: str) -> tuple[str, ...]:
        """Every column of table ``alias`` the query reads (fields and join keys), in order."""
        seen: dict[str, None] = {}
        for f in self.fields:
            seen.update((c.column, None) for c in f.columns if c.alias == alias)
        for j in self.joins:
            for k in j.keys:
                if j.table.alias == alias:
                    seen[k.column] = None
                if k.other.alias == alias:
                    seen[k.other.column] = None
        return tuple(seen)


def parse_select(sql: str) -> SelectQuery:
    """Parse and check an ES mapping SELECT; raise :class:`SqlError` saying what is wrong."""
    raw = parse_raw(sql)
    main = TableRef(raw.main.name, raw.main.alias or raw.main.name, raw.main.schema)
    tables = [main]
    joins = []
    for rj in raw.joins:
        table = TableRef(rj.table.name, rj.table.alias or rj.table.name, rj.table.schema)
        if any(t.alias == table.alias for t in tables):
            raise SqlError(f"table alias '{table.alias}' is used twice; give each table its own alias")
        tables.append(table)
        joins.append(JoinedTable(table, _join_keys(rj, table, tables)))
    fields = tuple(_field(item, tables) for item in raw.fields)
    names = [f.name for f in fields]
    for name in names:
        if names.count(name) > 1:
            raise SqlError(f"field '{name}' is selected twice; give one of them another name with AS")
    query = SelectQuery(sql, main, tuple(joins), fields)
    _check_join_columns_selected(query)
    return query


def _resolve(use: ColumnUse, tables: list[TableRef]) -> ColumnRef:
    if use.alias is None:
        if len(tables) > 1:
            raise SqlError(f"column '{use.column}' needs a table alias (for example "
                           f"{tables[0].alias}.{use.column}) because the query reads several tables")
        return ColumnRef(tables[0].alias, use.column)
    if not any(t.alias == use.alias for t in tables):
        known = ", ".join(t.alias for t in tables)
        raise SqlError(f"'{use.alias}.{use.column}' names an unknown table alias '{use.alias}' "
                       f"(known here: {known})")
    return ColumnRef(use.alias, use.column)


def _join_keys(rj: RawJoin, table: TableRef, tables: list[TableRef]) -> tuple[JoinKey, ...]:
    keys = []
    for left_use, right_use in rj.equalities:
        left, right = _resolve(left_use, tables), _resolve(right_use, tables)
        if left.alias == table.alias and right.alias != table.alias:
            keys.append(JoinKey(left.column, right))
        elif right.alias == table.alias and left.alias != table.alias:
            keys.append(JoinKey(right.column, left))
        else:
            raise SqlError(f"join condition {left} = {right} must compare a column of '{table.alias}' "
                           f"with a column of a table joined before it")
    return tuple(keys)


def _field(item: RawItem, tables: list[TableRef]) -> OutputField:
    columns = tuple(dict.fromkeys(_resolve(u, tables) for u in item.columns))
    name = item.alias
    if name is None:
        if item.simple is None:
            raise SqlError(f"expression {item.text} needs a field name: add AS <name>")
        name = item.simple.column
    return OutputField(name, item.text, columns, item.simple is not None)


def _check_join_columns_selected(query: SelectQuery) -> None:
    """canal's rule: one side of every join equality must be a selected (plain) field.

    When a joined row changes, the adapter finds the documents to update by that field.
    """
    simple = {f.columns[0] for f in query.fields if f.is_simple}
    for j in query.joins:
        for k in j.keys:
            mine = ColumnRef(j.table.alias, k.column)
            if mine not in simple and k.other not in simple:
                raise SqlError(f"join condition {mine} = {k.other}: select {k.other} (or {mine}) as a "
                               f"field; the adapter finds the documents to update through it")

