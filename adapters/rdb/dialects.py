"""The dialect table: what differs between MySQL/MariaDB, PostgreSQL and SQLite targets.

One :class:`Dialect` per family says how a session is set up, how duplicate keys are
skipped, how rows of key-less tables are matched, and which error codes mean "unique
violation", "try again" or (for DDL replay) "already applied". Error codes only: never
the English message text. docs/rdb.md has the same table for humans.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any

from adapters.rdb.config import RdbTarget

# MySQL/MariaDB server and client error numbers.
MYSQL_DUP_ENTRY = frozenset({1062, 1586})  # ER_DUP_ENTRY, ER_DUP_ENTRY_WITH_KEY_NAME
MYSQL_TRANSIENT = frozenset({
    1205,  # ER_LOCK_WAIT_TIMEOUT
    1213,  # ER_LOCK_DEADLOCK
    1040,  # ER_CON_COUNT_ERROR (too many connections)
    1053,  # ER_SERVER_SHUTDOWN
    1317,  # ER_QUERY_INTERRUPTED
    1927,  # ER_CONNECTION_KILLED (MariaDB)
    4031,  # ER_CLIENT_INTERACTION_TIMEOUT (MySQL 8)
    1412,  # ER_TABLE_DEF_CHANGED: a table created after the transaction's snapshot (_sluice_progress,
    #        made on a connection of its own), "please retry transaction"
    2002, 2003, 2006, 2013, 2055,  # CR_CONNECTION_ERROR, CR_CONN_HOST_ERROR, gone away, lost, lost (SSL)
    0,  # pymysql InterfaceError(0, ''): the connection was already closed
})
#: a statement larger than the server's max_allowed_packet: the server says so (ER_NET_PACKET_TOO_LARGE)
#: and closes the connection, which the client often sees first, while it still writes (gone away,
#: lost: :func:`adapters.rdb.errors.packet_limit_error` tells them from an outage by the statement's size)
MYSQL_PACKET_TOO_LARGE = frozenset({1153})
MYSQL_CONNECTION_LOST = frozenset({2006, 2013})
MYSQL_FOREIGN_KEY = frozenset({1216, 1217, 1451, 1452})  # no referenced row / row is referenced
MYSQL_AUTH = frozenset({1044, 1045, 1049, 1698})  # access denied, unknown database
#: errors one row's data causes (a mapping's dead-letter store may take the row): NULL in a NOT
#: NULL column, out of range, truncated/incorrect value, data too long, invalid JSON, foreign key,
#: CHECK constraint, and a duplicate on a secondary unique key (1062/1586 after the skip probe)
MYSQL_ROW = frozenset({1048, 1062, 1263, 1264, 1265, 1292, 1366, 1367, 1406, 1411, 1416, 1451, 1452, 1586,
                       1690, 3140, 3819, 4025})
#: DDL replay: error codes meaning "this statement was applied before" per DdlChange kind.
MYSQL_DDL_APPLIED: dict[str, frozenset[int]] = {
    "CREATE": frozenset({1050}),  # ER_TABLE_EXISTS_ERROR
    "ERASE": frozenset({1051}),  # ER_BAD_TABLE_ERROR (unknown table)
    "ALTER": frozenset({1060, 1061, 1068, 1091, 1826, 1146}),  # dup column/key/PK, can't drop, dup FK, no table
    "RENAME": frozenset({1050, 1146}),
    "TRUNCATE": frozenset({1146}),
    "CINDEX": frozenset({1061, 1146}),  # ER_DUP_KEYNAME
    "DINDEX": frozenset({1091, 1146}),  # ER_CANT_DROP_FIELD_OR_KEY
    "CSEQUENCE": frozenset({1050}),  # CREATE SEQUENCE (adapters/rdb/dbsequence.py): it exists
    "ASEQUENCE": frozenset({4091, 1146}),  # ALTER SEQUENCE: ER_UNKNOWN_SEQUENCES (dropped later)
    "DSEQUENCE": frozenset({4091, 1051}),  # DROP SEQUENCE: unknown sequence
}
#: Strict (errors instead of silent truncation), but zero and partial-zero dates allowed, an
#: explicit 0 stays 0 in AUTO_INCREMENT columns, and dates MySQL could store are accepted.
MYSQL_SQL_MODE = "STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION,NO_AUTO_VALUE_ON_ZERO,ALLOW_INVALID_DATES"
MYSQL_RELAXED_MODE = "NO_ENGINE_SUBSTITUTION,NO_AUTO_VALUE_ON_ZERO,ALLOW_INVALID_DATES"

PG_UNIQUE = frozenset({"23505"})
PG_FOREIGN_KEY = frozenset({"23503"})
PG_TRANSIENT = frozenset({"40001", "40P01", "55P03", "57014", "57P01", "57P02", "57P03", "53300", "58000"})
PG_AUTH = frozenset({"28000", "28P01", "3D000"})
PG_ROW_CLASSES = ("22", "23")  # data exception, integrity constraint violation

SQLITE_UNIQUE = frozenset({1555, 2067})  # SQLITE_CONSTRAINT_PRIMARYKEY, SQLITE_CONSTRAINT_UNIQUE
SQLITE_FOREIGN_KEY = frozenset({787})  # SQLITE_CONSTRAINT_FOREIGNKEY
SQLITE_TRANSIENT_PRIMARY = frozenset({5, 6})  # SQLITE_BUSY, SQLITE_LOCKED (and their extended codes)
SQLITE_ROW_PRIMARY = frozenset({18, 19, 20})  # SQLITE_TOOBIG, SQLITE_CONSTRAINT, SQLITE_MISMATCH


@dataclass(frozen=True)
class Dialect:
    """How one family of targets behaves (see the module docstring)."""

    family: str  # mysql | postgresql | sqlite
    label: str  # for messages: "MySQL", "PostgreSQL", "SQLite"
    placeholder: str  # the driver's positional parameter marker
    max_params: int  # bound parameters per statement (MySQL: client-side, no limit)
    session_sql: tuple[str, ...]  # run once on every new connection
    on_conflict_skip: bool  # INSERT ... ON CONFLICT (pk) DO NOTHING is available
    null_safe_eq: str  # template with {a} and {b}

    def error_code(self, orig: BaseException | None) -> Any:
        """The driver error's code: MySQL errno, PostgreSQL SQLSTATE, SQLite extended code."""
        if orig is None:
            return None
        if self.family == "mysql":
            args = getattr(orig, "args", ())
            return args[0] if args and isinstance(args[0], int) else None
        if self.family == "postgresql":
            return getattr(orig, "sqlstate", None)
        return getattr(orig, "sqlite_errorcode", None)

    def is_unique_violation(self, orig: BaseException | None) -> bool:
        code = self.error_code(orig)
        return code in {"mysql": MYSQL_DUP_ENTRY, "postgresql": PG_UNIQUE, "sqlite": SQLITE_UNIQUE}[self.family]

    def is_fk_violation(self, orig: BaseException | None) -> bool:
        code = self.error_code(orig)
        return code in {"mysql": MYSQL_FOREIGN_KEY, "postgresql": PG_FOREIGN_KEY,
                        "sqlite": SQLITE_FOREIGN_KEY}[self.family]

    def is_transient(self, orig: BaseException | None) -> bool:
        code = self.error_code(orig)
        if self.family == "mysql":
            return code in MYSQL_TRANSIENT
        if self.family == "postgresql":
            if code is None:  # libpq reports connection failures without a SQLSTATE
                return type(orig).__name__ in ("OperationalError", "InterfaceError")
            return code in PG_TRANSIENT or code.startswith("08")
        return code is not None and code & 0xFF in SQLITE_TRANSIENT_PRIMARY

    def is_row_error(self, orig: BaseException | None) -> bool:
        """The error was caused by one row's data (see MYSQL_ROW, PG_ROW_CLASSES, SQLITE_ROW_PRIMARY)."""
        code = self.error_code(orig)
        if code is None:
            return False
        if self.family == "mysql":
            return code in MYSQL_ROW
        if self.family == "postgresql":
            return str(code)[:2] in PG_ROW_CLASSES
        return code & 0xFF in SQLITE_ROW_PRIMARY

    def is_auth_failure(self, orig: BaseException | None) -> bool:
        code = self.error_code(orig)
        return code in (MYSQL_AUTH if self.family == "mysql" else PG_AUTH)

    def is_ddl_applied(self, kind: str, orig: BaseException | None) -> bool:
        return self.family == "mysql" and self.error_code(orig) in MYSQL_DDL_APPLIED.get(kind, frozenset())


MYSQL = Dialect("mysql", "MySQL", "%s", 1 << 30,
                (f"SET SESSION sql_mode = '{MYSQL_SQL_MODE}', time_zone = '+00:00'",),
                on_conflict_skip=False, null_safe_eq="{a} <=> {b}")
POSTGRESQL = Dialect("postgresql", "PostgreSQL", "%s", 65535, ("SET TIME ZONE 'UTC'",),
                     on_conflict_skip=True, null_safe_eq="{a} IS NOT DISTINCT FROM {b}")
SQLITE = Dialect("sqlite", "SQLite", "?", 32766, (), on_conflict_skip=True, null_safe_eq="{a} IS {b}")
DIALECTS = {"mysql": MYSQL, "mariadb": MYSQL, "postgresql": POSTGRESQL, "sqlite": SQLITE}


def dialect_of(target: RdbTarget) -> Dialect:
    return DIALECTS[target.dialect]


def relaxed_prefix(is_mariadb: bool) -> tuple[str, str]:
    """(statement prefix, hint after the verb) that run one statement non-strict (ENUM '')."""
    if is_mariadb:
        return f"SET STATEMENT sql_mode = '{MYSQL_RELAXED_MODE}' FOR ", ""
    return "", f" /*+ SET_VAR(sql_mode = '{MYSQL_RELAXED_MODE}') */"


def fk_checks_sql(family: str, on: bool) -> str | None:
    """The statement that turns the session's foreign key checks (and actions) off or back on for
    changes the source applied without them; PostgreSQL as its own logical replication applies rows
    (``session_replication_role = replica``: foreign keys are triggers, not fired then; needs
    superuser or, PostgreSQL 15+, ``GRANT SET ON PARAMETER session_replication_role``). SQLite: None."""
    if family == "mysql":
        return f"SET SESSION foreign_key_checks = {1 if on else 0}"
    if family == "postgresql":
        return f"SET LOCAL session_replication_role = {'DEFAULT' if on else 'replica'}"
    return None


def connect_args(target: RdbTarget) -> dict[str, Any]:
    """Driver connect arguments: charset, TLS, and the target's own ``connect_args``."""
    args: dict[str, Any] = {}
    tls = target.tls
    if target.dialect in ("mysql", "mariadb"):
        args.update(charset="utf8mb4", binary_prefix=True, connect_timeout=10)
        if target.password.reveal():  # UTF-8, as the server hashed it (pymysql would send Latin-1)
            args["password"] = target.password.utf8()
        if tls.mode == "disable":
            args["ssl_disabled"] = True
        elif tls.mode != "prefer" or tls.ca or tls.cert:
            ctx = ssl.create_default_context(cafile=tls.ca)
            ctx.check_hostname = tls.mode == "verify-full"
            if tls.mode in ("require", "prefer"):
                ctx.verify_mode = ssl.CERT_NONE
            if tls.cert:
                ctx.load_cert_chain(tls.cert, tls.key)
            args["ssl"] = ctx
    elif target.dialect == "postgresql":
        args.update(connect_timeout=10, sslmode=tls.mode)
        for name, value in (("sslrootcert", tls.ca), ("sslcert", tls.cert), ("sslkey", tls.key)):
            if value:
                args[name] = value
    else:
        args.update(timeout=30)
    args.update(dict(target.connect_args))
    return args
