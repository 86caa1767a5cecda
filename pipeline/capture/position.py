"""Capture positions (what the store keeps as a batch's ``end``) and GTID state tracking.

A position is a plain JSON object:

``{"logfile": "mysql-bin.000007", "logpos": 98877, "gtid": "0-101-4161", "nextId": 5230}``

* ``logfile``/``logpos``: binlog coordinates just after the last complete transaction.
* ``gtid``: the GTID state after it: MariaDB ``domain-server-seq`` list (one per domain),
  MySQL an executed GTID set (``uuid:1-4161``); ``null`` if unknown.
* ``nextId``: the next Dml ``id`` (ids increase per source, across restarts).
* ``skipEvents`` (only at the end of a split batch): ``logfile``/``logpos``/``gtid`` then
  describe the *start* of the unfinished transaction, and a resumed capture skips its
  first ``skipEvents`` rows events, which are already stored.
* ``xa`` (only while XA transactions are prepared and undecided): per transaction its XID (hex of
  ``events.xid_key``) and where its PREPARE group starts (``logfile``, ``logpos``, ``gtid``
  before it); a resumed capture reads those groups again and holds them until their decision.
* ``serverId``, ``serverUuid`` (MySQL), ``fileTs``: the server the coordinates belong to and the
  timestamp of ``logfile``'s format description event (when the file was created): a file of the
  same name on another server, or after a reset, is another file (:mod:`identity`). Positions
  stored before these keys existed lack them and are still read.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from pymysqlreplication.gtid import Gtid, GtidSet

from pipeline.source.binlog import binlog_key
from sluice_common.errors import PositionError

__all__ = ["GtidState", "Position", "binlog_key"]


@dataclass(frozen=True)
class Position:
    """Where capture starts or resumes."""

    logfile: str
    logpos: int
    gtid: str | None = None
    next_id: int = 1
    skip_events: int = 0
    split_gtid: str | None = None
    xa: tuple = ()
    server_id: int | None = None
    server_uuid: str | None = None
    file_ts: int | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"logfile": self.logfile, "logpos": self.logpos, "gtid": self.gtid,
                             "nextId": self.next_id}
        if self.skip_events:
            d["skipEvents"] = self.skip_events
            d["splitGtid"] = self.split_gtid
        if self.xa:
            d["xa"] = [dict(x) for x in self.xa]
        if self.server_id is not None:
            d["serverId"] = self.server_id
        if self.server_uuid:
            d["serverUuid"] = self.server_uuid
        if self.file_ts:
            d["fileTs"] = self.file_ts
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Position:
        try:
            return cls(logfile=str(d["logfile"]), logpos=int(d["logpos"]), gtid=d.get("gtid") or None,
                       next_id=int(d.get("nextId", 1)), skip_events=int(d.get("skipEvents", 0)),
                       split_gtid=d.get("splitGtid"), xa=tuple(d.get("xa") or ()),
                       server_id=None if d.get("serverId") is None else int(d["serverId"]),
                       server_uuid=d.get("serverUuid") or None, file_ts=int(d.get("fileTs") or 0) or None)
        except (KeyError, TypeError, ValueError) as e:
            raise PositionError(f"the stored capture position {d!r} is not a capture position ({e})",
                                hint="set a valid start position (see docs/capture.md)") from None

    def with_(self, **kw: Any) -> Position:
        return replace(self, **kw)

    def text(self) -> str:
        s = f"{self.logfile}:{self.logpos}"
        if self.gtid:
            s += f" gtid={self.gtid}"
        if self.skip_events:
            s += f" +{self.skip_events} events"
        if self.xa:
            s += f" +{len(self.xa)} prepared XA"
        return s


class GtidState:
    """The GTID state after the last complete transaction, per flavour."""

    def __init__(self, flavor: str, initial: str | None):
        self.flavor = flavor
        self._domains: dict[str, str] = {}
        self._set: GtidSet | None = None
        self._text: str | None = None
        self._stale = True
        if flavor == "mariadb":
            for part in (initial or "").split(","):
                part = part.strip()
                if part:
                    self._domains[part.split("-", 1)[0]] = part
        elif initial:
            self._set = GtidSet(initial)

    def add(self, gtid: str) -> None:
        """Record that transaction ``gtid`` is complete."""
        self._stale = True
        if self.flavor == "mariadb":
            self._domains[gtid.split("-", 1)[0]] = gtid
        elif self._set is not None:
            self._set = self._set + Gtid(gtid)
        else:
            self._set = GtidSet(gtid)

    def text(self) -> str | None:
        """The state as text (cached until the next ``add``)."""
        if self._stale:
            if self.flavor == "mariadb":
                self._text = ",".join(self._domains[d] for d in sorted(self._domains, key=int)) or None
            else:
                self._text = str(self._set) if self._set is not None else None
            self._stale = False
        return self._text
