"""The time zone a mirror replays a DDL statement in.

A TIMESTAMP literal in DDL (``DEFAULT '1970-01-01 00:00:01'``, the value an ``ADD COLUMN ... DEFAULT``
gives every existing row, which no row event carries) is an instant in the statement's session zone.
The binlog names that zone with the statement when the statement used it (capture's ``timeZone``,
the query event's ``Q_TIME_ZONE_CODE``); a statement that used none gives the same result in any
zone (the source's global zone is taken where it has a name or one offset, else UTC; UTC too when
the target does not know that zone, adapters/rdb/ddl.py). Named zones
and offsets are handed to the target as they are. ``SYSTEM`` -- the source's operating-system zone
-- has no name the target could be given, so it is resolved exactly or the statement is refused:

* its UTC offset (``+05:30``) when the source's zone had that one offset at every probe: noon of
  the first of every month from 1971 to next year (one query; a zone with daylight saving time, or
  one that moved, such as Europe/London's all-year summer time of 1968-71, has several);
* ``source.systemTimeZone`` when the operator named the zone: it must give the source's offset at
  every probe (checked when the source can be reached; used as named when it cannot);
* else a refusal naming the statement and that setting -- never a replay in another zone, which would
  give the mirror other instants than the source's (or refuse a literal the other zone skips at a DST
  change). A source that cannot be reached to tell its zone fails the sync (nothing acked; retried).

The zone is asked for only when a statement is replayed (``RdbWriter.ddl_time_zone``, called by
adapters/rdb/ddl.py after its own checks): a statement a target does not replay, or replayed
already, needs none.
"""

from __future__ import annotations

import calendar
import zoneinfo
from datetime import date, datetime

import pymysql

from adapters.base import DdlChange
from pipeline.config import Config
from pipeline.source.connect import connect
from sluice_common.errors import ConfigError, SourceError
from sluice_common.logs import get_logger

log = get_logger("sync")

#: (host, port, system) -> the source's global zone, or its SYSTEM zone's offset at each probe
_ZONES: dict[tuple[str, int, bool], str | tuple[int, ...]] = {}


def probes() -> list[datetime]:
    """Noon of the first of every month, 1971 to next year (local times; all after the epoch)."""
    return [datetime(y, m, 1, 12) for y in range(1971, date.today().year + 2) for m in range(1, 13)]


def offset_text(seconds: int) -> str:
    """``+05:30`` for 19800 seconds east of UTC."""
    sign, off = ("+" if seconds >= 0 else "-"), abs(int(seconds))
    return f"{sign}{off // 3600:02d}:{off % 3600 // 60:02d}"


def zone_offsets(name: str, at: list[datetime]) -> tuple[int, ...]:
    """The named zone's UTC offsets (seconds) at the local times ``at``."""
    tz = zoneinfo.ZoneInfo(name)
    return tuple(int(t.replace(tzinfo=tz).utcoffset().total_seconds()) for t in at)


def _read(cfg: Config, system: bool) -> str | tuple[int, ...]:
    """The source's global zone, or (``system``) its SYSTEM zone's offset at each probe (SourceError
    when the source cannot answer)."""
    key = (cfg.source.host, cfg.source.port, system)
    if key not in _ZONES:
        at = probes()
        conn = connect(cfg.source)
        try:
            with conn.cursor() as cur:
                if system:
                    cur.execute("SET time_zone = 'SYSTEM'")
                cur.execute("SELECT @@session.time_zone, " + ", ".join(
                    f"{calendar.timegm(t.timetuple())} - UNIX_TIMESTAMP('{t:%Y-%m-%d %H:%M:%S}')" for t in at))
                zone, *offsets = cur.fetchone()
        except pymysql.MySQLError as e:
            raise SourceError(f"reading the source's time zone failed: {e}") from None
        finally:
            conn.close()
        zone = str(zone)
        if zone.upper() != "SYSTEM":
            _ZONES[key] = zone
        elif any(o is None for o in offsets):
            raise SourceError("the source gave no Unix time for a local time of its SYSTEM zone")
        else:
            _ZONES[key] = tuple(int(o) for o in offsets)
    return _ZONES[key]


def ddl_time_zone(cfg: Config, ddl: DdlChange) -> str:
    """The zone to replay ``ddl`` in ("" for Sluice's UTC session): see the module docstring."""
    session = ddl.time_zone or None
    if session and session.upper() != "SYSTEM":
        return session
    if not session:  # the statement used no zone: any gives the same result; the source's when it tells
        try:
            found = _read(cfg, False)
        except SourceError as e:
            log.warning("source time zone unknown: DDL is replayed in UTC (the statement used no zone)",
                        error=str(e).splitlines()[0])
            return ""
        if isinstance(found, tuple):  # SYSTEM: its one offset, else UTC (exact all the same)
            return offset_text(found[0]) if len(set(found)) == 1 else ""
        return found
    return system_zone(cfg, ddl, None)


def system_zone(cfg: Config, ddl: DdlChange, offsets: tuple[int, ...] | None) -> str:
    """The SYSTEM zone as a zone the target knows, or a refusal of ``ddl`` naming the setting;
    ``offsets``: the source's at each of :func:`probes` (None: read them)."""
    named = cfg.source.systemTimeZone
    what = f"`{ddl.sql[:200]}` on {ddl.database}.{ddl.table}"
    if offsets is None:
        try:
            offsets = _read(cfg, True)  # type: ignore[assignment]
        except SourceError as e:
            if named:
                return named
            raise SourceError(f"{what} ran in the source's SYSTEM time zone; reading which zone that is needs the "
                              f"source: {str(e).splitlines()[0]}; nothing was acked",
                              hint=f"start the source and sync again, or set source.systemTimeZone in {cfg.file} to "
                                   "the source host's zone by name (e.g. Europe/Berlin)") from None
    at = probes()
    if named:
        theirs = zone_offsets(named, at)
        for t, mine, source in zip(at, theirs, offsets, strict=True):
            if mine != source:
                raise ConfigError(cfg.file, "source.systemTimeZone",
                                  f"is {named}, which is UTC{offset_text(mine)} at {t:%Y-%m-%d %H:%M}, but the "
                                  f"source's SYSTEM zone is UTC{offset_text(source)} then; {what} ran in it",
                                  hint="set it to the zone of the source's host (timedatectl, /etc/timezone), or "
                                       "leave it out when that zone has had one offset since 1971")
        return named
    if len(set(offsets)) == 1:
        return offset_text(offsets[0])
    low, high = min(offsets), max(offsets)
    raise ConfigError(cfg.file, "source.systemTimeZone",
                      f"{what} ran in the source's SYSTEM time zone, whose UTC offset changes (UTC"
                      f"{offset_text(low)} to UTC{offset_text(high)} since 1971: daylight saving time, or a "
                      "change of its rules), and which has no name the target could be given; replayed in one "
                      "offset its TIMESTAMP literals would mean other instants. Nothing was acked",
                      hint=f"set source.systemTimeZone in {cfg.file} to the source host's zone by name (e.g. "
                           "Europe/Berlin: timedatectl or /etc/timezone there), then sync again")


def warn_of_system_zone(cfg: Config) -> None:
    """Pre-flight, for a group with a mirror: warn when the source's global zone is a ``SYSTEM``
    whose offset changed and ``source.systemTimeZone`` is not set, so the refusal of a statement
    that uses it (above) is expected, not a surprise mid-stream (MySQL's default zone is SYSTEM)."""
    if cfg.source.systemTimeZone:
        return
    try:
        found = _read(cfg, False)
    except SourceError:
        return  # the source's own checks say so
    if isinstance(found, tuple) and len(set(found)) > 1:
        log.warning("the source's time zone is SYSTEM and its UTC offset changes: a mirrored DDL statement that "
                    "uses it (a TIMESTAMP literal) will be refused until source.systemTimeZone names the zone",
                    fix=f"set source.systemTimeZone in {cfg.file} to the source host's zone by name (e.g. "
                        "Europe/Berlin)")
