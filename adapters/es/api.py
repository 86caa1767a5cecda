"""The few calls the adapter makes to a search server, behind one interface: one adapter, two clients.

Everything that is not client-specific (documents, the join-SQL re-query, values, bulk NDJSON and
per-item results, dead letters) is written once in ``adapters/es`` against :class:`SearchApi`.
A target's ``product`` picks the implementation:

* ``elasticsearch`` -> :class:`adapters.es.client.ElasticsearchApi` (elasticsearch-py 8, for
  Elasticsearch 7.x/8.x; it refuses OpenSearch);
* ``opensearch`` -> :class:`adapters.opensearch.client.OpenSearchApi` (opensearch-py, for
  OpenSearch 1.x-3.x and Amazon OpenSearch Service).

Methods raise the client's own exceptions; callers turn them into Sluice errors with
:meth:`SearchApi.error`, which is that client's ``errors.from_exception`` (the one place per client).
Clients are created on first use in each process (an executor opens its own, never a pickled one)
and kept per target.
"""

from __future__ import annotations

import abc
import importlib
import threading
from collections.abc import Iterator
from typing import Any

from sluice_common.errors import SluiceError
from sluice_common.logs import register_secret

#: target.product -> the module whose ``open_api(target)`` builds its :class:`SearchApi`
CLIENTS = {"elasticsearch": "adapters.es.client", "opensearch": "adapters.opensearch.client"}
_apis: dict[Any, SearchApi] = {}
_lock = threading.Lock()


class SearchApi(abc.ABC):
    """One client of one cluster: the calls the adapter needs, with plain dict answers."""

    #: the server's name in messages ("Elasticsearch", "OpenSearch")
    product: str = ""

    def __init__(self, target: Any):
        self.target = target

    @abc.abstractmethod
    def error(self, exc: BaseException, what: str) -> SluiceError:
        """This client's exception as a Sluice error (transient or terminal)."""

    @abc.abstractmethod
    def health(self) -> dict:
        """``GET _cluster/health``."""

    @abc.abstractmethod
    def server(self) -> tuple[str, str] | None:
        """``(distribution, version)`` from ``GET /`` (``("elasticsearch", "8.19.2")``), or None
        where the server has no root endpoint (Elasticsearch's integ-test build)."""

    @abc.abstractmethod
    def mapping(self, index: str) -> dict | None:
        """``GET <index>/_mapping`` (index name -> body), None when the index does not exist."""

    @abc.abstractmethod
    def cluster_settings(self) -> dict:
        """``GET _cluster/settings?include_defaults=true&flat_settings=true``."""

    @abc.abstractmethod
    def bulk(self, body: bytes) -> dict:
        """``POST _bulk`` with a ready NDJSON body; the decoded response."""

    @abc.abstractmethod
    def refresh(self, index: str) -> None:
        """``POST <index>/_refresh``."""

    @abc.abstractmethod
    def count(self, index: str, query: dict) -> int:
        """``GET <index>/_count`` of a query."""

    @abc.abstractmethod
    def mget(self, index: str, docs: list[dict]) -> list[dict]:
        """``GET <index>/_mget`` (docs: ``{"_id", "routing"?}``); the ``docs`` of the answer."""

    @abc.abstractmethod
    def scan_ids(self, index: str, page: int) -> Iterator[list[dict]]:
        """Every document of an index as pages of hits (``_id``, ``_routing``; no source), by
        scroll; nothing when the index does not exist."""

    def close(self) -> None:  # noqa: B027 - optional
        """Release the client's connections."""


def connect(target: Any) -> SearchApi:
    """The process-wide API of a target (created on first use)."""
    with _lock:
        api = _apis.get(target)
        if api is None:
            register_secret(target.password.reveal())  # masked in every log line from now on
            api = _apis[target] = client_module(target).open_api(target)
        return api


def client_module(target: Any) -> Any:
    """The module that implements a target's client (``open_api``, ``client_kwargs``)."""
    try:
        name = CLIENTS[target.product]
    except KeyError:
        raise ValueError(f"unknown search product {target.product!r} (known: {', '.join(CLIENTS)})") from None
    return importlib.import_module(name)
