"""What a search server's answers mean for Sluice, whichever client read them.

Elasticsearch and OpenSearch answer with the same bulk item results and the same error bodies
(``{"type": ..., "reason": ..., "caused_by": ...}`` with an HTTP status), so they are classified
here once; each client's own exceptions (connection refused, timeouts, its ``ApiError`` or
``TransportError`` classes) are translated by that client's ``errors.py`` (``adapters/es/errors.py``
for elasticsearch-py, ``adapters/opensearch/errors.py`` for opensearch-py), which ends here too.

* :class:`~sluice_common.errors.TransientError` (the job retries the chunk with backoff): HTTP
  429 (``es_rejected_execution_exception``; OpenSearch's ``rejected_execution_exception``, circuit
  breakers), 502/503/504, and a 409 version conflict left after ``retry_on_conflict``.
* :class:`~sluice_common.errors.TargetError` (the partition fails, the batch is not acked): every
  other item or request error - mapping/parsing errors (400), strict mappings, auth (401/403),
  missing index where one is required, a document too large, ...
  Of these, a bulk *item* rejected for its own content (HTTP 400 parsing/mapping errors, 413
  too large) is an :class:`EsRowError` (a :class:`~sluice_common.errors.RowError`): the only kind a
  mapping's dead-letter store may take. Request-level failures never are.
* Errors of the source re-query (join SQL, pymysql): :func:`source_error`.

Messages name the server product, the index, the document ``_id`` and the server's error type
and reason; they never contain credentials (hosts are shown without user info, request bodies
are not shown).
"""

from __future__ import annotations

from typing import Any

from sluice_common.errors import RowError, SluiceError, SourceError, TargetError, TransientError

TRANSIENT_STATUS = frozenset({429, 502, 503, 504})
#: item error types that are transient whatever their status (OpenSearch drops the ``es_`` prefix)
TRANSIENT_TYPES = frozenset({"es_rejected_execution_exception", "rejected_execution_exception",
                             "circuit_breaking_exception", "version_conflict_engine_exception",
                             "unavailable_shards_exception", "no_shard_available_action_exception",
                             "node_not_connected_exception", "cluster_block_exception_retryable",
                             "process_cluster_event_timeout_exception"})
#: item error types caused by the document's own content (with HTTP 400 or 413)
ROW_TYPES = frozenset({"mapper_parsing_exception", "document_parsing_exception", "illegal_argument_exception",
                       "strict_dynamic_mapping_exception", "json_parse_exception", "x_content_parse_exception",
                       "number_format_exception", "content_too_long_exception", "parse_exception"})
#: MySQL client/server codes of the source re-query worth a retry (as adapters/rdb/dialects.py)
SOURCE_TRANSIENT = frozenset({0, 1040, 1053, 1205, 1213, 1317, 1927, 2002, 2003, 2006, 2013, 2055, 4031})


class EsItemError(TargetError):
    """One bulk item the server rejected terminally (the message says which and why)."""

    def __init__(self, message: str, *, index: str, doc_id: str | None, error_type: str, status: int,
                 hint: str | None = None):
        self.index, self.doc_id, self.error_type, self.status = index, doc_id, error_type, status
        self.key = None if doc_id is None else f"_id={doc_id}"
        super().__init__(message, hint=hint)


class EsRowError(EsItemError, RowError):
    """A bulk item rejected for its own content (parsing/mapping of its values, too large)."""


class EsTransientError(TransientError):
    """A retryable failure (429, 503, connection lost, timeout, leftover version conflict)."""


def reason_of(error: Any) -> tuple[str, str]:
    """``(type, reason)`` of an error object (item ``error`` or response ``error``), with the
    first ``caused_by`` reason appended."""
    if isinstance(error, str):
        return "error", error
    if not isinstance(error, dict):
        return "error", str(error)
    etype = str(error.get("type") or "error")
    reason = str(error.get("reason") or "")
    cause = error.get("caused_by")
    if isinstance(cause, dict) and cause.get("reason"):
        reason = f"{reason} (caused by {cause.get('type', 'error')}: {cause['reason']})"
    return etype, reason[:800]


def is_transient_item(status: int, error: Any) -> bool:
    """Whether a failed bulk item is worth retrying."""
    etype = error.get("type") if isinstance(error, dict) else None
    return status in TRANSIENT_STATUS or etype in TRANSIENT_TYPES


def item_error(op: str, index: str, doc_id: str | None, status: int, error: Any,
               product: str = "Elasticsearch") -> SluiceError:
    """The Sluice error for one failed bulk item (``op``: index/update/delete/create)."""
    etype, reason = reason_of(error)
    what = f"{op} of document _id={doc_id!s} in index {index}"
    if is_transient_item(status, error):
        return EsTransientError(f"{product} could not {what} now (HTTP {status}, {etype}: {reason})",
                                hint="retried with backoff; if it persists, check the cluster's load and health")
    cls = EsRowError if status == 413 or (status == 400 and etype in ROW_TYPES) else EsItemError
    return cls(f"{product} rejected {what} (HTTP {status}, {etype}: {reason})", index=index,
               doc_id=doc_id, error_type=etype, status=status, hint=hint(etype, status))


def hint(etype: str, status: int) -> str:
    """What the operator can do about a server error of this type and status."""
    if etype in ("mapper_parsing_exception", "document_parsing_exception", "illegal_argument_exception"):
        return "the value does not fit the index mapping: fix the mapping (or objFields/sql), then sync again"
    if etype == "strict_dynamic_mapping_exception":
        return "the index mapping is strict: add the field to it, or drop the field from esMapping.sql (or skips)"
    if status in (401, 403):
        return "check properties.security.auth and the user's privileges on the index"
    if etype == "index_not_found_exception":
        return "create the index (or allow auto-creation), then sync again"
    return "fix the cause in the server or the mapping, then sync again; replays are idempotent"


def http_error(status: int, body: Any, fallback: str, what: str, product: str, target_label: str) -> SluiceError:
    """A request the server answered with an error status (``body``: the decoded response)."""
    err = body.get("error") if isinstance(body, dict) else None
    etype, reason = reason_of(err if err is not None else (body or fallback))
    msg = f"{what}: {product} at {target_label} answered HTTP {status} ({etype}: {reason})"
    if status in TRANSIENT_STATUS or etype in TRANSIENT_TYPES:
        return EsTransientError(msg, hint="retried with backoff; check the cluster's load and health")
    return TargetError(msg, hint=hint(etype, status))


def unreachable(what: str, product: str, target_label: str, detail: str, timed_out: bool) -> SluiceError:
    """The server could not be reached (refused, reset, timed out): transient."""
    kind = "timed out" if timed_out else "could not connect"
    return EsTransientError(f"{what}: {kind} to {product} at {target_label}: {detail}",
                            hint=f"check that {product} is up and reachable; retried with backoff")


def short(exc: BaseException) -> str:
    """The first line of an exception's text (at most 300 characters)."""
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


def source_error(exc: BaseException, what: str) -> SluiceError:
    """A pymysql error of the source re-query (``what``: what was being done) as a Sluice error."""
    if isinstance(exc, SluiceError):
        return exc
    args = getattr(exc, "args", ())
    code = args[0] if args and isinstance(args[0], int) else 0
    text = args[-1] if args else str(exc)
    if code in SOURCE_TRANSIENT or type(exc).__name__ == "InterfaceError":
        return TransientError(f"{what}: MySQL error {code}: {text}", hint="retried with backoff")
    return SourceError(f"{what}: MySQL error {code}: {text}",
                       hint="check the mapping SQL against the source tables (and srcDataSources)")
