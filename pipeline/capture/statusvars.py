"""The session a statement ran in, from its query event's status variables.

A query event carries, before the schema name, a block of status variables: one code byte each,
then a value whose size the code determines (MariaDB's replication-protocol docs, "QUERY_EVENT").
A replica reads two of them before it runs a DDL statement, and so does a mirror replaying it:

* ``Q_TIME_ZONE_CODE`` (5): the session's ``time_zone``, written when the statement used it
  (a TIMESTAMP literal such as ``DEFAULT '2026-03-08 02:30:00'`` means an instant in that zone);
* the statement's start time to the microsecond: the event header holds the seconds, and
  ``Q_MICROSECONDS`` (13, MySQL) or ``Q_HRNOW`` (128, MariaDB) the microseconds when the statement
  used them. ``ALTER TABLE t ADD COLUMN c TIMESTAMP DEFAULT CURRENT_TIMESTAMP`` fills the rows that
  exist with that time, so a replay must run at it (``SET timestamp``), not at its own time.

Codes are read in order; an unknown code ends the block (its size is unknown), as the servers'
own readers do. ``Session.whole`` says the block was read to its end: only then does a missing
zone mean the statement used none (MariaDB 11.5+ writes ``Q_CHARACTER_SET_COLLATIONS`` (131) *before*
the zone, so a reader that stopped at it would have missed one). Only the DDL a mirror replays is
parsed (BEGIN events are not).
"""

from __future__ import annotations

from typing import NamedTuple

#: code -> size in bytes of the fixed-size values the block may hold before the ones read here
_FIXED = {0: 4, 1: 8, 3: 4, 4: 6, 7: 2, 8: 2, 9: 8, 10: 4, 16: 1, 17: 8, 18: 2, 19: 1, 20: 1, 129: 8}
Q_CATALOG, Q_TIME_ZONE, Q_CATALOG_NZ, Q_INVOKER, Q_UPDATED_DB_NAMES = 2, 5, 6, 11, 12
Q_MICROSECONDS, Q_HRNOW, Q_GTID_FLAGS3, Q_CHARACTER_SET_COLLATIONS = 13, 128, 130, 131
#: Q_GTID_FLAGS3's flags after which an 8-byte sequence number follows (MariaDB's two-phase ALTER:
#: COMMIT ALTER, ROLLBACK ALTER)
_FLAGS3_SEQ = 0x04 | 0x08
#: Q_UPDATED_DB_NAMES' count when the names were too many to list (none follow)
_OVER_MAX_DBS = 254


class Session(NamedTuple):
    """What a statement's status variables say about its session (None: not written, or not read)."""

    time_zone: str | None
    usec: int | None
    #: the block was read to its end (no unknown code, not cut short): what is None was not written
    whole: bool = False


NONE = Session(None, None)


def session_of(status: bytes) -> Session:
    """The time zone and start microseconds in a query event's status-variable block."""
    tz: str | None = None
    usec: int | None = None
    i, n = 0, len(status)
    try:
        while i < n:
            code = status[i]
            i += 1
            if code in _FIXED:
                i += _FIXED[code]
            elif code == Q_TIME_ZONE:
                size = status[i]
                if i + 1 + size > n:
                    break
                tz = status[i + 1:i + 1 + size].decode("ascii", "replace")
                i += 1 + size
            elif code in (Q_MICROSECONDS, Q_HRNOW):
                if i + 3 > n:
                    break
                usec = int.from_bytes(status[i:i + 3], "little")
                i += 3
            elif code == Q_GTID_FLAGS3:
                i += 1 + (8 if status[i] & _FLAGS3_SEQ else 0)
            elif code == Q_CHARACTER_SET_COLLATIONS:  # a count, then (charset id, collation id) pairs
                i += 1 + 4 * status[i]
            elif code == Q_CATALOG:
                i += 1 + status[i] + 1
            elif code == Q_CATALOG_NZ:
                i += 1 + status[i]
            elif code == Q_INVOKER:
                i += 1 + status[i]
                i += 1 + status[i]
            elif code == Q_UPDATED_DB_NAMES:
                count = status[i]
                i += 1
                if count != _OVER_MAX_DBS:
                    for _ in range(count):
                        i = status.index(0, i) + 1
            else:
                break
        else:
            return Session(tz or None, usec, i == n)
    except (IndexError, ValueError):  # a block shorter than its codes say: what was whole stands
        pass
    return Session(tz or None, usec)
