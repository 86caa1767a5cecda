"""The one place where elasticsearch-py exceptions become Sluice errors.

Connection errors and timeouts are transient; an ``ApiError`` is classified by its HTTP status
and error type as every server answer is (``adapters/es/failures.py``, shared with the OpenSearch
client); elasticsearch-py's product check (it refuses servers that are not Elasticsearch, e.g.
OpenSearch) is terminal, with a hint to the ``opensearch`` adapter. The classification of bulk
items and source errors is re-exported from ``failures`` for callers of this module.
"""

from __future__ import annotations

import elastic_transport
import elasticsearch

from adapters.es.failures import (
    ROW_TYPES,
    SOURCE_TRANSIENT,
    TRANSIENT_STATUS,
    TRANSIENT_TYPES,
    EsItemError,
    EsRowError,
    EsTransientError,
    http_error,
    is_transient_item,
    item_error,
    reason_of,
    short,
    source_error,
    unreachable,
)
from sluice_common.errors import SluiceError, TargetError

__all__ = ["ROW_TYPES", "SOURCE_TRANSIENT", "TRANSIENT_STATUS", "TRANSIENT_TYPES", "EsItemError", "EsRowError",
           "EsTransientError", "from_exception", "is_transient_item", "item_error", "reason_of", "source_error"]

PRODUCT = "Elasticsearch"


def from_exception(exc: BaseException, what: str, target_label: str) -> SluiceError:
    """A request-level failure (``what``: e.g. "bulk request to index user") as a Sluice error."""
    if isinstance(exc, SluiceError):
        return exc
    if isinstance(exc, (elastic_transport.ConnectionError, elastic_transport.ConnectionTimeout)):
        return unreachable(what, PRODUCT, target_label, short(exc),
                           isinstance(exc, elastic_transport.ConnectionTimeout))
    if isinstance(exc, elasticsearch.UnsupportedProductError):
        return TargetError(f"{what}: the server at {target_label} is not Elasticsearch ({short(exc)})",
                           hint="for OpenSearch (self-hosted or Amazon OpenSearch Service) use an outerAdapters "
                                "entry with name: opensearch")
    if isinstance(exc, elasticsearch.ApiError):
        status = int(getattr(exc, "status_code", None) or getattr(getattr(exc, "meta", None), "status", 0) or 0)
        return http_error(status, getattr(exc, "body", None), exc.message, what, PRODUCT, target_label)
    if isinstance(exc, elastic_transport.TransportError):
        return EsTransientError(f"{what}: transport error talking to {target_label}: {short(exc)}",
                                hint="retried with backoff")
    return TargetError(f"{what}: {type(exc).__name__}: {short(exc)}")
