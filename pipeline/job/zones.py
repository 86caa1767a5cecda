"""The time zone a mirror replays a DDL statement in.

A TIMESTAMP literal in DDL (``DEFAULT '1970-01-01 00:00:01'``, the value an ``ADD COLUMN ... DEFAULT``
gives every existing row, which no row event carries) is an instant in the statement's session zone.
The binlog names that zone with the statement when the statement used it (capture's ``timeZone``,
the query event's ``Q_TIME_ZONE_CODE``); a statement that used none gives the same result in any
zone. Named zones and offsets are handed to the target as they are. ``SYSTEM`` -- the source's
operating-system zone -- has no name the target could be given, so it is resolved exactly or the
statement is refused by name:

* its UTC offset (``+05:30``) when the source's zone has one offset all year (the source is asked
  for it in January and July);
* ``source.systemTimeZone`` when the operator named the zone (it must have the source's offsets in
  January and July, checked when the source can be reached);
* else a refusal naming the statement and that setting -- never a replay in another zone, which would
  give the mirror other instants than the source's (or refuse a literal the other zone skips at a DST
  change). A source that cannot be reached to tell its zone fails the sync (nothing acked; retried).
"""

from __future__ import annotations

import zoneinfo
from datetime import datetime

from adapters.base import DdlChange
from pipeline.config import Config
from pipeline.source.connect import connect
from sluice_common.errors import ConfigError, SourceError
from sluice_common.logs import get_logger

log = get_logger("sync")

#: local noon of these days, as Unix time if the zone were UTC: the source's offsets are told by them
_WINTER, _SUMMER = ("1970-01-01 12:00:00", 43200), ("2001-07-01 12:00:00", 993945600 + 43200)

#: (host, port, system) -> the zone (or the SYSTEM zone's offsets), read once per process
_ZONES: dict[tuple[str, int, bool], str | tuple[int, int]] = {}


def offset_text(seconds: int) -> str:
    """``+05:30`` for 19800 seconds east of UTC."""
    sign, off = ("+" if seconds >= 0 else "-"), abs(int(seconds))
    return f"{sign}{off // 3600:02d}:{off % 3600 // 60:02d}"


def zone_offsets(name: str) -> tuple[int, int]:
    """The named zone's UTC offsets (seconds) at local noon of the two days the source is asked about."""
    tz = zoneinfo.ZoneInfo(name)
    return tuple(int(datetime.strptime(local, "%Y-%m-%d %H:%M:%S").replace(tzinfo=tz).utcoffset().total_seconds())
                 for local, _ in (_WINTER, _SUMMER))


def _read(cfg: Config, system: bool) -> str | tuple[int, int]:
    """The source's global zone, or (``system``) its SYSTEM zone's offsets in January and July."""
    key = (cfg.source.host, cfg.source.port, system)
    if key not in _ZONES:
        conn = connect(cfg.source, session=("SET time_zone = 'SYSTEM'",) if system else ())
        try:
            with conn.cursor() as cur:
                cur.execute(f"SELECT @@session.time_zone, {_WINTER[1]} - UNIX_TIMESTAMP('{_WINTER[0]}'), "
                            f"{_SUMMER[1]} - UNIX_TIMESTAMP('{_SUMMER[0]}')")
                zone, winter, summer = cur.fetchone()
        finally:
            conn.close()
        zone = str(zone)
        _ZONES[key] = (int(winter), int(summer)) if zone.upper() == "SYSTEM" else zone
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
        if isinstance(found, tuple):  # SYSTEM: its offset, the named zone, or (no exact one needed) UTC
            return offset_text(found[0]) if found[0] == found[1] else (cfg.source.systemTimeZone or "")
        return found
    return system_zone(cfg, ddl, None)


def system_zone(cfg: Config, ddl: DdlChange, offsets: tuple[int, int] | None) -> str:
    """The SYSTEM zone as a zone the target knows, or a refusal of ``ddl`` naming the setting."""
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
    winter, summer = offsets
    if named:
        if zone_offsets(named) != (winter, summer):
            w, s = (offset_text(x) for x in zone_offsets(named))
            raise ConfigError(cfg.file, "source.systemTimeZone",
                              f"is {named} (UTC{w} in January, UTC{s} in July), but the source's SYSTEM zone is "
                              f"UTC{offset_text(winter)} / UTC{offset_text(summer)}; {what} ran in it",
                              hint="set it to the zone of the source's host (timedatectl, /etc/timezone), or leave "
                                   "it out when that zone has one offset all year")
        return named
    if winter == summer:
        return offset_text(winter)
    raise ConfigError(cfg.file, "source.systemTimeZone",
                      f"{what} ran in the source's SYSTEM time zone, which has daylight saving time "
                      f"(UTC{offset_text(winter)} in January, UTC{offset_text(summer)} in July) and no name the "
                      "target could be given; replayed in another zone its TIMESTAMP literals would mean other "
                      "instants. Nothing was acked",
                      hint=f"set source.systemTimeZone in {cfg.file} to the source host's zone by name (e.g. "
                           "Europe/Berlin: timedatectl or /etc/timezone there), then sync again")
