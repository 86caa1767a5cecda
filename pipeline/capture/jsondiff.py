"""MySQL partial JSON updates (``binlog_row_value_options=PARTIAL_JSON``), applied exactly.

A ``PARTIAL_UPDATE_ROWS_EVENT`` logs, for a JSON column an UPDATE changed with ``JSON_SET``,
``JSON_REPLACE`` or ``JSON_REMOVE``, the changes instead of the new document: a 4-byte length and
then per change an operation (0 REPLACE, 1 INSERT, 2 REMOVE), a JSON path and (not for REMOVE) the
new value in MySQL's binary JSON. Capture applies them to the before image's document (the row
image is FULL, so the before image holds it) and stores the resulting whole document, as a FULL
after image would have carried it: same text, keys in MySQL's order (shorter keys first, then by
bytes). A change that cannot be applied exactly (a path that is not there) stops capture by name.
"""

from __future__ import annotations

import json
import re
from typing import Any

from sluice_common.errors import SourceError

from .decoder import lenenc
from .jsontext import loads, parse, render

REPLACE, INSERT, REMOVE = 0, 1, 2
_LEG = re.compile(r'\.(?:"((?:[^"\\]|\\.)*)"|([A-Za-z_$][\w$]*))|\[(\d+)\]')


class DiffError(ValueError):
    """A JSON diff that is malformed or does not fit its document."""


def parse_diffs(data: bytes) -> list[tuple[int, str, Any]]:
    """(operation, path, value) of one column's diff vector (without its 4-byte length)."""
    out, pos = [], 0
    while pos < len(data):
        op = data[pos]
        if op > REMOVE:
            raise DiffError(f"unknown JSON diff operation {op}")
        n, pos = lenenc(data, pos + 1)
        path = data[pos:pos + n].decode("utf-8")
        pos += n
        value = None
        if op != REMOVE:
            n, pos = lenenc(data, pos)
            raw = data[pos:pos + n]
            if len(raw) < n or not raw:
                raise DiffError("truncated JSON diff value")
            value = parse(raw)
            pos += n
        out.append((op, path, value))
    return out


def _legs(path: str) -> list[str | int]:
    if not path.startswith("$"):
        raise DiffError(f"JSON path {path!r} does not start with $")
    legs: list[str | int] = []
    pos = 1
    while pos < len(path):
        m = _LEG.match(path, pos)
        if m is None:
            raise DiffError(f"JSON path {path!r} has a leg capture cannot read at {pos}")
        if m.group(3) is not None:
            legs.append(int(m.group(3)))
        elif m.group(1) is not None:
            legs.append(json.loads(f'"{m.group(1)}"'))
        else:
            legs.append(m.group(2))
        pos = m.end()
    return legs


def _apply(doc: Any, op: int, path: str, value: Any) -> Any:
    legs = _legs(path)
    if not legs:
        if op != REPLACE:
            raise DiffError(f"{('REPLACE', 'INSERT', 'REMOVE')[op]} of the whole document")
        return value
    parent = doc
    for leg in legs[:-1]:
        try:
            parent = parent[leg]
        except (KeyError, IndexError, TypeError):
            raise DiffError(f"path {path} is not in the document") from None
    last = legs[-1]
    if isinstance(last, int) != isinstance(parent, list):
        raise DiffError(f"path {path} does not fit the document's {type(parent).__name__}")
    if op == REPLACE:
        if (isinstance(parent, list) and last >= len(parent)) or (isinstance(parent, dict) and last not in parent):
            raise DiffError(f"REPLACE at {path}, which the document does not have")
        parent[last] = value
    elif op == INSERT:
        if isinstance(parent, list):
            parent.insert(min(last, len(parent)), value)
        else:
            if last in parent:
                raise DiffError(f"INSERT at {path}, which the document has already")
            parent[last] = value
    else:
        try:
            del parent[last]
        except (KeyError, IndexError):
            raise DiffError(f"REMOVE at {path}, which the document does not have") from None
    return doc


def _mysql_order(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _mysql_order(v[k]) for k in sorted(v, key=lambda k: (len(k.encode()), k.encode()))}
    if isinstance(v, list):
        return [_mysql_order(x) for x in v]
    return v


def apply_diffs(before: str | None, data: bytes, where: str, column: str) -> str:
    """The column's new document text: ``before`` (the before image's text) with the diffs applied."""
    try:
        if before is None:
            raise DiffError("the before image's value is NULL")
        doc = loads(before)
        for op, path, value in parse_diffs(data):
            doc = _apply(doc, op, path, value)
    except (DiffError, ValueError) as e:
        raise SourceError(f"{where}: the partial JSON update of column {column} cannot be applied exactly: {e}",
                          hint="set binlog_row_value_options='' on the source (SET GLOBAL and in my.cnf) so the "
                          "binlog carries whole documents, then repair the table (sluice repair)") from None
    return render(_mysql_order(doc))
