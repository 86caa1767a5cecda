"""A source table's definition as a DDL statement copied it, when that can be proved.

``CREATE TABLE t LIKE other.s`` copies ``other.s`` as it was at that moment; a mirror that does not
cover ``other`` has no copy of it (adapters/rdb/like.py; the statement is parsed by
sluice_common/mysqlddl.py). The source's ``SHOW CREATE TABLE other.s`` gives its definition *now*,
which is the one the statement copied when nothing changed it since: MariaDB and MySQL set a
table's ``information_schema.TABLES.CREATE_TIME`` anew on every statement that changes its
definition (CREATE, ALTER of any kind, RENAME into the name), so a CREATE_TIME before the second
the statement ran (the binlog event's timestamp) proves it. A CREATE_TIME in
that second or later -- the table was created, altered or renamed around or after the statement
-- proves nothing, and the mirror refuses the statement by name instead of guessing.
"""

from __future__ import annotations

from dataclasses import replace

import pymysql

from adapters.base import DdlChange
from pipeline.config import SourceConfig
from pipeline.source.connect import connect
from sluice_common.logs import get_logger
from sluice_common.mysqlconn import UTC_SESSION
from sluice_common.mysqlddl import like_source
from sluice_common.mysqltypes import quote_ident

log = get_logger("sync")


_ZONES: dict[tuple[str, int, bool], str] = {}


def source_time_zone(source: SourceConfig, session_zone: str | None = None) -> str:
    """The zone a mirror replays a DDL statement in (TIMESTAMP literals such as ``DEFAULT
    '1970-01-01 00:00:01'``, an ``ADD COLUMN`` filling rows, mean an instant in it): the zone its
    session had (``session_zone``, from the binlog's query event, which names it when the statement
    used it), else the source's global one (``@@global.time_zone``; the statement used none, so any
    zone gives the same result). ``SYSTEM`` (the source's operating system zone, which has no name to
    hand the target) becomes its UTC offset when that is the same in January and July (no daylight
    saving time); else, or when the source cannot be reached, "" (Sluice's UTC session), with a
    warning. Read once per process."""
    if session_zone and session_zone.upper() != "SYSTEM":
        return session_zone
    system = bool(session_zone)
    key = (source.host, source.port, system)
    if key not in _ZONES:
        try:
            conn = connect(source, session=("SET time_zone = 'SYSTEM'",) if system else ())
        except Exception as e:  # noqa: BLE001 - a SourceError: DDL is replayed in UTC, as before
            log.warning("source time zone unknown: DDL is replayed in UTC", error=str(e).splitlines()[0])
            return ""
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT @@session.time_zone, 43200 - UNIX_TIMESTAMP('1970-01-01 12:00:00'), "
                            "993945600 + 43200 - UNIX_TIMESTAMP('2001-07-01 12:00:00')")
                zone, winter, summer = cur.fetchone()
        finally:
            conn.close()
        zone = str(zone)
        if zone.upper() == "SYSTEM":
            if winter == summer:
                sign, off = ("+" if winter >= 0 else "-"), abs(int(winter))
                zone = f"{sign}{off // 3600:02d}:{off % 3600 // 60:02d}"
            else:
                log.warning("the source's time zone is SYSTEM with daylight saving time, which has no name to hand "
                            "the target: DDL is replayed in UTC (TIMESTAMP literals in DDL may differ)")
                zone = ""
        _ZONES[key] = zone
    return _ZONES[key]


def with_like_definition(source: SourceConfig, ddl: DdlChange) -> DdlChange:
    """``ddl`` with ``like`` set when it is a ``CREATE TABLE ... LIKE`` of another database's table
    (see the module docstring); any other statement as it is."""
    found = like_source(ddl.sql) if ddl.kind == "CREATE" else None
    if found is None or found[0] is None or found[0] == ddl.database:
        return ddl
    db, table = found[0], found[1]
    try:
        conn = connect(source, session=(UTC_SESSION,), hint="the source is needed to read the definition of "
                       f"{db}.{table}, which a CREATE TABLE ... LIKE copies")
    except Exception as e:  # noqa: BLE001 - a SourceError: the statement is refused with the reason
        return replace(ddl, like=("", f"the source could not be reached to read it: {str(e).splitlines()[0]}"))
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT UNIX_TIMESTAMP(CREATE_TIME) FROM information_schema.TABLES "
                        "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s", (db, table))
            row = cur.fetchone()
            if row is None:
                return replace(ddl, like=("", f"{db}.{table} no longer exists on the source"))
            changed = None if row[0] is None else int(row[0])
            if not ddl.es or changed is None or changed >= ddl.es // 1000:
                when = "unknown" if changed is None else f"at {changed} (Unix time)"
                return replace(ddl, like=("", f"{db}.{table} was last created, altered or renamed {when}, not before "
                                              f"the statement ran at {ddl.es // 1000}"))
            cur.execute(f"SHOW CREATE TABLE {quote_ident(db)}.{quote_ident(table)}")
            definition = cur.fetchone()[1]
    except pymysql.MySQLError as e:
        return replace(ddl, like=("", f"reading it from the source failed: {e}"))
    finally:
        conn.close()
    log.info("like source read", database=ddl.database, table=ddl.table, like=f"{db}.{table}")
    return replace(ddl, like=(definition, ""))
