"""Pre-flight checks of the source server, flavour detection and its current position.

Capture refuses to start unless the server writes a binlog that can be captured
faithfully by default: binlog on, ROW format, FULL row image, FULL row metadata. Each refusal
names the setting and the fix. (A session can still override the format and the row image: the
framer and the job check what each event carries. Compressed binlogs and partial JSON updates
are decoded, so their settings are not refused.)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import pymysql

from pipeline.config import SourceConfig
from pipeline.source.connect import connect, current_user, error_code
from sluice_common.errors import GrantError, PositionError, SourceError

from .position import Position

#: ER_SPECIFIC_ACCESS_DENIED_ERROR: the statement needs a global privilege the user lacks
PRIVILEGE_DENIED = frozenset({1227})
#: what capture asks the server for its binlog's position, and the grant that allows it (on
#: MariaDB 10.5+ REPLICATION CLIENT is another name of BINLOG MONITOR: one GRANT works on both)
BINLOG_POSITION_GRANT = "REPLICATION CLIENT"
CHECKED_VARIABLES = (
    "log_bin", "binlog_format", "binlog_row_image", "binlog_row_metadata", "binlog_checksum",
    "binlog_transaction_compression", "binlog_row_value_options", "log_bin_compress",
    "gtid_mode", "version", "version_comment", "server_id",
)


@dataclass(frozen=True)
class ServerId:
    """A server as capture tells servers apart: ``@@server_id`` and (MySQL) ``@@server_uuid``."""

    server_id: int
    uuid: str | None = None

    def text(self) -> str:
        return f"server_id {self.server_id}" + (f", server_uuid {self.uuid}" if self.uuid else "")


def server_identity(cur, flavor: str) -> ServerId:
    """The connected server's identity (MariaDB has no server UUID)."""
    if flavor == "mysql":
        cur.execute("SELECT @@GLOBAL.server_id, @@GLOBAL.server_uuid")
        sid, uuid = cur.fetchone()
        return ServerId(int(sid), str(uuid))
    cur.execute("SELECT @@GLOBAL.server_id")
    return ServerId(int(cur.fetchone()[0]))


@dataclass(frozen=True)
class ServerInfo:
    """What capture needs to know about the source."""

    flavor: str                 # "mariadb" | "mysql"
    version: str
    settings: Mapping[str, str]


def detect_flavor(version: str, comment: str, configured: str = "auto") -> str:
    """``mariadb`` or ``mysql``, from VERSION()/@@version_comment unless configured."""
    if configured != "auto":
        return configured
    return "mariadb" if "mariadb" in f"{version} {comment}".lower() else "mysql"


def read_settings(conn: pymysql.connections.Connection) -> dict[str, str]:
    """The binlog-related global variables (lower-case names; absent ones are missing)."""
    names = ",".join(f"'{n}'" for n in CHECKED_VARIABLES)
    with conn.cursor() as cur:
        cur.execute(f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({names})")
        return {str(k).lower(): str(v) for k, v in cur.fetchall()}


def check_settings(settings: Mapping[str, str], where: str = "the source") -> None:
    """Raise SourceError naming the first setting that makes capture unsafe."""
    def refuse(name: str, have: str | None, want: str, extra: str = "") -> None:
        shown = "missing (server too old)" if have is None else f"{name}={have}"
        raise SourceError(
            f"{where} cannot be captured: {shown}; capture needs {name}={want}{extra}",
            hint=f"set {name}={want} in the server config (my.cnf) and with SET GLOBAL {name}={want}, "
            "then take a new snapshot if rows were written meanwhile")

    get = {k.lower(): str(v) for k, v in settings.items()}.get
    if (get("log_bin") or "OFF").upper() not in ("ON", "1"):
        raise SourceError(f"{where} cannot be captured: the binary log is off (log_bin=OFF)",
                          hint="start the server with log_bin (log-bin=mysql-bin) and binlog_format=ROW")
    if (get("binlog_format") or "").upper() != "ROW":
        refuse("binlog_format", get("binlog_format"), "ROW")
    if (get("binlog_row_image") or "").upper() != "FULL":
        refuse("binlog_row_image", get("binlog_row_image"), "FULL")
    if get("binlog_row_metadata") is None or get("binlog_row_metadata", "").upper() != "FULL":
        refuse("binlog_row_metadata", get("binlog_row_metadata"), "FULL",
               " (MySQL 8.0.14+ or MariaDB 10.5+)")


def inspect_server(src: SourceConfig, conn: pymysql.connections.Connection | None = None) -> ServerInfo:
    """Connect, read the settings, check them, and return the ServerInfo."""
    own = conn is None
    conn = conn or connect(src)
    try:
        settings = read_settings(conn)
        check_settings(settings, f"the source {src.host}:{src.port}")
        flavor = detect_flavor(settings.get("version", ""), settings.get("version_comment", ""), src.flavor)
        return ServerInfo(flavor=flavor, version=settings.get("version", ""), settings=settings)
    finally:
        if own:
            conn.close()


@contextmanager
def needs_grant(cur, statement: str, grant: str, on: str = "*.*") -> Iterator[None]:
    """Turn the server's "access denied" (by error code) for ``statement`` into a SourceError that
    names the grant and the GRANT statement that gives it."""
    try:
        yield
    except pymysql.err.OperationalError as e:
        if error_code(e) not in PRIVILEGE_DENIED:
            raise
        who = current_user(cur)
        raise GrantError(f"the source user {who} may not run {statement}: it lacks the {grant} privilege "
                          f"(server: {e.args[-1]})",
                          hint=f"GRANT {grant} ON {on} TO {who}; (the capture user needs REPLICATION SLAVE, "
                          "REPLICATION CLIENT, and SELECT on the mapped databases: docs/config.md)") from None


def binary_logs(cur) -> dict[str, int]:
    """``SHOW BINARY LOGS``: each binlog file and its size (a missing grant named)."""
    with needs_grant(cur, "SHOW BINARY LOGS", BINLOG_POSITION_GRANT):
        cur.execute("SHOW BINARY LOGS")
    return {str(r[0]): int(r[1]) for r in cur.fetchall()}


def master_status(cur) -> tuple:
    """The row of ``SHOW BINARY LOG STATUS`` (``SHOW MASTER STATUS`` on older servers)."""
    with needs_grant(cur, "SHOW MASTER STATUS", BINLOG_POSITION_GRANT):
        try:
            cur.execute("SHOW BINARY LOG STATUS")
        except pymysql.err.ProgrammingError:
            cur.execute("SHOW MASTER STATUS")
    row = cur.fetchone()
    if not row:
        raise SourceError("the source has no binary log (SHOW MASTER STATUS is empty)",
                          hint="enable log_bin on the source")
    return row


def current_position(conn: pymysql.connections.Connection, flavor: str) -> Position:
    """The server's current end of binlog, with its GTID state (where ``--once`` stops) and the
    server's identity."""
    with conn.cursor() as cur:
        row = master_status(cur)
        logfile, logpos = row[0], int(row[1])
        if flavor == "mariadb":
            cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (logfile, logpos))
            gtid = (cur.fetchone() or [None])[0]
        else:
            gtid = row[4] if len(row) > 4 else None
        server = server_identity(cur, flavor)
        return Position(logfile=logfile, logpos=logpos, gtid=(gtid or "").replace("\n", "") or None,
                        server_id=server.server_id, server_uuid=server.uuid)


def gtid_at(conn: pymysql.connections.Connection, flavor: str, logfile: str, logpos: int) -> str | None:
    """MariaDB: the GTID state at a binlog coordinate (None for MySQL or when unknown)."""
    if flavor != "mariadb":
        return None
    with conn.cursor() as cur:
        cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (logfile, logpos))
        return (cur.fetchone() or [None])[0] or None


def validate_start(conn: pymysql.connections.Connection, start: Position, fix: str) -> None:
    """PositionError unless the server still holds ``start``'s binlog file and offset (the GTIDs and
    the file's identity are checked by :mod:`identity`)."""
    with conn.cursor() as cur:
        files = binary_logs(cur)
    if start.logfile not in files:
        oldest = min(files) if files else "none"
        raise PositionError(f"the start position {start.text()} is not on the source: binlog {start.logfile} "
                            f"was purged or never existed (oldest binlog: {oldest})", hint=fix)
    if start.logpos > files[start.logfile]:
        raise PositionError(f"the start position {start.text()} is past the end of {start.logfile} "
                            f"({files[start.logfile]} bytes): the binlog was reset or replaced", hint=fix)
