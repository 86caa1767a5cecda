"""The one place where driver exceptions become TransientError / RowError / TargetError.

RowError (terminal, caused by one row's data: too long, out of range, a constraint) is the only
kind a mapping's dead-letter store may take; the codes are in dialects.py.

Messages name the target (URL without password), the target table, the row's key when
there is one, and the database's own error (code and text). Passwords never appear: the
URL is rendered without one, and the driver text is scrubbed of the secret as well.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import exc as sa_exc

from adapters.rdb.client import packet_limit
from adapters.rdb.config import RdbTarget
from adapters.rdb.dialects import MYSQL_CONNECTION_LOST, MYSQL_PACKET_TOO_LARGE, Dialect, dialect_of
from sluice_common.errors import RowError, SluiceError, TargetError, TransientError


def driver_error(exc: BaseException) -> BaseException | None:
    """The DBAPI exception inside a SQLAlchemy one (or the exception itself)."""
    if isinstance(exc, sa_exc.DBAPIError):
        return exc.orig
    if isinstance(exc, sa_exc.SQLAlchemyError):
        return None
    return exc


def db_text(exc: BaseException, dialect: Dialect) -> str:
    """``MySQL error 1062: Duplicate entry ...`` -- code and the database's own message."""
    orig = driver_error(exc)
    if orig is None:
        return f"{type(exc).__name__}: {exc}"
    code = dialect.error_code(orig)
    if dialect.family == "mysql" and len(getattr(orig, "args", ())) >= 2:
        text = str(orig.args[1])
    else:
        text = str(orig).strip()
    text = " ".join(text.split())
    return f"{dialect.label} error {code}: {text}" if code not in (None, "") else f"{dialect.label}: {text}"


def _scrub(text: str, target: RdbTarget) -> str:
    pw = target.password.reveal()
    return text.replace(pw, "***") if pw and len(pw) >= 3 else text


def is_transient(exc: BaseException, dialect: Dialect) -> bool:
    if isinstance(exc, (sa_exc.TimeoutError, sa_exc.DisconnectionError)):
        return True
    if isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated:
        return True
    return dialect.is_transient(driver_error(exc))


#: what to do about a row the target refuses for its own data (too long, out of range, a constraint)
ROW_HINT = ("widen the target column or fix the row at the source, then sync again (replays are idempotent); "
            "or set deadLetter: true in the mapping to set such rows aside and keep going (docs/deadletter.md)")


def classify(exc: BaseException, target: RdbTarget, *, table: str, action: str, key: Any = None,
             hint: str | None = None) -> SluiceError:
    """Turn a driver/SQLAlchemy exception into the error the job understands.

    ``action`` says what was attempted ("insert into", "update", "connect to"), ``table``
    the target table, ``key`` the primary key of the row (or None for a set statement).
    """
    if isinstance(exc, SluiceError):
        return exc
    dialect = dialect_of(target)
    where = f" key {_key(key)}" if key is not None else ""
    message = _scrub(f"{action} {table}{where} on {target.label}: {db_text(exc, dialect)}", target)
    if is_transient(exc, dialect):
        return TransientError(message, hint=hint or "retried by the job; check the target if it persists")
    orig = driver_error(exc)
    err = RowError(message, hint=hint or ROW_HINT) if dialect.is_row_error(orig) else TargetError(message, hint=hint)
    #: a unique or foreign key refused the row: an ordered chunk tries again change by change
    err.conflict = dialect.is_unique_violation(orig) or dialect.is_fk_violation(orig)  # type: ignore[attr-defined]
    return err


def statement_bytes(exc: BaseException) -> int:
    """At least how many bytes the failed statement had: its text plus its string and bytes
    parameters as they are (the driver's escaping only adds to them)."""
    text = getattr(exc, "statement", None) or ""
    size = len(text.encode("utf-8", "surrogateescape")) if isinstance(text, str) else len(text)
    params = getattr(exc, "params", None)
    stack = [params] if params is not None else []
    while stack:
        p = stack.pop()
        if isinstance(p, str):
            size += len(p.encode("utf-8", "surrogateescape"))
        elif isinstance(p, (bytes, bytearray, memoryview)):
            size += len(p)
        elif isinstance(p, (list, tuple)):
            stack.extend(p)
        elif isinstance(p, dict):
            stack.extend(p.values())
    return size


def packet_limit_error(exc: BaseException, target: RdbTarget) -> tuple[int, int] | None:
    """``(statement bytes, max_allowed_packet)`` when ``exc`` is a MySQL/MariaDB target refusing a
    statement longer than its ``max_allowed_packet`` (by code: 1153; or the connection closed, 2006 /
    2013, under a statement longer than the limit the connection read), else None."""
    dialect = dialect_of(target)
    limit = packet_limit(target)
    if dialect.family != "mysql" or limit is None:
        return None
    code = dialect.error_code(driver_error(exc))
    size = statement_bytes(exc)
    if code in MYSQL_PACKET_TOO_LARGE or (code in MYSQL_CONNECTION_LOST and size > limit):
        return size, limit
    return None


def packet_error(exc: BaseException, target: RdbTarget, *, table: str, action: str, key: Any,
                 rows: int) -> SluiceError | None:
    """The error for a statement longer than the target's ``max_allowed_packet`` (None: it was not):
    one row is a RowError naming the setting, the table and the key (a mapping's dead-letter store
    may take it); several rows are cut anew when the chunk is tried again (TransientError: a new
    connection reads the limit again)."""
    found = packet_limit_error(exc, target)
    if found is None:
        return None
    size, limit = found
    where = f" key {_key(key)}" if rows == 1 else f" ({rows} rows)"
    message = _scrub(f"{action} {table}{where} on {target.label}: the statement is at least {size} bytes, more "
                     f"than the target's max_allowed_packet ({limit} bytes): {db_text(exc, dialect_of(target))}",
                     target)
    if rows > 1:
        return TransientError(message, hint="retried with smaller statements")
    want = 1 << max(size + 4096, 1).bit_length()
    return RowError(message, hint=f"raise max_allowed_packet on the target (SET GLOBAL max_allowed_packet = {want}; "
                    "and in its server config), then sync again; or set deadLetter: true in the mapping to set such "
                    "rows aside (docs/deadletter.md)")


def row_error(message: str, *, table: str, key: str, hint: str | None = None) -> RowError:
    """A row the writer itself cannot write (a value that does not convert), naming table and key."""
    err = RowError(message, hint=hint)
    err.table, err.key = table, key  # type: ignore[attr-defined]
    return err


def connect_error(exc: BaseException, target: RdbTarget, *, preflight: bool = False) -> SluiceError:
    """A failure to open a connection; on pre-flight (``check()``) always terminal."""
    dialect = dialect_of(target)
    orig = driver_error(exc)
    text = _scrub(f"cannot connect to {target.label}: {db_text(exc, dialect)}", target)
    unknown_db = dialect.error_code(orig) in (1049, "3D000") or (  # PostgreSQL at connect: no SQLSTATE
        dialect.family == "postgresql" and f'database "{target.database}" does not exist' in str(orig))
    if unknown_db and target.database:
        return TargetError(text, hint=f"create database {target.database} on the target (CREATE DATABASE), or fix "
                           "the database in the adapter's jdbc.url; a mirror's tables come from the source's "
                           "definitions (mysqldump --no-data), and the rows from `sluice bootstrap` or `sluice etl` "
                           "(docs/etl.md)")
    if dialect.is_auth_failure(orig):
        return TargetError(text, hint="check the target's username, password and database")
    if preflight:
        return TargetError(text, hint="check the host, port, credentials and that the server runs")
    if is_transient(exc, dialect):
        return TransientError(text)
    return TargetError(text)


def _key(key: Any) -> str:
    """A key for a message: a span or a key already formatted stays as it is."""
    return key if isinstance(key, str) else format_key(key)


def format_key(key: Any) -> str:
    """``{id=7}`` / ``{a=1, b='x'}``: a row key for messages."""
    if isinstance(key, dict):
        return "{" + ", ".join(f"{k}={v!r}" for k, v in key.items()) + "}"
    return repr(key)
