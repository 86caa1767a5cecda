"""Binlog coordinates: ordering ``file:offset`` positions across files, and :class:`Position`, the
capture position as stored with a batch and recorded in the targets (its JSON form is described in
:mod:`pipeline.capture.position`). Below capture and the job, which both read positions."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from sluice_common.errors import PositionError


def binlog_key(logfile: str, logpos: int) -> tuple[str, int, int]:
    """Sortable key of a binlog coordinate (``mysql-bin.000010`` after ``.000009``)."""
    base, _, num = logfile.rpartition(".")
    return (base, int(num) if num.isdigit() else 0, logpos)


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
    #: the GTID set is partial (MySQL): it lacks tagged GTIDs (``uuid:tag:n``) of transactions capture
    #: read, or the transactions before a ``--from`` start whose set could not be read; it cannot be
    #: resumed by GTID (the server would send those transactions again)
    gtid_partial: bool = False

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
        if self.gtid_partial:
            d["gtidPartial"] = True
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Position:
        try:
            return cls(logfile=str(d["logfile"]), logpos=int(d["logpos"]), gtid=d.get("gtid") or None,
                       next_id=int(d.get("nextId", 1)), skip_events=int(d.get("skipEvents", 0)),
                       split_gtid=d.get("splitGtid"), xa=tuple(d.get("xa") or ()),
                       server_id=None if d.get("serverId") is None else int(d["serverId"]),
                       server_uuid=d.get("serverUuid") or None, file_ts=int(d.get("fileTs") or 0) or None,
                       gtid_partial=d.get("gtidPartial") is True)
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
