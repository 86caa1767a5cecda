"""Sluice's error taxonomy: every error a user can meet is one of these.

``SluiceError`` carries one actionable message (what is wrong, where, what to do) and an
exit code; the CLI prints the message, never a traceback, and never a password.
Each class carries its exit code from :mod:`sluice_common.exitcodes` (the table in
docs/operations.md): what the files or the command line say wrong is 2, a lock held by
another process 3, anything that failed while working 1.
``TransientError`` may be retried with backoff; everything else is terminal. A
``RowError`` is the terminal kind that one row's data caused (too long, out of range, a
constraint): only those may go to a mapping's dead-letter store (docs/deadletter.md);
connection, auth and schema problems never do.
"""

from __future__ import annotations

from sluice_common import exitcodes


class SluiceError(Exception):
    """A user-facing error: one actionable message and a non-zero exit code."""

    exit_code = exitcodes.FAILED

    def __init__(self, message: str, *, hint: str | None = None):
        self.message = message
        self.hint = hint
        super().__init__(message if not hint else f"{message}\n  fix: {hint}")


class ConfigError(SluiceError):
    """A config or mapping file is malformed, or does not fit the tables it names; the
    message names the file and key."""

    exit_code = exitcodes.CONFIG

    def __init__(self, file: str, key: str | None, problem: str, *, hint: str | None = None):
        self.file, self.key, self.problem = file, key, problem
        where = f"{file}: {key}: " if key else f"{file}: "
        super().__init__(f"{where}{problem}", hint=hint)


class UsageError(SluiceError):
    """The command line asks for something that cannot be done (options that exclude each other)."""

    exit_code = exitcodes.CONFIG


class SourceError(SluiceError):
    """The binlog source is unreachable, misconfigured or cannot serve the position."""


class GrantError(SourceError):
    """The source user lacks a privilege; the message names it and the GRANT that gives it."""


class PositionError(SourceError):
    """The stored start position is purged or unknown on the server."""


class StoreError(SluiceError):
    """The batch store is inconsistent or cannot be used (missing, not writable, newer format)."""

    exit_code = exitcodes.CONFIG


class CorruptBatchError(StoreError):
    """A batch file is truncated, changed after writing, or unreadable."""


class LockHeldError(StoreError):
    """Another process holds the capture or apply lock."""

    exit_code = exitcodes.LOCKED


class OutOfOrderAckError(StoreError):
    """An ack that is not the next batch of the group's cursor."""

    exit_code = exitcodes.FAILED


class TargetError(SluiceError):
    """A target (RDB, Elasticsearch, HBase) rejected a change terminally."""


class TargetMismatchError(TargetError):
    """A mapping does not fit its target (no such table, index, column or key), found by the
    pre-flight check: a config problem, so it exits like one."""

    exit_code = exitcodes.CONFIG


class RowError(TargetError):
    """A target rejected one row's data terminally (too long, out of range, a constraint).

    Raised by the adapters' errors modules only; carries ``table`` and ``key`` when known."""


def is_row_error(exc: BaseException) -> bool:
    """True when ``exc`` was caused by a row's data (may be dead-lettered), not by the target."""
    return isinstance(exc, RowError)


class TransientError(SluiceError):
    """A failure worth retrying with backoff (connection lost, 429, lock wait timeout)."""
