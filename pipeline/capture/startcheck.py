"""``sluice capture --from FILE:POS``: the position must be where a transaction starts.

Capture applies whole transactions: started inside one, it would store only the transaction's
remaining changes -- its earlier ones lost, with the transaction's GTID recorded as captured -- and
an offset that is no event's start cannot be decoded at all. Both were accepted (a new user's
probe: two of three updates of a transaction applied, exit 0; a stuck store whose every suggested
fix failed). So before the start is recorded, the event at ``POS`` is read from the source
(``SHOW BINLOG EVENTS IN 'FILE' FROM POS``): no event there (not an event's start), or one that is
inside a transaction (a table map, rows, the commit, MariaDB's annotate, a statement's context),
refuses the start, naming the transaction's own start and the next transaction's when the first
:data:`_PAGES` x :data:`_PAGE` events of the file (each way) show them; in a longer file the start
is described, never guessed from the last one the pages held. The end of the file (no event yet)
is a start. A source that does not let the user list binlog events (a missing privilege) is warned
about, and the start taken as given.
"""

from __future__ import annotations

import re
from typing import Any

import pymysql

from sluice_common.errors import UsageError
from sluice_common.logs import get_logger

from .position import Position

log = get_logger("capture")

#: events a transaction starts with, or that stand outside any transaction
_GTIDS = ("Gtid", "Anonymous_Gtid", "Gtid_tagged_log_event")  # MySQL 8.3+: a tagged GTID's event
_STARTS = {*_GTIDS, "Format_desc", "Rotate", "Gtid_list", "Binlog_checkpoint", "Previous_gtids", "Start_encryption",
           "Stop", "Query"}
#: statements of a Query event that is inside a transaction (not its start, not a DDL of its own)
_INSIDE = ("COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE", "XA END", "XA PREPARE", "INSERT", "UPDATE", "DELETE",
           "REPLACE", "LOAD")
_PAGE, _PAGES = 10_000, 20
#: a file's header events (before any transaction), and a GTID event's text
_HEADER = ("Format_desc", "Previous_gtids", "Rotate", "Stop", "Start_encryption")
_GTID_NEXT = re.compile(r"GTID_NEXT\s*=\s*'([^']+)'", re.I)
_PRIVILEGE = {1227, 1142, 1045, 1044}


def check_start(conn: Any, at: Position, cfg_file: str) -> None:
    """UsageError unless ``at`` (a ``--from``) is a transaction's start or the file's end."""
    try:
        first = _events(conn, at.logfile, at.logpos, 1)
    except pymysql.MySQLError as e:
        code = e.args[0] if e.args else None
        if code in _PRIVILEGE:
            log.warning("cannot check that --from is a transaction's start (listing binlog events needs the "
                        "BINLOG MONITOR / REPLICATION CLIENT privilege): taken as given", position=at.text())
            return
        raise UsageError(f"--from {at.text()}: the source reads no event there ({e.args[-1] if e.args else e}); "
                          "nothing was captured or recorded",
                          hint="give a position where an event starts: a transaction's first event from SHOW "
                               f"BINLOG EVENTS IN '{at.logfile}' on the source, a position Sluice printed, or "
                               f"`--from now`; then run `sluice capture --config {cfg_file} --once --from ...` "
                               "again") from None
    if not first or _is_start(first[0]):
        return
    kind = first[0][2]
    start, after = _around(conn, at)
    options = [f"--from {at.logfile}:{start} (the start of that transaction)" if start is not None else
               f"the start of that transaction (its GTID event or BEGIN before {at.logpos} in SHOW BINLOG EVENTS IN "
               f"'{at.logfile}' on the source)"]
    if after is not None:
        options.append(f"--from {at.logfile}:{after} (the transaction after it: this one's changes are then not "
                       "captured)")
    raise UsageError(f"--from {at.text()} is inside a transaction (the event there is {kind}): capture would store "
                     "only the rest of it; nothing was captured or recorded",
                     hint="start where a transaction starts: " + "; or ".join(options))


def mysql_gtid_at(conn: Any, at: Position) -> str | None:
    """MySQL: the GTID set at ``at`` (a transaction's start, the file's header, or its end): the
    file's Previous_gtids (whatever ``at``: the header holds no transaction) and the GTID of every
    transaction before ``at``, from SHOW BINLOG EVENTS (the pages :func:`_paged` reads). None when
    that is not known: ``at`` not reached within them, a tagged GTID (the stored set keeps no tags), a
    GTID event whose text is not ``GTID_NEXT= '...'``, events that cannot be listed."""
    from .gtidtext import canonical, intervals

    items: list = []
    seen = 0
    try:
        for r in _paged(conn, at.logfile, 4):
            seen += 1
            kind, info = r[2], str(r[5] or "")
            if kind == "Previous_gtids":
                items += intervals(info)
                continue
            if r[1] >= at.logpos and kind not in _HEADER:
                break
            if kind == "Gtid":
                m = _GTID_NEXT.search(info)
                if m is None:
                    return None
                items += intervals(m[1])
            elif kind == "Gtid_tagged_log_event":
                return None
        else:
            if seen >= _PAGE * _PAGES:
                return None  # the pages ended before the position: not known, never a guess
    except pymysql.MySQLError:
        return None
    if any(tag is not None for _, tag, _, _ in items):
        return None
    return canonical(items) or ""


def _events(conn: Any, logfile: str, pos: int, limit: int, skip: int = 0) -> list[tuple]:
    with conn.cursor() as cur:
        cur.execute(f"SHOW BINLOG EVENTS IN %s FROM %s LIMIT {int(skip)}, {int(limit)}", (logfile, pos))
        return list(cur.fetchall())


def _is_start(event: tuple) -> bool:
    kind, info = event[2], str(event[5] or "").lstrip().upper()
    return kind in _STARTS and not (kind == "Query" and info.startswith(_INSIDE))


def _around(conn: Any, at: Position) -> tuple[int | None, int | None]:
    """The position of the transaction start at or before ``at`` and of the next one after it, from
    the file's events (at most :data:`_PAGES` pages of :data:`_PAGE` events each way; None: not found)."""
    start = after = None
    try:
        after_gtid, found = False, None
        for r in _paged(conn, at.logfile, 4):
            if r[1] >= at.logpos:  # reached: the last start before it is this transaction's
                start = found
                break
            if r[2] in _GTIDS:
                found, after_gtid = r[1], True
                continue
            if r[2] == "Query" and _is_start(r) and not after_gtid:  # a BEGIN after its GTID event: that one
                found = r[1]
            after_gtid = False
        # not reached within the pages read (a large file): the start is not known, never a guess
        for r in _paged(conn, at.logfile, at.logpos):
            if r[2] == "Xid" or (r[2] == "Query" and str(r[5]).lstrip().upper().startswith(("COMMIT", "ROLLBACK"))):
                after = r[4]
                break
    except pymysql.MySQLError:
        pass
    return start, after


def _paged(conn: Any, logfile: str, pos: int):
    """The file's events from ``pos``, a page at a time (at most :data:`_PAGES` pages)."""
    for page in range(_PAGES):
        rows = _events(conn, logfile, pos, _PAGE, page * _PAGE)
        yield from rows
        if len(rows) < _PAGE:
            return
