"""XA transactions: prepared ones held until their decision, and the statements that decide them.

The binlog carries an XA transaction twice: its rows in the PREPARE group (MariaDB: a GTID event
flagged ``FL_PREPARED_XA``; MySQL: ``XA START`` after the GTID), ended by an XA PREPARE event, and
later, after any number of other transactions (possibly in a later binlog file, batch or capture
run), its decision as an ``XA COMMIT`` or ``XA ROLLBACK`` statement in a group of its own. The rows
are applied where the COMMIT is (that is when the source made them visible) and dropped at a
ROLLBACK. :class:`XaBook` holds the prepared ones; :meth:`XaBook.held` is what every position
records of them (XID, where the PREPARE group starts), so that a capture restarted between
PREPARE and COMMIT reads those groups again (``BinlogReader.reread_prepared``) before it goes on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from sluice_common.errors import SourceError

from .events import xid_key, xid_text

#: ``XA COMMIT X'7831',X'',1`` (as both servers log it) or a quoted gtrid: verb, gtrid, bqual, formatID
_XA_DECISION = re.compile(
    r"^XA\s+(COMMIT|ROLLBACK)\s+(X'[0-9A-Fa-f]*'|'(?:[^'\\]|\\.|'')*')"
    r"(?:\s*,\s*(X'[0-9A-Fa-f]*'|'(?:[^'\\]|\\.|'')*'))?(?:\s*,\s*(-?\d+))?\s*$", re.I | re.S)
_SAVEPOINT = re.compile(r"^(?:ROLLBACK\s+(?:WORK\s+)?TO\s+(?:SAVEPOINT\s+)?)?\s*(`(?:[^`]|``)+`|\S+)\s*$", re.I | re.S)


def _xid_part(text: str | None) -> bytes:
    if not text:
        return b""
    if text[:2].upper() == "X'":
        return bytes.fromhex(text[2:-1])
    return text[1:-1].replace("''", "'").encode()


def parse_xa_statement(q: str) -> tuple[str, bytes] | None:
    """``("COMMIT"|"ROLLBACK", xid_key)`` for an XA decision statement, else None."""
    if not q[:3].upper() == "XA ":
        return None
    m = _XA_DECISION.match(q.strip())
    if m is None:
        return None
    fmt = int(m.group(4)) if m.group(4) else 1
    return m.group(1).upper(), xid_key(fmt, _xid_part(m.group(2)), _xid_part(m.group(3)))


def savepoint_name(text: str) -> str:
    """The savepoint a ``SAVEPOINT x`` (pass the part after the keyword) or ``ROLLBACK TO x`` names
    (savepoint names compare case-insensitively)."""
    m = _SAVEPOINT.match(text.strip())
    name = m.group(1) if m else text.strip()
    if name.startswith("`"):
        name = name[1:-1].replace("``", "`")
    return name.lower()


@dataclass
class Prepared:
    """One prepared, undecided XA transaction."""

    xid: bytes
    items: list[Any]
    origin: dict[str, Any]   # where its PREPARE group starts: logfile, logpos, gtid (state before it)


@dataclass
class XaBook:
    """The prepared XA transactions of one capture run, in PREPARE order."""

    prepared: dict[bytes, Prepared] = field(default_factory=dict)
    _held: tuple = ()

    def prepare(self, xid: bytes, items: list[Any], origin: dict[str, Any]) -> None:
        if xid in self.prepared:
            raise SourceError(f"{origin['logfile']}:{origin['logpos']}: XA PREPARE of {xid_text(xid)}, "
                              "which is already prepared and undecided",
                              hint="the binlog repeats an XID; capture cannot tell the two transactions apart")
        self.prepared[xid] = Prepared(xid, items, origin)
        self._refresh()

    def decide(self, xid: bytes, where: str, statement: str) -> list[Any]:
        """The held items of ``xid`` (to emit at a COMMIT, drop at a ROLLBACK)."""
        p = self.prepared.pop(xid, None)
        if p is None:
            raise SourceError(
                f"{where}: {statement[:120]} decides XA transaction {xid_text(xid)}, whose XA PREPARE is "
                "before capture's start position: capture never saw its rows, so it cannot apply them",
                hint="repair the tables that transaction wrote (sluice repair), then move capture's start past "
                "this event (sluice store set-cursor / bootstrap); or start capture before that XA PREPARE")
        self._refresh()
        return p.items

    def drop(self, xid: bytes) -> None:
        """An XA ROLLBACK: the held items of ``xid`` are dropped (one prepared before capture's start
        position left nothing here, and nothing of it is applied either way)."""
        if self.prepared.pop(xid, None) is not None:
            self._refresh()

    def held(self) -> tuple:
        """What a position records of the prepared transactions (immutable; shared until it changes)."""
        return self._held

    def _refresh(self) -> None:
        self._held = tuple({"xid": p.xid.hex(), **p.origin} for p in self.prepared.values())


def held_origins(position_xa: list[dict[str, Any]] | tuple) -> list[tuple[bytes, dict[str, Any]]]:
    """(xid, origin) of each prepared transaction a stored position names, in PREPARE order."""
    out = []
    for d in position_xa or ():
        try:
            out.append((bytes.fromhex(d["xid"]), {"logfile": str(d["logfile"]), "logpos": int(d["logpos"]),
                                                  "gtid": d.get("gtid")}))
        except (KeyError, TypeError, ValueError) as e:
            raise SourceError(f"the stored capture position names a prepared XA transaction it cannot read: {d!r} "
                              f"({e})") from None
    return out
