"""Dml records in canal's flatMessage shape (plus gtid, logfile, logpos).

Key order follows canal's ``FlatMessage``: id, database, table, pkNames, isDdl, type, es,
ts, sql, sqlType, mysqlType, data, old; then ours: gtid, logfile, logpos, and ``partial`` on a
record whose row images lack columns (a session's ``binlog_row_image``). The store adds
batchId and seq.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .rowcodec import TableCodec
from .statusvars import NONE as NO_SESSION
from .statusvars import Session

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


class _NoCodec:
    database = table = ""
    pk_names: tuple[str, ...] = ()
    sql_type: dict[str, int] = {}
    mysql_type: dict[str, str] = {}


_NO_CODEC: Any = _NoCodec()


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
                     gtid: str | None, logfile: str, logpos: int, rec_id: int,
                     session: Session = NO_SESSION) -> dict[str, Any]:
    """A DDL (or other statement) Dml: no rows, ``sql`` holds the statement; ``timeZone`` and
    ``usec`` (the session's zone, the start time's microseconds) when its event has them, and
    ``sessionRead`` when its status variables were read to their end (statusvars.py)."""
    rec = {"id": rec_id, "database": database, "table": table, "pkNames": None, "isDdl": is_ddl,
           "type": kind, "es": es, "ts": ts, "sql": sql, "sqlType": None, "mysqlType": None,
           "data": None if is_ddl else [], "old": None, "gtid": gtid, "logfile": logfile, "logpos": logpos}
    if session.time_zone is not None:
        rec["timeZone"] = session.time_zone
    if session.usec is not None:
        rec["usec"] = session.usec
    if session.whole:  # every status variable read: no ``timeZone`` means the statement used none
        rec["sessionRead"] = True
    return rec


# ---- encoded records: what the batcher hands to the store (CaptureLog.append_lines) ----------

def json_text(value: Any) -> bytes:
    """Compact JSON as the records hold it."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


_j = json_text


def table_json(codec: TableCodec) -> tuple[bytes, bytes]:
    """The encoded record parts that depend only on the table layout (cached on the codec):
    ``"database":..,"table":..,"pkNames":[..]`` and ``"sqlType":{..},"mysqlType":{..}``."""
    parts = codec.json_parts
    if not parts:
        parts.append(b'"database":%s,"table":%s,"pkNames":%s' % (_j(codec.database), _j(codec.table),
                                                                  _j(list(codec.pk_names))))
        parts.append(b'"sqlType":%s,"mysqlType":%s' % (_j(codec.sql_type), _j(codec.mysql_type)))
    return parts[0], parts[1]


def rows_json(kind: str, rows: list[Any]) -> tuple[bytes, bytes | None]:
    """``data`` and ``old`` JSON of Python-decoded rows (UPDATE rows are (before, after) pairs)."""
    rec = rows_records(kind, _NO_CODEC, rows, "", 0, 0, None, "", 0, 0)
    return _j(rec["data"]), (_j(rec["old"]) if rec["old"] is not None else None)


def partial_json(before: list[str], after: list[str], unknown: list[str] | None = None) -> bytes:
    """The ``partial`` member of a record whose row images lack columns: the columns each has
    (``after`` is the one image of an INSERT/DELETE); ``unknown``: columns the UPDATE changed to a
    value the binlog does not carry (a partial JSON update without the document's before image)."""
    more = b',"unknown":%s' % _j(unknown) if unknown else b""
    return b',"partial":{"before":%s,"after":%s%s}' % (_j(before), _j(after), more)


class LineEncoder:
    """Dml records as JSON lines without their closing ``}`` (the store appends batchId and seq),
    the same keys in the same order as ``rows_records``/``statement_record``."""

    def __init__(self) -> None:
        self._text: dict[str | None, bytes] = {}

    def text(self, value: str | None) -> bytes:
        """JSON of a repeated string (gtid, logfile, sql), cached for the last few values."""
        hit = self._text.get(value)
        if hit is None:
            if len(self._text) > 64:
                self._text.clear()
            hit = self._text[value] = _j(value)
        return hit

    def rows(self, kind: str, codec: TableCodec, data: bytes, old: bytes | None, sql: str, es: int, ts: int,
             gtid: str | None, logfile: str, logpos: int, rec_id: int) -> bytes:
        head, types = table_json(codec)
        return b'{"id":%d,%s,"isDdl":false,"type":"%s","es":%d,"ts":%d,"sql":%s,%s,"data":%s,"old":%s,' \
               b'"gtid":%s,"logfile":%s,"logpos":%d' % (
                   rec_id, head, kind.encode(), es, ts, self.text(sql), types, data,
                   old if old is not None else b"null", self.text(gtid), self.text(logfile), logpos)

    @staticmethod
    def statement(kind: str, database: str, table: str, is_ddl: bool, sql: str, es: int, ts: int,
                  gtid: str | None, logfile: str, logpos: int, rec_id: int, session: Session = NO_SESSION) -> bytes:
        return _j(statement_record(kind, database, table, is_ddl, sql, es, ts, gtid, logfile, logpos, rec_id,
                                   session))[:-1]
