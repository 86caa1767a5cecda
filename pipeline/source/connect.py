"""Connections to the source (MySQL/MariaDB): the one place that turns the ``source`` settings
into pymysql's arguments (host, port, user, password, connect timeout, TLS from ``source.ssl``,
through :func:`sluice_common.mysqlconn.params`), opens a connection (autocommit, utf8mb4, an
optional UTC session) and says which error codes mean "the connection broke: retry".

Every source connection goes through here: capture (the server checks and the binlog
connections), the pre-flight checks of ``sync``/``run``, ``status``, the full load (ETL) and
``verify``; the search adapters' join re-queries build theirs with the same ``params``. So each
of them honours ``source.ssl`` (a source that requires TLS works everywhere, docs/security.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pymysql
import pymysql.cursors

from pipeline.config import SourceConfig
from sluice_common.errors import SourceError, TransientError
from sluice_common.mysqlconn import params

#: pymysql/MySQL client errors that mean "the connection broke" (for a reading connection): worth a retry
TRANSIENT_CODES = frozenset({1205, 1213, 1040, 1053, 1317, 1927, 4031, 2002, 2003, 2006, 2013, 2055, 0})
#: the binlog connection went away or was killed: lost (2013, 2006), refused (2003), KILLed (1927),
#: server shutting down (1053), interrupted (1317), network read/write errors (1158-1161)
BINLOG_TRANSIENT_CODES = frozenset({2003, 2006, 2013, 1927, 1053, 1317, 1158, 1159, 1160, 1161})
HINT = "check source.host/port/user/password in the config and that the server is running"


def settings(src: SourceConfig) -> dict[str, Any]:
    """pymysql's arguments for the deployment's source (see :func:`params`)."""
    return params(src.host, src.port, src.user, src.password, src.connectTimeout, src.ssl)


def error_code(e: BaseException) -> int | None:
    """The MySQL error number of ``e``, if it has one."""
    args = getattr(e, "args", None)
    return args[0] if args and isinstance(args[0], int) else None


def current_user(cur: Any) -> str:
    """The account the server authenticated, as a GRANT names it: ``'sluice'@'%'`` (capture's grant
    checks and the job's pre-flight name it)."""
    cur.execute("SELECT CURRENT_USER()")
    user, _, host = str((cur.fetchone() or [""])[0]).rpartition("@")
    return f"'{user}'@'{host}'"


def is_transient(e: BaseException) -> bool:
    """A reading connection's error that is worth a retry (the connection broke)."""
    if isinstance(e, pymysql.err.InterfaceError):
        return True
    return isinstance(e, pymysql.MySQLError) and error_code(e) in TRANSIENT_CODES


def connect(src: SourceConfig, *, session: Sequence[str] = (), transient: bool = False, hint: str = HINT,
            **extra: Any) -> pymysql.connections.Connection:
    """A connection to the source: autocommit, utf8mb4, ``extra`` pymysql arguments (e.g. ``conv``,
    ``cursorclass``), then each ``session`` statement (e.g. :data:`sluice_common.mysqlconn.UTC_SESSION`).

    A failure to connect is a SourceError naming the server (``hint``: what to check); with
    ``transient``, a TransientError when the code says the connection broke (the caller retries)."""
    try:
        conn = pymysql.connect(**{**settings(src), "autocommit": True, "charset": "utf8mb4", **extra})
    except pymysql.MySQLError as e:
        cls = TransientError if transient and error_code(e) in TRANSIENT_CODES else SourceError
        raise cls(f"cannot connect to the source {src.user}@{src.host}:{src.port}: {e.args[-1]}", hint=hint) \
            from None
    if session:
        with conn.cursor(pymysql.cursors.Cursor) as cur:
            for s in session:
                cur.execute(s)
    return conn
