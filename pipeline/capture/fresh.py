"""Where capture starts in a store that has no position yet (issue 37).

A new store used to start at the source's current position, always. That is right only for targets
that were never applied to: when the store was lost (a wrong ``store.path``, a new disk, a cleanup
script) every change made since the targets' last round would silently never reach them. The
targets know better: each RDB target records, with the rows it commits, the position its round
started at (adapters/rdb/applied.py). So before starting at "now", capture asks them
(:func:`pipeline.job.positions.read_all`):

* no target holds a record of this source: start at the current position (a new deployment);
* some do: refuse, naming the newest position every group has applied from, and how to resume
  there (``sluice capture --from FILE:POS``), or to start at "now" anyway (``--from now``), or to
  load the targets afresh (``sluice bootstrap``);
* a group's targets cannot be asked (its mappings do not load, a target is down): refuse too; a
  guess could lose rows.

``--from`` is only for a store without a position (a store with one resumes where it stands).
"""

from __future__ import annotations

import re
from typing import Any

from pipeline.config import Config
from pipeline.state import unfinished
from pipeline.store import CaptureLog
from sluice_common.errors import StoreError, UsageError
from sluice_common.logs import get_logger

from .position import Position
from .server_check import current_position

log = get_logger("capture")
_AT = re.compile(r"^(?P<file>[^:\s]+):(?P<pos>[0-9]+)(?:\s+gtid=(?P<gtid>\S+))?$")


def parse_from(text: str) -> Position | None:
    """``--from``: ``FILE:POS`` (a binlog coordinate), optionally followed by `` gtid=SET`` (the GTID
    state there, as a position's text shows it: on MySQL, where the set is read from the file's events
    only within its first ones, a start further in then still holds a whole set), or ``now`` (None)."""
    if text.strip().lower() == "now":
        return None
    m = _AT.match(text.strip())
    if not m:
        raise UsageError(f"--from {text!r} is neither FILE:POS (e.g. mysql-bin.000003:4), 'FILE:POS gtid=SET', "
                         "nor now")
    return Position(logfile=m["file"], logpos=int(m["pos"]), gtid=m["gtid"])


def refuse_resumed_store(store: CaptureLog, stored: dict[str, Any]) -> None:
    """``--from`` given for a store that already has a position."""
    raise UsageError(f"{store.root}: --from starts a store that has no position, and this one resumes at "
                     f"{Position.from_dict(stored).text()}",
                     hint="leave --from out (capture resumes where the store stands); to capture stored batches "
                     "again: sluice store recapture")


def new_start(cfg: Config, conn: Any, flavor: str, store: CaptureLog, start_from: str | None) -> tuple[Position, Any]:
    """The start of a store without a position, checked on the server before it is recorded, and how
    capture resumes there (:func:`identity.resolve_start`): :func:`start_position`; a ``--from``
    coordinate must be a transaction's start (:mod:`startcheck`); on MySQL its GTID set is read from
    the binlog (:func:`_mysql_set`)."""
    from .identity import resolve_start
    from .startcheck import check_start

    start = start_position(cfg, conn, flavor, store, start_from)
    coordinate = start_from is not None and parse_from(start_from) is not None
    if flavor == "mysql" and coordinate:
        start = _mysql_set(conn, start, cfg.file)
    resume = resolve_start(conn, flavor, start, cfg.source.resumeBy, cfg.file)
    if coordinate and (resume.position.logfile, resume.position.logpos) == (start.logfile, start.logpos):
        check_start(conn, start, cfg.file)  # a transaction's start, or refused before it is recorded
    return start.with_(gtid=resume.position.gtid), resume


def _mysql_set(conn: Any, start: Position, cfg_file: str) -> Position:
    """A MySQL ``--from`` coordinate with the GTID set there (:func:`startcheck.mysql_gtid_at`); a set
    given with it must be that one. Not known there (a long file, tagged GTIDs): the given set, or a
    partial one (``gtidPartial``: only what capture reads, never resumed by GTID)."""
    from .gtidtext import canonical, intervals
    from .startcheck import mysql_gtid_at

    there = mysql_gtid_at(conn, start)
    if there is None:
        return start if start.gtid else start.with_(gtid_partial=True)
    if start.gtid and canonical(intervals(start.gtid)) != (there or None):
        raise UsageError(f"--from {start.text()}: the GTID set at {start.logfile}:{start.logpos} is "
                         f"{there or 'empty'} (the file's previous GTIDs and its transactions before it), not the "
                         "one given; nothing was captured or recorded",
                         hint=f"leave gtid= out, it is read from the binlog: sluice capture --config {cfg_file} --once "
                              f"--from {start.logfile}:{start.logpos}")
    return start.with_(gtid=there or None)


def start_position(cfg: Config, conn: Any, flavor: str, store: CaptureLog, start_from: str | None) -> Position:
    """Where a store without a position starts (see the module docstring)."""
    if start_from is not None:
        at = parse_from(start_from)
        if at is not None:
            log.warning("no stored position: capture starts where --from says", position=at.text())
            return at
        start = current_position(conn, flavor)
        log.warning("no stored position: capture starts at the server's current position (--from now)",
                    position=start.text())
        return start
    _refuse_if_unfinished(cfg, store)
    _refuse_if_applied(cfg, store, flavor)
    start = current_position(conn, flavor)
    log.warning("no stored position: capture starts at the server's current position (no target was applied "
                "to from this source)", position=start.text())
    return start


def _refuse_if_unfinished(cfg: Config, store: CaptureLog) -> None:
    """A bootstrap that did not finish may have loaded targets from its snapshot (:mod:`pipeline.state.unfinished`)."""
    marker = unfinished.found(store.root)
    if marker is not None:
        raise StoreError(f"{store.root}: the batch store has no position, and a sluice bootstrap of it from "
                         f"{marker.get('position')} (started {marker.get('started')}) did not finish: targets may "
                         "hold rows of its snapshot, and starting at the source's current position would skip "
                         "every change made since",
                         hint=f"run it again: sluice bootstrap --config {cfg.file} (or, knowing the targets hold "
                              f"nothing of it: sluice capture --config {cfg.file} --once --from now)")


def _refuse_if_applied(cfg: Config, store: CaptureLog, flavor: str) -> None:
    from pipeline.job.positions import read_all, resume_point

    found, unknown = read_all(cfg)
    where = f"{store.root}: the batch store has no position (it is new, or store.path points elsewhere)"
    now = f"sluice capture --config {cfg.file} --once --from now"
    if unknown:
        u = unknown[0]
        raise StoreError(f"{where}, and whether group {u.group}'s targets were applied to from source "
                         f"{cfg.source.name} before cannot be told: {u.why}",
                         hint=f"fix that and run again; or start at the source's current position anyway: {now} "
                         "(targets applied to before then miss every change made since)")
    point = resume_point(found)
    if point is None:
        return
    pos = point.position
    at = f"{pos.logfile}:{pos.logpos}"
    if flavor == "mysql" and pos.gtid and not pos.gtid_partial:  # its set too: MySQL's is read from the
        at = f"'{at} gtid={pos.gtid}'"  # binlog only within the first events of the file (_mysql_set)
    raise StoreError(f"{where}, but group {point.group}'s target {point.target} holds changes of source "
                     f"{cfg.source.name} up to {pos.text()} (recorded {point.at} by store {point.store_id}); "
                     "starting at the source's current position would skip every change made since",
                     hint=f"if the store moved, fix store.path in {cfg.file}; to resume where the targets stand: "
                     f"sluice capture --config {cfg.file} --once --from {at}; to start at the current position "
                     f"anyway (the targets miss what changed meanwhile): {now}; to load the targets afresh: "
                     f"sluice bootstrap --config {cfg.file}")
