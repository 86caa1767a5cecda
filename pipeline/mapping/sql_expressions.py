"""Expressions of the SELECT subset: what they read, and whether they are one bare column.

Precedence climbing from OR down to primaries; every construct that could read from another
row (subqueries, aggregates, window functions) is refused here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.mapping.sql_tokens import RESERVED, TokenStream, unquote

#: functions that combine several rows (refused: a document comes from one row)
AGGREGATES = {"COUNT", "SUM", "AVG", "MIN", "MAX", "GROUP_CONCAT", "JSON_ARRAYAGG", "JSON_OBJECTAGG",
              "BIT_AND", "BIT_OR", "BIT_XOR", "STD", "STDDEV", "STDDEV_POP", "STDDEV_SAMP",
              "VARIANCE", "VAR_POP", "VAR_SAMP", "ANY_VALUE"}
COMPARE = {"=", "<=>", "<>", "!=", "<", ">", "<=", ">="}


@dataclass(frozen=True, slots=True)
class ColumnUse:
    """A column as written: ``alias`` is None when the SQL does not qualify it."""

    alias: str | None
    column: str


@dataclass
class Expr:
    """What an expression reads; ``simple`` is set when it is one bare column."""

    columns: list[ColumnUse] = field(default_factory=list)
    simple: ColumnUse | None = None


class ExpressionParser(TokenStream):
    """Parses expressions into :class:`Expr` (columns read, bare column or not)."""

    def expr(self) -> Expr:
        left = self.conjunction()
        while self.is_word("OR", "XOR") or self.is_op("||"):
            self.take()
            left = combine(left, self.conjunction())
        return left

    def conjunction(self) -> Expr:
        left = self.negation()
        while self.is_word("AND") or self.is_op("&&"):
            self.take()
            left = combine(left, self.negation())
        return left

    def negation(self) -> Expr:
        if self.is_word("NOT"):
            self.take()
            return combine(self.negation())
        return self.comparison()

    def comparison(self) -> Expr:
        left = self.additive()
        while True:
            if self.is_op(*COMPARE):
                self.take()
                left = combine(left, self.additive())
            elif self.is_word("IS"):
                self.take()
                if self.is_word("NOT"):
                    self.take()
                if not self.is_word("NULL", "TRUE", "FALSE", "UNKNOWN"):
                    raise self.error("expected NULL, TRUE or FALSE after IS")
                self.take()
                left = combine(left)
            elif self.is_word("NOT") and self.ahead().upper in ("IN", "LIKE", "BETWEEN", "REGEXP", "RLIKE"):
                self.take()
            elif self.is_word("IN"):
                self.take()
                self.subquery_check()
                left = combine(left, *self.arguments())
            elif self.is_word("LIKE", "REGEXP", "RLIKE"):
                self.take()
                left = combine(left, self.additive())
            elif self.is_word("BETWEEN"):
                self.take()
                low = self.additive()
                self.expect_word("AND")
                left = combine(left, low, self.additive())
            else:
                return left

    def additive(self) -> Expr:
        left = self.multiplicative()
        while self.is_op("+", "-", "|", "&", "^", "<<", ">>"):
            self.take()
            left = combine(left, self.multiplicative())
        return left

    def multiplicative(self) -> Expr:
        left = self.unary()
        while self.is_op("*", "/", "%") or self.is_word("DIV", "MOD"):
            self.take()
            left = combine(left, self.unary())
        return left

    def unary(self) -> Expr:
        if self.is_op("-", "+", "~", "!") or self.is_word("BINARY"):
            self.take()
            return combine(self.unary())
        return self.primary()

    def primary(self) -> Expr:
        tok = self.tok
        if tok.kind in ("string", "number") or tok.upper in ("NULL", "TRUE", "FALSE"):
            self.take()
            return Expr()
        if self.is_op("("):
            self.subquery_check()
            self.take()
            inner = self.expr()
            self.expect_op(")")
            return combine(inner)
        if tok.upper == "CASE":
            return self.case()
        if tok.upper == "EXISTS":
            raise self.error("subqueries (EXISTS) are not supported")
        if tok.upper == "INTERVAL":
            self.take()
            value = self.additive()
            self.name("an interval unit (DAY, HOUR, ...)")
            return combine(value)
        if tok.kind == "word" and self.ahead().text == "(" and tok.upper not in RESERVED:
            return self.call()
        if tok.kind == "quoted" or (tok.kind == "word" and tok.upper not in RESERVED):
            first = unquote(self.take())
            if not self.is_op("."):
                use = ColumnUse(None, first)
                return Expr([use], use)
            self.take()
            column = self.name("a column name after '.'")
            if self.is_op("."):
                raise self.error("write columns as alias.column (give the table an alias in FROM)")
            use = ColumnUse(first, column)
            return Expr([use], use)
        raise self.error("expected a column or an expression")

    def call(self) -> Expr:
        name_tok = self.take()
        fname = name_tok.upper
        if fname in AGGREGATES:
            raise self.error(f"aggregate function {fname}() is not supported: a document must come "
                             "from one row of the main table", name_tok)
        self.expect_op("(")
        if self.is_word("DISTINCT"):
            raise self.error("DISTINCT in a function call is not supported")
        args: list[Expr] = []
        if not self.is_op(")"):
            self.subquery_check()
            args.append(self.expr())
            if fname in ("CAST", "CONVERT") and (self.is_word("AS", "USING") or self.is_op(",")):
                self.skip_type()
            while self.is_op(","):
                self.take()
                args.append(self.expr())
        self.expect_op(")")
        if self.is_word("OVER"):
            raise self.error("window functions (OVER) are not supported")
        return combine(*args)

    def skip_type(self) -> None:
        """Skip the type of CAST(x AS type) / CONVERT(x, type) / CONVERT(x USING cs)."""
        self.take()
        depth = 0
        while not (depth == 0 and self.is_op(")")):
            if self.tok.kind == "end":
                raise self.error("expected ')'")
            depth += 1 if self.is_op("(") else -1 if self.is_op(")") else 0
            self.take()

    def arguments(self) -> list[Expr]:
        self.expect_op("(")
        args = [self.expr()]
        while self.is_op(","):
            self.take()
            args.append(self.expr())
        self.expect_op(")")
        return args

    def case(self) -> Expr:
        self.take()
        parts = [] if self.is_word("WHEN") else [self.expr()]
        if not self.is_word("WHEN"):
            raise self.error("expected WHEN in CASE")
        while self.is_word("WHEN"):
            self.take()
            parts.append(self.expr())
            self.expect_word("THEN")
            parts.append(self.expr())
        if self.is_word("ELSE"):
            self.take()
            parts.append(self.expr())
        self.expect_word("END")
        return combine(*parts)


def combine(*parts: Expr) -> Expr:
    """An expression built from ``parts``: reads their columns, is never a bare column."""
    return Expr([c for p in parts for c in p.columns], None)


