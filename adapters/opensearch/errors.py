"""The one place where opensearch-py exceptions become Sluice errors.

opensearch-py raises ``ConnectionError``/``ConnectionTimeout`` (status ``N/A``) when the server
cannot be reached, and a ``TransportError`` subclass with the HTTP status and the decoded error
body (``info``) when it answers with an error. The first are transient; the second are
classified by status and error type exactly as Elasticsearch's answers are
(adapters/es/failures.py): 429/502/503/504 and rejected executions transient, the rest terminal.
"""

from __future__ import annotations

import opensearchpy

from adapters.es.failures import EsTransientError, http_error, short, unreachable
from sluice_common.errors import SluiceError, TargetError

PRODUCT = "OpenSearch"


def from_exception(exc: BaseException, what: str, target_label: str) -> SluiceError:
    """A request-level failure (``what``: e.g. "bulk request to index user") as a Sluice error."""
    if isinstance(exc, SluiceError):
        return exc
    if isinstance(exc, opensearchpy.ConnectionError):  # ConnectionTimeout and SSLError included
        return unreachable(what, PRODUCT, target_label, _detail(exc),
                           isinstance(exc, opensearchpy.ConnectionTimeout))
    if isinstance(exc, opensearchpy.TransportError):
        status = exc.status_code if isinstance(exc.status_code, int) else 0
        if not status:
            return EsTransientError(f"{what}: transport error talking to {target_label}: {short(exc)}",
                                    hint="retried with backoff")
        return http_error(status, exc.info, str(exc.error), what, PRODUCT, target_label)
    if isinstance(exc, opensearchpy.SerializationError):
        return TargetError(f"{what}: OpenSearch at {target_label} sent an answer that is not JSON: {short(exc)}")
    return TargetError(f"{what}: {type(exc).__name__}: {short(exc)}")


def _detail(exc: opensearchpy.ConnectionError) -> str:
    """The underlying cause of a connection error (``info`` holds the urllib3 exception)."""
    cause = exc.info if isinstance(exc.info, BaseException) else exc
    return short(cause)
