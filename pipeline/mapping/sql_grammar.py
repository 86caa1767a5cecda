"""The statement-level grammar of the SELECT subset :mod:`pipeline.mapping.select_sql` accepts.

``parse_raw`` turns the text into a :class:`RawQuery` (tables, join equalities, select
items with the columns each reads); names are not resolved here. Anything outside the
subset raises :class:`SqlError` naming the construct and why it is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.mapping.sql_expressions import COMPARE, ColumnUse, ExpressionParser
from pipeline.mapping.sql_tokens import RESERVED, SqlError, unquote

__all__ = ["ColumnUse", "RawItem", "RawJoin", "RawQuery", "RawTable", "SqlError", "parse_raw"]


@dataclass(frozen=True, slots=True)
class RawTable:
    name: str
    alias: str | None
    schema: str | None


@dataclass(frozen=True, slots=True)
class RawJoin:
    table: RawTable
    equalities: tuple[tuple[ColumnUse, ColumnUse], ...]


@dataclass(frozen=True, slots=True)
class RawItem:
    text: str
    alias: str | None
    columns: tuple[ColumnUse, ...]
    simple: ColumnUse | None


@dataclass(frozen=True, slots=True)
class RawQuery:
    main: RawTable
    joins: tuple[RawJoin, ...]
    fields: tuple[RawItem, ...]


_TAIL = {
    "WHERE": "a WHERE clause is not supported (as in canal): rows it filters out would still be "
             "indexed by later changes; filter the initial load with etlCondition instead",
    "GROUP": "GROUP BY is not supported: a document must come from one row of the main table",
    "HAVING": "HAVING is not supported: a document must come from one row of the main table",
    "ORDER": "ORDER BY is not supported (and not needed: each document is written on its own)",
    "LIMIT": "LIMIT is not supported (and not needed: each document is written on its own)",
    "UNION": "UNION is not supported: write one mapping per SELECT",
    "EXCEPT": "EXCEPT is not supported", "INTERSECT": "INTERSECT is not supported",
    "WINDOW": "window clauses are not supported", "FOR": "FOR UPDATE/SHARE is not supported",
    "INTO": "SELECT ... INTO is not supported", "LOCK": "LOCK IN SHARE MODE is not supported",
}
_OTHER_JOINS = {"RIGHT", "INNER", "CROSS", "FULL", "NATURAL", "JOIN", "STRAIGHT_JOIN"}


class _Parser(ExpressionParser):
    """Statement level: select list, FROM, LEFT JOINs and their ON equalities."""

    def query(self) -> RawQuery:
        if self.is_word("WITH"):
            raise self.error("WITH (common table expressions) is not supported")
        if not self.is_word("SELECT"):
            raise self.error("must be a SELECT statement")
        self.take()
        if self.is_word("DISTINCT", "DISTINCTROW", "ALL"):
            raise self.error(f"SELECT {self.tok.upper} is not supported: each document comes from one row")
        items = [self.item()]
        while self.is_op(","):
            self.take()
            items.append(self.item())
        if not self.is_word("FROM"):
            raise self.error("expected FROM <table> after the select list")
        self.take()
        main = self.table()
        joins = []
        while True:
            if self.is_op(","):
                raise self.error("comma joins (FROM a, b) are not supported: use LEFT JOIN b ON a.x = b.y")
            if self.is_word(*_OTHER_JOINS):
                raise self.error(f"only LEFT JOIN is supported (as in canal), not {self.tok.upper} JOIN"
                                 if self.tok.upper != "JOIN" else "only LEFT JOIN is supported, not JOIN")
            if not self.is_word("LEFT"):
                break
            self.take()
            if self.is_word("OUTER"):
                self.take()
            self.expect_word("JOIN")
            table = self.table()
            if self.is_word("USING"):
                raise self.error("JOIN ... USING is not supported: write ON a.col = b.col")
            self.expect_word("ON")
            joins.append(RawJoin(table, tuple(self.on_condition())))
        if self.is_op(";"):
            self.take()
        if self.tok.kind != "end":
            problem = _TAIL.get(self.tok.upper, "unexpected text after the FROM clause")
            raise self.error(problem)
        return RawQuery(main, tuple(joins), tuple(items))

    def item(self) -> RawItem:
        if self.is_op("*") or (self.ahead().text == "." and self.ahead(2).text == "*"):
            raise self.error("SELECT * is not supported: list the fields, each becomes a document field")
        first = self.tok
        expr = self.expr()
        text = self.sql[first.start:self.toks[self.i - 1].end]
        alias = None
        if self.is_word("AS"):
            self.take()
            if self.tok.kind == "string":
                alias = self.take().text[1:-1]
            else:
                alias = self.name("a field name after AS")
        elif self.tok.kind == "quoted" or (self.tok.kind == "word" and self.tok.upper not in RESERVED):
            alias = unquote(self.take())
        return RawItem(text, alias, tuple(expr.columns), expr.simple)

    def table(self) -> RawTable:
        self.subquery_check()
        if self.is_op("("):
            raise self.error("parenthesized table lists are not supported")
        name, schema = self.name("a table name"), None
        if self.is_op("."):
            self.take()
            schema, name = name, self.name("a table name after the schema")
        alias = None
        if self.is_word("AS"):
            self.take()
            alias = self.name("a table alias after AS")
        elif self.tok.kind == "quoted" or (self.tok.kind == "word" and self.tok.upper not in RESERVED):
            alias = unquote(self.take())
        return RawTable(name, alias, schema)

    def on_condition(self) -> list[tuple[ColumnUse, ColumnUse]]:
        pairs = [self.on_equality()]
        while self.is_word("AND"):
            self.take()
            pairs.append(self.on_equality())
        if self.is_word("OR", "XOR") or self.is_op("||"):
            raise self.error("OR in a join condition is not supported: join on column = column AND ...")
        return pairs

    def on_equality(self) -> tuple[ColumnUse, ColumnUse]:
        if self.is_op("(") and self.ahead().upper not in ("SELECT", "WITH"):
            self.take()
            pairs = self.on_condition()
            self.expect_op(")")
            if len(pairs) != 1:
                raise self.error("write join conditions without parentheses: a.x = b.y AND a.z = b.w")
            return pairs[0]
        start = self.tok
        left = self.additive()
        if not self.is_op(*COMPARE) and not self.is_word("IS", "IN", "LIKE", "BETWEEN", "NOT"):
            raise self.error("expected '=' in the join condition")
        op = self.take()
        if op.text != "=":
            raise self.error(f"join conditions must be equalities (a.col = b.col), not '{op.text}'", op)
        right = self.additive()
        text = self.sql[start.start:self.toks[self.i - 1].end]
        if left.simple is None or right.simple is None:
            raise self.error(f"join condition '{text}' must compare two columns (a.col = b.col); "
                             "constants and expressions are not supported", start)
        return left.simple, right.simple


def parse_raw(sql: str) -> RawQuery:
    """Parse ``sql`` into a :class:`RawQuery`, or raise :class:`SqlError`."""
    if not sql.strip():
        raise SqlError("is empty; write SELECT <fields> FROM <table> [LEFT JOIN ...]")
    return _Parser(sql).query()
