"""Capture positions (what the store keeps as a batch's ``end``) and GTID state tracking.

:class:`Position` itself is :mod:`pipeline.source.binlog`'s (below capture and the job, which both
read positions: the job from the targets' records, :mod:`pipeline.job.positions`); it is
re-exported here, where capture and its callers have always found it.

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
* ``gtidPartial`` (only when true; MySQL): ``gtid`` lacks transactions before the position: those
  with a tagged GTID (MySQL 8.3+, ``uuid:tag:n``; framed by their BEGIN/XID, their GTID not kept),
  or all before a ``sluice capture --from FILE:POS`` start whose set could not be read from the
  binlog (:func:`pipeline.capture.fresh.new_start`: the set holds only what capture read). Such a
  position resumes by file and offset on the server it was read from, never by GTID (:mod:`identity`
  refuses it by name).
"""

from __future__ import annotations

from pymysqlreplication.gtid import Gtid, GtidSet

from pipeline.source.binlog import Position, binlog_key

__all__ = ["GtidState", "Position", "binlog_key"]


class GtidState:
    """The GTID state after the last complete transaction, per flavour."""

    def __init__(self, flavor: str, initial: str | None):
        self.flavor = flavor
        self._domains: dict[str, str] = {}
        self._set: GtidSet | None = None
        self._text: str | None = None
        self._stale = True
        #: the set lacks transactions before the position (Position.gtid_partial): a transaction
        #: with a tagged GTID went by, or the start was so marked (a MySQL ``--from FILE:POS``)
        self.gtid_partial = False
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
                domains = self._domains
                if len(domains) == 1:  # one replication domain (the usual case): once per transaction
                    self._text = next(iter(domains.values()))
                else:
                    self._text = ",".join(domains[d] for d in sorted(domains, key=int)) or None
            else:
                self._text = str(self._set) if self._set is not None else None
            self._stale = False
        return self._text
