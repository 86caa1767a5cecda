"""Sluice's error taxonomy: every error a user can meet is one of these.

``SluiceError`` carries one actionable message (what is wrong, where, what to do) and an
exit code; the CLI prints the message, never a traceback, and never a password.
``TransientError`` may be retried with backoff; everything else is terminal. A
``RowError`` is the terminal kind that one row's data caused (too long, out of range, a
constraint): only those may go to a mapping's dead-letter store (docs/deadletter.md);
connection, auth and schema problems never do.
"""

from __future__ import annotations


class SluiceError(Exception):
    """A user-facing error: one actionable message and a non-zero exit code."""

    exit_code = 2

    def __init__(self, message: str, *, hint: str | None = None):
        self.message = message
        self.hint = hint
        super().__init__(message if not hint else f"{message}\n  fix: {hint}")


class ConfigError(SluiceError):
    """A config or mapping file is malformed; the message names the file and key."""

    def __init__(self, file: str, key: str | None, problem: str, *, hint: str | None = None):
        self.file, self.key, self.problem = file, key, problem
        where = f"{file}: {key}: " if key else f"{file}: "
        super().__init__(f"{where}{problem}", hint=hint)


class SourceError(SluiceError):
    """The binlog source is unreachable, misconfigured or cannot serve the position."""


class PositionError(SourceError):
    """The stored start position is purged or unknown on the server."""


class StoreError(SluiceError):
    """The batch store is inconsistent or cannot be used."""


class CorruptBatchError(StoreError):
    """A batch file is truncated, changed after writing, or unreadable."""


class LockHeldError(StoreError):
    """Another process holds the capture or apply lock."""

    exit_code = 3


class OutOfOrderAckError(StoreError):
    """An ack that is not the next batch of the group's cursor."""


class TargetError(SluiceError):
    """A target (RDB, Elasticsearch, HBase) rejected a change terminally."""


class RowError(TargetError):
    """A target rejected one row's data terminally (too long, out of range, a constraint).

    Raised by the adapters' errors modules only; carries ``table`` and ``key`` when known."""


def is_row_error(exc: BaseException) -> bool:
    """True when ``exc`` was caused by a row's data (may be dead-lettered), not by the target."""
    return isinstance(exc, RowError)


class TransientError(SluiceError):
    """A failure worth retrying with backoff (connection lost, 429, lock wait timeout)."""
