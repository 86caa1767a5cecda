"""MySQL/MariaDB DDL statement syntax that both the job and the RDB adapter read.

The job decides from a statement's text whether it must read something from the source before
the DDL is replayed (:mod:`pipeline.job.definitions`: the table a ``CREATE TABLE ... LIKE`` of
another database copies), and the RDB adapter replays it (adapters/rdb/like.py,
adapters/rdb/dbsequence.py): both parse the same statement, with the rules written once here.

* :data:`IDENT`: an identifier, backquoted (with doubled backquotes) or bare;
* :func:`statement_start`: where a statement's text starts after whitespace and comments (a
  ``/*! ... */`` executable comment is text, not a comment);
* :func:`unquote`: an identifier's name;
* :func:`like_source`: the table a ``CREATE TABLE ... LIKE`` copies.
"""

from __future__ import annotations

import re

IDENT = r"(?:`(?:[^`]|``)+`|[\w$]+)"
_NAME = rf"({IDENT})(?:\s*\.\s*({IDENT}))?"
_LEAD = re.compile(r"\A(?:\s+|/\*(?!!).*?\*/|#[^\n]*\n?|--\s[^\n]*\n?)*", re.S)
_LIKE = re.compile(rf"CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMPORARY\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?{_NAME}\s*"
                   rf"(\(\s*)?LIKE\s+{_NAME}\s*(?(3)\))\s*;?\s*\Z", re.I | re.S)


def statement_start(sql: str) -> int:
    """The offset of the statement's first word (leading whitespace and comments skipped)."""
    return _LEAD.match(sql).end()


def unquote(name: str) -> str:
    """The name an identifier spells (backquotes removed, doubled backquotes made single)."""
    return name[1:-1].replace("``", "`") if name.startswith("`") else name


def like_source(sql: str) -> tuple[str | None, str, int, int] | None:
    """``(database or None, table, start, end)`` of the table a ``CREATE TABLE ... LIKE`` copies
    (``start:end``: where the statement names it), or None for any other statement."""
    m = _LIKE.match(sql, statement_start(sql))
    if m is None:
        return None
    if m.group(5) is not None:
        return unquote(m.group(4)), unquote(m.group(5)), m.start(4), m.end(5)
    return None, unquote(m.group(4)), m.start(4), m.end(4)
