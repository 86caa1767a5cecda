"""Which tables a statement-format DML statement writes.

A statement the binlog carries as SQL text (a session with ``binlog_format=STATEMENT``, a MIXED
server's unsafe-free statements, ``LOAD DATA``) does not say which rows it changed, so no group
may apply it; it must stop the groups that map a table it writes, and no other. This module
finds those tables from the text: ``INSERT``/``REPLACE ... INTO t``, ``UPDATE t1 [JOIN t2 ...]
SET``, ``DELETE FROM t``, ``DELETE t1, t2 FROM ...``/``DELETE FROM t1 USING ...``, ``LOAD DATA
... INTO TABLE t``. For multi-table statements every table named before ``SET`` / in the delete
list counts (a joined table that is only read counts too: never too few). Any other statement
that may write (``WITH ... UPDATE``, ``DO f()``/``SELECT f()`` logged for a function that wrote,
anything unknown) writes "some table" of every database it names and of its default database:
:func:`statement_writes` returns those databases with an empty table name.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(r"""
    (?P<bq>`(?:[^`]|``)*`)
  | (?P<sq>'(?:[^'\\]|\\.|'')*')
  | (?P<dq>"(?:[^"\\]|\\.|"")*")
  | (?P<comment>/\*(?!!).*?\*/|--[ \t][^\n]*|\#[^\n]*)
  | (?P<word>[A-Za-z0-9_$\u0080-\U0010FFFF]+)
  | (?P<other>\s+|.)
""", re.S | re.X)
DML_HEADS = frozenset({"INSERT", "REPLACE", "UPDATE", "DELETE", "LOAD"})
_MODIFIERS = frozenset({"LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY", "IGNORE", "QUICK", "CONCURRENT", "LOCAL"})
_JOIN_WORDS = frozenset({"JOIN", "STRAIGHT_JOIN"})
_ENDS = frozenset({"WHERE", "ORDER", "LIMIT", "RETURNING", "ON", "USING", "SET", "PARTITION", "VALUES", "VALUE",
                   "SELECT", "AS", "WITH", "FOR"})

Name = tuple[str | None, str]   # (database or None for the default one, table)


def _tokens(sql: str) -> list[tuple[str, str]]:
    out = []
    for m in _TOKEN.finditer(sql):
        kind = m.lastgroup
        if kind == "comment" or (kind == "other" and m.group().isspace()):
            continue
        out.append((kind or "other", m.group()))
    return out


def _ident(tok: tuple[str, str]) -> str | None:
    kind, text = tok
    if kind == "bq":
        return text[1:-1].replace("``", "`")
    if kind == "word":
        return text
    return None


def is_dml(sql: str) -> bool:
    """True if the statement (comments aside) starts with a DML keyword."""
    toks = _tokens(sql.lstrip("( "))
    return bool(toks) and toks[0][0] == "word" and toks[0][1].upper() in DML_HEADS


def _name_at(toks: list, i: int) -> tuple[Name | None, int]:
    """A (possibly qualified) table name at ``i``: (name, index after it)."""
    if i >= len(toks):
        return None, i
    first = _ident(toks[i])
    if first is None:
        return None, i
    if i + 2 < len(toks) and toks[i + 1] == ("other", ".") and _ident(toks[i + 2]) is not None:
        return (first, _ident(toks[i + 2]) or ""), i + 3
    return (None, first), i + 1


def _table_list(toks: list, i: int, stop: set[str]) -> list[Name]:
    """Table references from ``i`` until a word of ``stop`` at depth 0 (joins, commas, aliases)."""
    names: list[Name] = []
    depth, expect = 0, True
    while i < len(toks):
        kind, text = toks[i]
        up = text.upper() if kind == "word" else text
        if kind == "other" and text == "(":
            depth += 1
        elif kind == "other" and text == ")":
            depth -= 1
        elif depth == 0:
            if kind == "word" and up in stop:
                break
            if kind == "other" and text == ",":
                expect = True
            elif kind == "word" and up in _JOIN_WORDS:
                expect = True
            elif expect and kind in ("word", "bq") and up not in ("LEFT", "RIGHT", "INNER", "OUTER", "CROSS",
                                                                 "NATURAL", "LATERAL"):
                name, i = _name_at(toks, i)
                if name is not None:
                    names.append(name)
                expect = False
                continue
        i += 1
    return names


def written_tables(sql: str) -> list[Name] | None:
    """The tables a DML statement writes (see the module docstring); None when they cannot be told."""
    toks = _tokens(sql.strip().lstrip("("))
    if not toks or toks[0][0] != "word":
        return None
    head = toks[0][1].upper()
    i = 1
    while i < len(toks) and toks[i][0] == "word" and toks[i][1].upper() in _MODIFIERS:
        i += 1
    try:
        if head in ("INSERT", "REPLACE"):
            if i < len(toks) and toks[i][1].upper() == "INTO":
                i += 1
            name, _ = _name_at(toks, i)
            return [name] if name else None
        if head == "UPDATE":
            names = _table_list(toks, i, {"SET"})
            return names or None
        if head == "DELETE":
            if i < len(toks) and toks[i][1].upper() == "FROM":
                targets = _table_list(toks, i + 1, _ENDS)
                return targets or None
            # DELETE t1, t2 FROM <refs>: the targets may be aliases; count every table of the refs too
            targets = _table_list(toks, i, {"FROM"})
            at = next((j for j in range(i, len(toks)) if toks[j][1].upper() == "FROM"), None)
            refs = _table_list(toks, at + 1, _ENDS - {"ON", "USING"} | {"WHERE"}) if at is not None else []
            return (targets + refs) or None
        if head == "LOAD":
            at = next((j for j in range(i, len(toks) - 1)
                       if toks[j][1].upper() == "INTO" and toks[j + 1][1].upper() == "TABLE"), None)
            if at is None:
                return None
            name, _ = _name_at(toks, at + 2)
            return [name] if name else None
    except (IndexError, TypeError):
        return None
    return None


#: statements inside a transaction that write no table rows
HARMLESS = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE", "XA ", "SET ", "CREATE TEMPORARY",
            "DROP TEMPORARY", "USE ")


def statement_writes(sql: str, default_db: str) -> list[tuple[str, str]]:
    """``[(database, table)]`` a statement-format statement may write (table ``""``: some table of
    that database, which one unknown); ``[]`` for statements that write no rows."""
    text = _COMMENT_HEAD.sub("", sql).lstrip("( \t\r\n")
    if text[:16].upper().startswith(HARMLESS):
        return []
    names = written_tables(text) if is_dml(text) else None
    if names is not None:
        return list(dict.fromkeys((db or default_db, t) for db, t in names))
    dbs = [default_db] if default_db else []
    toks = _tokens(text)
    for i in range(len(toks) - 2):
        if toks[i + 1] == ("other", ".") and toks[i][0] in ("word", "bq") and toks[i + 2][0] in ("word", "bq"):
            dbs.append(_ident(toks[i]) or "")
    return [(db, "") for db in dict.fromkeys(d for d in dbs if d)]


_COMMENT_HEAD = re.compile(r"^(?:\s*(?:/\*(?!!).*?\*/|#[^\n]*\n|--\s[^\n]*\n))*", re.S)
