"""The binlog position a full load hands off from (bootstrap).

MariaDB: ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` and then ``SHOW STATUS LIKE
'binlog_snapshot_%'``: the server guarantees that ``binlog_snapshot_file``/``_position`` are
exactly the binlog position of that snapshot -- every transaction before it in the binlog is
visible in the snapshot (committed in the engine), none after it is. A plain ``SHOW MASTER
STATUS`` does not give that: with group commit a transaction can already be in the binlog
before the engine commit makes it visible, so a read right after could miss a change that
the stream would never replay.

MySQL has no ``binlog_snapshot_*``: ``FLUSH TABLES WITH READ LOCK`` (needs RELOAD) stops
commits for the instant it takes to read ``SHOW MASTER STATUS``, then ``UNLOCK TABLES``
(the documented equivalent; not tested here, the suite has no MySQL server).

Only the position P matters: the load's reads all start after P was taken, so each one sees
at least everything before P, and replaying the binlog from P converges (docs/etl.md).
"""

from __future__ import annotations

import pymysql

from pipeline.capture.position import Position
from pipeline.capture.server_check import current_position, gtid_at, inspect_server
from pipeline.config import SourceConfig
from pipeline.source.connect import connect
from sluice_common.errors import SourceError


def snapshot_position(src: SourceConfig) -> tuple[Position, str]:
    """(P, how it was taken). Also checks that the source can be captured at all."""
    conn = connect(src)
    try:
        info = inspect_server(src, conn)
        with conn.cursor() as cur:
            if info.flavor == "mariadb":
                cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
                cur.execute("SHOW SESSION STATUS LIKE 'binlog_snapshot_%'")
                status = {str(k).lower(): str(v) for k, v in cur.fetchall()}
                cur.execute("COMMIT")
                logfile, logpos = status.get("binlog_snapshot_file"), status.get("binlog_snapshot_position")
                if not logfile or not logpos:
                    raise SourceError("the source reports no binlog_snapshot_file/position",
                                      hint="enable log_bin on the source")
                pos = Position(logfile=logfile, logpos=int(logpos),
                               gtid=gtid_at(conn, info.flavor, logfile, int(logpos)))
                return pos, "START TRANSACTION WITH CONSISTENT SNAPSHOT + binlog_snapshot_file/position"
            try:
                cur.execute("FLUSH TABLES WITH READ LOCK")
            except pymysql.MySQLError as e:
                raise SourceError(f"cannot take a consistent binlog position on the source: {e.args[-1]}",
                                  hint="grant RELOAD to the source user (FLUSH TABLES WITH READ LOCK)") from None
            try:
                pos = current_position(conn, info.flavor)
            finally:
                cur.execute("UNLOCK TABLES")
            return pos, "FLUSH TABLES WITH READ LOCK + SHOW MASTER STATUS"
    finally:
        conn.close()
