"""The binlog dump connection of the native path: handshake with pymysql, then raw large reads.

pymysql does the client handshake (auth, TLS) and the session settings a replica sends
(checksum, heartbeat, MariaDB capability and GTID connect state); then the dump command
(``COM_BINLOG_DUMP`` by file/pos or MariaDB GTID, ``COM_BINLOG_DUMP_GTID`` for a MySQL GTID
set) is written, and from then on ``read()`` returns whatever bytes the socket has, up to
``CHUNK`` at a time, for ``sluice_binlog.Stream`` to frame and parse. There is no reconnect
here: a lost connection is a TransientError and the caller resumes from the stored position.
"""

from __future__ import annotations

import struct

import pymysql
from pymysqlreplication.gtid import GtidSet

from pipeline.config import SourceConfig
from pipeline.source.connect import settings as source_settings
from sluice_common.errors import TransientError

from .position import Position

CHUNK = 1 << 20
COM_BINLOG_DUMP, COM_BINLOG_DUMP_GTID = 0x12, 0x1E
DUMP_NON_BLOCK, DUMP_ANNOTATE_ROWS, DUMP_THROUGH_GTID = 0x01, 0x02, 0x04


class DumpConnection:
    """One binlog dump connection from ``start`` (see the module docstring)."""

    def __init__(self, src: SourceConfig, flavor: str, start: Position, *, mode: str, follow: bool):
        self.src, self.flavor, self.start, self.mode, self.follow = src, flavor, start, mode, follow
        self.conn: pymysql.connections.Connection | None = None
        self.checksum = False

    def open(self) -> None:
        s = self.src
        self.conn = conn = pymysql.connect(**source_settings(s), autocommit=True)
        with conn.cursor() as cur:
            cur.execute("SELECT @@GLOBAL.binlog_checksum")
            alg = str((cur.fetchone() or ["NONE"])[0] or "NONE").upper()
            self.checksum = alg != "NONE"
            if self.checksum:
                cur.execute("SET @master_binlog_checksum = @@global.binlog_checksum")
            if self.follow:  # heartbeats keep an idle connection alive and carry the position
                cur.execute("SET @master_heartbeat_period = %s", (int(s.heartbeatSeconds * 1_000_000_000),))
            cur.execute("SET @mariadb_slave_capability = 4")  # GTID events, no dummy replacements
            if self.flavor == "mariadb" and self.mode == "gtid":
                cur.execute("SET @slave_connect_state = %s", (self.start.gtid,))
                cur.execute("SET @slave_gtid_strict_mode = 1")
                cur.execute("SET @slave_gtid_ignore_duplicates = 0")
        conn._write_bytes(self._dump_command())
        conn._next_seq_id = 1
        # the kernel's autotuned receive buffer holds what the server sends while we decode
        conn._sock.settimeout(max(30.0, s.heartbeatSeconds * 4) if self.follow else max(60.0, s.connectTimeout))

    def _dump_command(self) -> bytes:
        flags = 0 if self.follow else DUMP_NON_BLOCK
        sid = self.src.serverId
        if self.mode == "gtid" and self.flavor == "mariadb":
            body = struct.pack("<BIHI", COM_BINLOG_DUMP, 4, flags | DUMP_ANNOTATE_ROWS, sid)
        elif self.mode == "gtid":
            gtids = GtidSet(self.start.gtid)
            body = (struct.pack("<BHII", COM_BINLOG_DUMP_GTID, flags | DUMP_THROUGH_GTID, sid, 3) + b"\0\0\0"
                    + struct.pack("<QI", 4, gtids.encoded_length) + gtids.encoded())
        else:
            body = struct.pack("<BIHI", COM_BINLOG_DUMP, self.start.logpos, flags, sid) + self.start.logfile.encode()
        return struct.pack("<I", len(body))[:3] + b"\0" + body

    def read(self) -> bytes:
        """The next bytes of the stream (blocking); TransientError when the connection is gone."""
        conn = self.conn
        if conn is None:
            raise TransientError("the binlog connection is closed")
        try:
            data = conn._rfile.read1(CHUNK)
        except (OSError, ValueError, AttributeError) as e:  # timeout, reset, closed file
            raise TransientError(f"the binlog connection to the source was lost: {e}",
                                 hint="capture resumes from the last stored position") from None
        if not data:
            raise TransientError("the source closed the binlog connection",
                                 hint="capture resumes from the last stored position")
        return data

    def close(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            try:
                conn._force_close()
            except Exception:  # noqa: BLE001 - closing a broken connection may fail in any way
                pass
