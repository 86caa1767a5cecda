"""Tokens of the SELECT subset of ``esMapping.sql``, and a cursor over them for the parsers."""

from __future__ import annotations

import re
from dataclasses import dataclass


class SqlError(ValueError):
    """The SQL is outside what Sluice can keep in sync; the message says what and why."""


@dataclass(frozen=True, slots=True)
class Tok:
    kind: str  # word, quoted, string, number, op, end
    text: str
    start: int
    end: int

    @property
    def upper(self) -> str:
        return self.text.upper() if self.kind == "word" else ""


_TOKEN = re.compile(r"""
    (?P<space>\s+|--[^\n]*|\#[^\n]*|/\*.*?\*/)
  | (?P<quoted>`(?:[^`]|``)*`)
  | (?P<string>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*")
  | (?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
  | (?P<word>[^\W\d]\w*|\$\w*|\d+[^\W\d]\w*)
  | (?P<op><=>|<>|!=|<=|>=|<<|>>|\|\||&&|:=|[-+*/%=<>(),.;~!&|^])
""", re.VERBOSE | re.DOTALL)

#: words that end an expression or a table reference (never taken as an alias)
RESERVED = {
    "SELECT", "FROM", "AS", "ON", "USING", "WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "UNION",
    "LEFT", "RIGHT", "INNER", "OUTER", "CROSS", "FULL", "NATURAL", "JOIN", "STRAIGHT_JOIN",
    "AND", "OR", "XOR", "NOT", "IS", "IN", "LIKE", "BETWEEN", "REGEXP", "RLIKE", "DIV", "MOD",
    "CASE", "WHEN", "THEN", "ELSE", "END", "WINDOW", "FOR", "INTO", "LOCK", "DISTINCT",
    "EXCEPT", "INTERSECT", "PARTITION", "USE", "IGNORE", "FORCE", "WITH", "OVER", "COLLATE",
}


def tokenize(sql: str) -> list[Tok]:
    """Split ``sql`` into tokens (comments and spaces dropped), ending with an ``end`` token."""
    toks, pos = [], 0
    while pos < len(sql):
        m = _TOKEN.match(sql, pos)
        if not m:
            raise SqlError(f"unexpected character {sql[pos]!r} at position {pos + 1}")
        if m.lastgroup != "space":
            toks.append(Tok(m.lastgroup or "", m.group(), m.start(), m.end()))
        pos = m.end()
    toks.append(Tok("end", "", len(sql), len(sql)))
    return toks


def unquote(tok: Tok) -> str:
    """The name a word or a backquoted identifier stands for."""
    return tok.text[1:-1].replace("``", "`") if tok.kind == "quoted" else tok.text


class TokenStream:
    """A cursor over the tokens of one SQL text, with error messages that point into it."""

    def __init__(self, sql: str):
        self.sql, self.toks, self.i = sql, tokenize(sql), 0

    @property
    def tok(self) -> Tok:
        return self.toks[self.i]

    def ahead(self, n: int = 1) -> Tok:
        return self.toks[min(self.i + n, len(self.toks) - 1)]

    def take(self) -> Tok:
        tok = self.toks[self.i]
        self.i = min(self.i + 1, len(self.toks) - 1)
        return tok

    def is_word(self, *words: str) -> bool:
        return self.tok.upper in words

    def is_op(self, *ops: str) -> bool:
        return self.tok.kind == "op" and self.tok.text in ops

    def error(self, problem: str, tok: Tok | None = None) -> SqlError:
        tok = tok or self.tok
        snippet = " ".join(self.sql[tok.start:tok.start + 40].split())[:30]
        near = f"near '{snippet}'" if tok.kind != "end" else "at the end"
        return SqlError(f"{problem} ({near})")

    def expect_op(self, op: str) -> None:
        if not self.is_op(op):
            raise self.error(f"expected '{op}'")
        self.take()

    def expect_word(self, word: str) -> None:
        if not self.is_word(word):
            raise self.error(f"expected {word}")
        self.take()

    def name(self, what: str) -> str:
        tok = self.tok
        if tok.kind == "quoted" or (tok.kind == "word" and tok.upper not in RESERVED):
            self.take()
            return unquote(tok)
        raise self.error(f"expected {what}")

    def subquery_check(self) -> None:
        if self.is_op("(") and self.ahead().upper in ("SELECT", "WITH"):
            raise self.error("subqueries are not supported: join the table with LEFT JOIN ... ON")

