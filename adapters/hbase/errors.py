"""The one place where Thrift, socket and HBase exceptions become Sluice errors.

* :class:`TransientError` (the job retries the chunk with backoff): the Thrift socket
  could not connect, was reset, closed (the gateway drops connections idle for 60 s) or
  timed out; HBase ``IOError`` for region moves, busy or starting servers, RPC timeouts and
  other errors HBase itself would retry.
* :class:`TargetError` (terminal, the partition fails and nothing is acked): the table or a
  column family does not exist, ``IllegalArgument``, a Thrift protocol mismatch, HBase
  ``DoNotRetryIOException`` and friends.

Messages name the gateway (``host:port``), the table and, when known, the row key.
"""

from __future__ import annotations

import socket

from thriftpy2.protocol.exc import TProtocolException
from thriftpy2.thrift import TApplicationException, TException
from thriftpy2.transport import TTransportException

from sluice_common.errors import SluiceError, TargetError, TransientError

#: HBase exception class names (as they appear in IOError text) that retrying cannot fix
TERMINAL_MARKERS = ("TableNotFoundException", "NoSuchColumnFamilyException", "TableNotEnabledException",
                    "TableNotDisabledException", "DoNotRetryIOException", "IllegalArgumentException",
                    "AccessDeniedException", "FailedSanityCheckException", "InvalidFamilyOperationException",
                    "NamespaceNotFoundException", "UnknownProtocolException")
_HINTS = {
    "TableNotFoundException": "create the table (with the mapping's families) or set autoCreateTable: true",
    "NoSuchColumnFamilyException": "add the family to the HBase table (alter '<table>', NAME => '<family>') "
                                   "or fix FAMILY: in the mapping's columns",
    "TableNotEnabledException": "enable the table in the HBase shell: enable '<table>'",
}


def _text(value: object) -> str:
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return str(value or "")


def short_message(exc: BaseException) -> str:
    """The first line of an exception's message (HBase IOErrors carry a Java stack trace)."""
    msg = _text(getattr(exc, "message", None)) or str(exc) or type(exc).__name__
    return msg.strip().splitlines()[0][:400] if msg.strip() else type(exc).__name__


def rowkey_text(row: bytes | None) -> str | None:
    """A printable row key for messages."""
    if row is None:
        return None
    text = row.decode("utf-8", "backslashreplace")
    return text if text.isprintable() else repr(row)


def is_transport(exc: BaseException) -> bool:
    """True if ``exc`` means the Thrift connection itself is broken (reconnect before reuse)."""
    return isinstance(exc, (TTransportException, OSError, EOFError, socket.timeout))


def classify(exc: BaseException, *, where: str, action: str, table: str | None = None,
             row: bytes | None = None) -> SluiceError:
    """Turn a client/server exception into TransientError or TargetError with one actionable message.

    ``where`` is the gateway label (host:port), ``action`` what was being done ("write 120 rows").
    """
    if isinstance(exc, SluiceError):
        return exc
    on = f" table {table}" if table else ""
    key = rowkey_text(row)
    at = f" (row {key})" if key else ""
    detail = short_message(exc)
    if is_transport(exc):
        err: SluiceError = TransientError(
            f"HBase Thrift server {where} unreachable while trying to {action} on{on}{at}: {detail}",
            hint="check that the Thrift gateway ('hbase thrift start') runs and listens there; the chunk is retried")
    elif isinstance(exc, TProtocolException):
        err = TargetError(f"HBase Thrift server {where} answered in another protocol while trying to {action}: "
                          f"{detail}", hint="match thrift.transport/thrift.protocol to the server's framed/compact "
                                            "settings")
    elif isinstance(exc, TApplicationException):
        terminal = exc.type in (TApplicationException.UNKNOWN_METHOD, TApplicationException.WRONG_METHOD_NAME,
                                TApplicationException.PROTOCOL_ERROR)
        cls = TargetError if terminal else TransientError
        err = cls(f"HBase Thrift server {where} failed to {action} on{on}{at}: {detail}")
    elif type(exc).__name__ in ("IllegalArgument", "AlreadyExists"):
        err = TargetError(f"HBase rejected the request to {action} on{on}{at}: {detail}")
    elif type(exc).__name__ == "IOError" and isinstance(exc, TException):
        full = _text(getattr(exc, "message", ""))
        marker = next((m for m in TERMINAL_MARKERS if m in full), None)
        if marker:
            hint = _HINTS.get(marker, "fix the table or the mapping, then run sync again")
            err = TargetError(f"HBase cannot {action} on{on}{at}: {marker}: {_marker_detail(full, marker)}",
                              hint=hint.replace("<table>", table or "<table>"))
        else:
            err = TransientError(f"HBase failed to {action} on{on}{at}: {detail}",
                                 hint="HBase errors such as region moves and busy servers are retried")
    else:
        err = TargetError(f"HBase adapter failed to {action} on{on}{at}: {type(exc).__name__}: {detail}")
    err.table = table  # type: ignore[attr-defined]
    if key:
        err.key = key  # type: ignore[attr-defined]
    return err


def _marker_detail(text: str, marker: str) -> str:
    line = next((ln for ln in text.splitlines() if marker in ln), text.splitlines()[0] if text else "")
    return line.split(marker, 1)[-1].lstrip(": ").strip()[:300] or marker
