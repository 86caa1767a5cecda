"""Which server and which binlog file a stored position belongs to, and how capture resumes there.

Binlog coordinates mean something only in the file they were read from. Each stored position
therefore names the server capture read (``serverId``, and on MySQL ``serverUuid``) and when its
file was created (``fileTs``: the timestamp of the file's format description event). Before
anything is read, :func:`resolve_start` decides:

* **Another server** (a promoted replica, another server at the stored address): the file and
  offset mean nothing there. Capture resumes by GTID when the server has every transaction up
  to the stored GTID state (MariaDB: ``@@gtid_binlog_state`` per domain and server; MySQL:
  ``GTID_SUBSET`` of ``@@gtid_executed``, and none of what follows purged), and refuses naming
  the GTIDs it lacks when it does not.
* **The same server**: its binlog must still hold the stored GTIDs (a reset binlog or a server
  restored from a backup has lost them) and, resuming by file, the file and offset; the reader
  then compares the start file's format description event with ``fileTs`` before it hands on
  anything from that file (:func:`check_file`): the same name after ``RESET MASTER`` /
  ``RESET BINARY LOGS AND GTIDS`` is another file.
* **A partial GTID set** (``gtidPartial``, MySQL: tagged GTIDs read, or a ``--from`` start whose set
  could not be read) is never resumed by GTID: on another server, or with ``source.resumeBy: gtid``,
  it is refused by name.
* **A position without these keys** (stored by an older Sluice, ``sluice capture --from``): MariaDB
  checks that ``BINLOG_GTID_POS`` at the coordinates is the stored GTID state.

Every check runs once per start (and per reconnect), never per event.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import pymysql

from sluice_common.errors import PositionError

from .position import Position
from .server_check import ServerId, server_identity, validate_start

REPLACED = ("the binlog was reset (RESET MASTER / RESET BINARY LOGS AND GTIDS), or the server was restored from a "
            "backup or replaced by another one at the same address")


@dataclass(frozen=True)
class Resume:
    """How the reader starts: ``position`` by ``mode`` (``file`` or ``gtid``) on ``server``."""

    position: Position
    mode: str
    server: ServerId
    failover: bool = False

    def read_from(self) -> Position:
        """The position the reader starts from. After a failover the stored file and offset are
        the old server's: the reader asks by GTID and learns the file from the server's first
        rotate event, so no coordinate of the old server is compared with this one's."""
        return self.position.with_(logfile="", logpos=4) if self.failover else self.position


def stamp(pos: Position, server: ServerId) -> Position:
    """``pos`` as a position of ``server``."""
    return pos.with_(server_id=server.server_id, server_uuid=server.uuid)


def same_server(pos: Position, server: ServerId) -> bool | None:
    """Whether ``pos`` was read from ``server`` (None: the position does not say)."""
    if pos.server_uuid and server.uuid:
        return pos.server_uuid == server.uuid
    if pos.server_id is None:
        return None
    return pos.server_id == server.server_id


def snapshot_fix(config_file: str) -> str:
    return (f"take a new snapshot: sluice bootstrap --config {config_file} --force (loads every group's tables "
            "again and starts capture at the source's current position); capture never jumps there by itself")


#: why a position whose GTID set is partial (Position.gtid_partial) is not resumed by GTID
PARTIAL_GTID = ("has a partial GTID set: it lacks transactions before the position (tagged GTIDs, MySQL "
                "uuid:tag:n, that capture read, or those before a sluice capture --from FILE:POS start whose set "
                "could not be read): resumed by GTID, the server would send those transactions again and "
                "the targets would apply old row images over newer ones")


def resolve_start(conn: pymysql.connections.Connection, flavor: str, start: Position, resume_by: str,
                  config_file: str) -> Resume:
    """How capture resumes ``start`` on the connected server (see the module docstring)."""
    fix = snapshot_fix(config_file)
    with conn.cursor() as cur:
        server = server_identity(cur, flavor)
        same = same_server(start, server)
        if same is False:
            return _failover(cur, flavor, start, server, config_file)
        mode = resume_by if resume_by != "auto" else ("file" if start.logfile else "gtid")
        if mode == "gtid" and start.gtid and start.gtid_partial:
            raise PositionError(f"source.resumeBy: gtid, but the stored position {start.text()} {PARTIAL_GTID}",
                                hint=f"set source.resumeBy: file (or auto) in {config_file}: the position resumes "
                                     "by file and offset on this server, the one it was read from")
        if mode == "file":
            validate_start(conn, start, fix)
        if start.gtid:
            missing = missing_gtids(cur, flavor, start.gtid)
            if missing:
                raise PositionError(f"the start position {start.text()} is not on the source: its binlog lacks "
                                    f"GTIDs that capture has stored: {missing}; {REPLACED}", hint=fix)
        if mode == "file" and flavor == "mariadb" and (start.gtid is None or not start.file_ts):
            cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (start.logfile, start.logpos))
            at = str((cur.fetchone() or [None])[0] or "").replace("\n", "") or None
            if start.gtid is None:
                start = start.with_(gtid=at)
            elif not start.file_ts and not _agrees(start.gtid, at):
                raise PositionError(f"the start position {start.text()} is not on the source: its GTID state at "
                                    f"{start.logfile}:{start.logpos} is {at or 'none (not an event boundary)'}; "
                                    f"{REPLACED}", hint=f"{fix}. If source.port now points at another server "
                                    "(a promoted replica) that has every transaction up to the stored GTID, set "
                                    "source.resumeBy: gtid for one run")
    return Resume(start, mode, server)


def _failover(cur, flavor: str, start: Position, server: ServerId, config_file: str) -> Resume:
    """``start`` was read from another server: resume by GTID, or refuse naming what is missing."""
    fix = snapshot_fix(config_file)
    was = ServerId(start.server_id or 0, start.server_uuid).text()
    head = (f"the source is another server ({server.text()}) than the one the stored position {start.text()} "
            f"was read from ({was})")
    there = ("point source.host/port at a server that has them (a replica that caught up with the old "
             f"primary), or {fix}")
    if not start.gtid:
        raise PositionError(f"{head}, and the position has no GTID to resume by", hint=fix)
    if start.skip_events:
        raise PositionError(f"{head}, and the position is inside transaction {start.split_gtid} ({start.skip_events} "
                            "of its rows events are stored as a split batch): another server may cut its rows "
                            "into other events, so capture cannot tell which rows are stored",
                            hint="let capture finish the transaction on the old server, or drop its split batches "
                            f"with sluice store recapture --config {config_file} --from N (N: the first batch that "
                            "ends inside it) so that this server's copy of it is read again whole")
    if start.gtid_partial:
        raise PositionError(f"{head}, and the position {PARTIAL_GTID}",
                            hint=f"point source.host/port at the server the position was read from, or {fix}")
    if start.xa:
        raise PositionError(f"{head}, and the position holds {len(start.xa)} prepared XA transaction(s) whose "
                            "XA PREPARE groups are in the old server's binlog files", hint=f"let capture read "
                            f"their XA COMMIT/ROLLBACK on the old server first, or {fix}")
    missing = missing_gtids(cur, flavor, start.gtid)
    if missing:
        raise PositionError(f"{head}, and it cannot resume there by GTID: its binlog lacks GTIDs that capture has "
                            f"stored: {missing}", hint=there)
    if flavor == "mysql":
        cur.execute("SELECT GTID_SUBTRACT(@@GLOBAL.gtid_purged, %s)", (start.gtid,))
        purged = str((cur.fetchone() or [""])[0] or "").replace("\n", "")
        if purged:
            raise PositionError(f"{head}, and it cannot resume there by GTID: it purged binlogs holding GTIDs "
                                f"that capture has not read: {purged}", hint=there)
    return Resume(start, "gtid", server, failover=True)


def missing_gtids(cur, flavor: str, gtid: str) -> str:
    """The GTIDs of the stored state ``gtid`` that the server's binlog lacks ('' when none).
    MariaDB: a stored ``domain-server-seq`` is there when the server's binlog state has a GTID of
    that domain and server with that sequence number or a later one."""
    if flavor == "mysql":
        cur.execute("SELECT GTID_SUBTRACT(%s, @@GLOBAL.gtid_executed)", (gtid,))
        return str((cur.fetchone() or [""])[0] or "").replace("\n", "")
    cur.execute("SELECT @@GLOBAL.gtid_binlog_state")
    have: dict[tuple[str, str], int] = {}
    for d, s, n in _parts(str((cur.fetchone() or [""])[0] or "")):
        have[(d, s)] = max(have.get((d, s), 0), n)
    out = []
    for d, s, n in _parts(gtid):
        got = have.get((d, s), 0)
        if got < n:
            newest = f"its newest is {d}-{s}-{got}" if got else f"it has none of server {s} in domain {d}"
            out.append(f"{d}-{s}-{n} ({newest})")
    return ", ".join(out)


def check_file(start: Position, logfile: str, ts: int, config_file: str) -> None:
    """The reader's check at the first format description event of a stream: when it is the stored
    position's file, it must be the file the position was read from."""
    if logfile != start.logfile or not start.file_ts or ts == start.file_ts:
        return
    raise PositionError(f"binlog {logfile} on the source is not the file the stored position {start.text()} was "
                        f"read from: its format description event is dated {_when(ts)}, the stored file's "
                        f"{_when(start.file_ts)}; {REPLACED}. Nothing was read from it",
                        hint=snapshot_fix(config_file))


def _parts(state: str) -> list[tuple[str, str, int]]:
    out = []
    for part in filter(None, (p.strip() for p in state.split(","))):
        d, s, n = part.split("-")
        out.append((d, s, int(n)))
    return out


def _agrees(stored: str, at: str | None) -> bool:
    """Whether the GTID state at the coordinates is the stored one, in every stored domain."""
    here = {d: (s, n) for d, s, n in _parts(at or "")}
    return at is not None and all(here.get(d) == (s, n) for d, s, n in _parts(stored))


def _when(ts: int) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
