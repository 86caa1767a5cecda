"""The :class:`~adapters.es.api.SearchApi` of elasticsearch-py (Elasticsearch 7.x/8.x).

Requests and responses go through orjson (a bulk response holds one item per action).
elasticsearch-py checks the product of every server it talks to and refuses OpenSearch; such
a target needs ``name: opensearch`` (adapters/opensearch), which errors.py says.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import elasticsearch

from adapters.es import errors
from adapters.es.api import SearchApi
from sluice_common.errors import SluiceError


def client_kwargs(target: Any) -> dict[str, Any]:
    """Arguments for ``elasticsearch.Elasticsearch`` (holds the password: never log it)."""
    kw: dict[str, Any] = {"hosts": list(target.hosts), "request_timeout": target.request_timeout,
                          "max_retries": 2, "retry_on_timeout": True}
    if target.username is not None:
        kw["basic_auth"] = (target.username, target.password.reveal())
    if target.ca_path:
        kw["ca_certs"] = target.ca_path
    if not target.verify_certs:
        kw["verify_certs"] = False
        kw["ssl_show_warn"] = False  # the operator chose this in the config; warn once there, not per request
    if target.client_cert:
        kw["client_cert"] = target.client_cert
    if target.client_key:
        kw["client_key"] = target.client_key
    return kw


class ElasticsearchApi(SearchApi):
    product = "Elasticsearch"

    def __init__(self, target: Any):
        super().__init__(target)
        self.es = elasticsearch.Elasticsearch(**client_kwargs(target), serializer=elasticsearch.OrjsonSerializer())

    def error(self, exc: BaseException, what: str) -> SluiceError:
        return errors.from_exception(exc, what, self.target.label)

    def health(self) -> dict:
        return dict(self.es.cluster.health())

    def server(self) -> tuple[str, str] | None:
        return None  # the integ-test build has no GET / (rest-root); the client's product check suffices

    def mapping(self, index: str) -> dict | None:
        try:
            return dict(self.es.indices.get_mapping(index=index).body)
        except elasticsearch.NotFoundError:
            return None

    def cluster_settings(self) -> dict:
        return dict(self.es.cluster.get_settings(include_defaults=True, flat_settings=True))

    def bulk(self, body: bytes) -> dict:
        return self.es.bulk(operations=body).body

    def refresh(self, index: str) -> None:
        self.es.indices.refresh(index=index)

    def count(self, index: str, query: dict) -> int:
        return int(self.es.count(index=index, query=query)["count"])

    def mget(self, index: str, docs: list[dict]) -> list[dict]:
        return list(self.es.mget(index=index, docs=docs)["docs"])

    def scan_ids(self, index: str, page: int) -> Iterator[list[dict]]:
        try:
            resp = self.es.search(index=index, scroll="2m", size=page, source=False, sort=["_doc"])
        except elasticsearch.NotFoundError:
            return
        scroll_id = resp.get("_scroll_id")
        try:
            while resp["hits"]["hits"]:
                yield resp["hits"]["hits"]
                resp = self.es.scroll(scroll_id=scroll_id, scroll="2m")
                scroll_id = resp.get("_scroll_id")
        finally:
            if scroll_id:
                self.es.clear_scroll(scroll_id=scroll_id)

    def close(self) -> None:
        self.es.close()


def open_api(target: Any) -> ElasticsearchApi:
    return ElasticsearchApi(target)
