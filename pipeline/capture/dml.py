"""Dml records in canal's flatMessage shape (plus gtid, logfile, logpos).

Key order follows canal's ``FlatMessage``: id, database, table, pkNames, isDdl, type, es,
ts, sql, sqlType, mysqlType, data, old; then ours: gtid, logfile, logpos. The store adds
batchId and seq.
"""

from __future__ import annotations

import re
from typing import Any

from .rowcodec import TableCodec

_IDENT = r"(?:`(?:[^`]|``)+`|[\w$]+)"
_NAME = rf"({_IDENT})(?:\s*\.\s*({_IDENT}))?"
_DDL_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("CREATE", re.compile(rf"^CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMPORARY\s+)?TABLE\s+"
                          rf"(?:IF\s+NOT\s+EXISTS\s+)?{_NAME}", re.I)),
    ("ALTER", re.compile(rf"^ALTER\s+(?:ONLINE\s+|IGNORE\s+)*TABLE\s+(?:IF\s+EXISTS\s+)?{_NAME}", re.I)),
    ("ERASE", re.compile(rf"^DROP\s+(?:TEMPORARY\s+)?TABLE\s+(?:IF\s+EXISTS\s+)?(?:/\*.*?\*/\s*)?{_NAME}", re.I)),
    ("RENAME", re.compile(rf"^RENAME\s+TABLES?\s+{_NAME}", re.I)),
    ("TRUNCATE", re.compile(rf"^TRUNCATE\s+(?:TABLE\s+)?{_NAME}", re.I)),
    ("CINDEX", re.compile(rf"^CREATE\s+(?:OR\s+REPLACE\s+)?(?:UNIQUE\s+|FULLTEXT\s+|SPATIAL\s+)?INDEX\s+"
                          rf"(?:IF\s+NOT\s+EXISTS\s+)?{_IDENT}\s+(?:USING\s+\w+\s+)?ON\s+{_NAME}", re.I)),
    ("DINDEX", re.compile(rf"^DROP\s+INDEX\s+(?:IF\s+EXISTS\s+)?{_IDENT}\s+ON\s+{_NAME}", re.I)),
]
_DB_DDL = re.compile(rf"^(?:CREATE|DROP|ALTER)\s+(?:DATABASE|SCHEMA)\s+(?:IF\s+(?:NOT\s+)?EXISTS\s+)?({_IDENT})", re.I)
_COMMENTS = re.compile(r"/\*(?!!).*?\*/|^\s*#[^\n]*$|^\s*--\s[^\n]*$", re.S | re.M)
_NON_DDL = re.compile(r"^(?:INSERT|UPDATE|DELETE|REPLACE|LOAD|SAVEPOINT|ROLLBACK|RELEASE|XA|SET|DO|CALL)\b",
                      re.I)


def _unquote(name: str | None) -> str | None:
    if name is None:
        return None
    return name[1:-1].replace("``", "`") if name.startswith("`") else name


def classify_ddl(sql: str, default_db: str) -> tuple[str, str, str, bool]:
    """(type, database, table, isDdl) of a statement outside a transaction, canal-style.

    Unknown statements are ``QUERY``; database-level DDL has an empty table.
    """
    text = _COMMENTS.sub(" ", sql).strip().lstrip("(").strip()
    for kind, pattern in _DDL_PATTERNS:
        m = pattern.match(text)
        if m:
            first, second = _unquote(m.group(1)), _unquote(m.group(2))
            if second is not None:
                return kind, first or "", second, True
            return kind, default_db, first or "", True
    m = _DB_DDL.match(text)
    if m:
        return "QUERY", _unquote(m.group(1)) or "", "", True
    return "QUERY", default_db, "", not bool(_NON_DDL.match(text))


def rows_records(kind: str, codec: TableCodec, rows: list[Any], sql: str, es: int, ts: int,
                 gtid: str | None, logfile: str, logpos: int, rec_id: int) -> dict[str, Any]:
    """One Dml for one rows event. UPDATE rows are (before, after) pairs."""
    old = None
    if kind == "UPDATE":
        data = []
        old = []
        for before, after in rows:
            data.append(after)
            old.append({k: v for k, v in before.items() if k not in after or after[k] != v})
    else:
        data = rows
    return {"id": rec_id, "database": codec.database, "table": codec.table, "pkNames": list(codec.pk_names),
            "isDdl": False, "type": kind, "es": es, "ts": ts, "sql": sql, "sqlType": codec.sql_type,
            "mysqlType": codec.mysql_type, "data": data, "old": old, "gtid": gtid, "logfile": logfile,
            "logpos": logpos}


def statement_record(kind: str, database: str, table: str, is_ddl: bool, sql: str, es: int, ts: int,
                     gtid: str | None, logfile: str, logpos: int, rec_id: int) -> dict[str, Any]:
    """A DDL (or other statement) Dml: no rows, ``sql`` holds the statement."""
    return {"id": rec_id, "database": database, "table": table, "pkNames": None, "isDdl": is_ddl,
            "type": kind, "es": es, "ts": ts, "sql": sql, "sqlType": None, "mysqlType": None,
            "data": None if is_ddl else [], "old": None, "gtid": gtid, "logfile": logfile, "logpos": logpos}
