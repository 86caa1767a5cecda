"""The :class:`~adapters.es.api.SearchApi` of opensearch-py (OpenSearch 1.x-3.x, Amazon OpenSearch
Service with basic auth).

Requests and responses go through orjson, as elasticsearch-py's do in adapters/es/client.py. The
client's own retries: twice, on connection errors and timeouts and 502/503/504 (as for
Elasticsearch); everything it still raises is classified by errors.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import opensearchpy
import orjson
from opensearchpy.serializer import JSONSerializer

from adapters.es.api import SearchApi
from adapters.opensearch import errors
from sluice_common.errors import SluiceError


class OrjsonSerializer(JSONSerializer):
    """opensearch-py's JSON serializer on orjson (bodies given as str/bytes pass unchanged)."""

    def loads(self, s: str) -> Any:
        return orjson.loads(s)

    def dumps(self, data: Any) -> Any:
        if isinstance(data, (str, bytes)):
            return data
        try:
            return orjson.dumps(data, default=self.default)
        except (TypeError, orjson.JSONEncodeError):
            return super().dumps(data)


def client_kwargs(target: Any) -> dict[str, Any]:
    """Arguments for ``opensearchpy.OpenSearch`` (holds the password: never log it)."""
    kw: dict[str, Any] = {"hosts": list(target.hosts), "timeout": target.request_timeout,
                          "max_retries": 2, "retry_on_timeout": True}
    if target.username is not None:
        kw["http_auth"] = (target.username, target.password.reveal())
    if any(h.startswith("https://") for h in target.hosts):
        kw["use_ssl"] = True
        kw["verify_certs"] = target.verify_certs
        if not target.verify_certs:
            kw["ssl_show_warn"] = False  # the operator chose this in the config
    if target.ca_path:
        kw["ca_certs"] = target.ca_path
    if target.client_cert:
        kw["client_cert"] = target.client_cert
    if target.client_key:
        kw["client_key"] = target.client_key
    return kw


class OpenSearchApi(SearchApi):
    product = "OpenSearch"

    def __init__(self, target: Any):
        super().__init__(target)
        self.os = opensearchpy.OpenSearch(**client_kwargs(target), serializer=OrjsonSerializer())

    def error(self, exc: BaseException, what: str) -> SluiceError:
        return errors.from_exception(exc, what, self.target.label)

    def health(self) -> dict:
        return dict(self.os.cluster.health())

    def server(self) -> tuple[str, str] | None:
        try:
            version = self.os.info().get("version") or {}
        except opensearchpy.TransportError as e:
            if e.status_code in (400, 404, 405):  # every OpenSearch answers GET /
                return "a server without GET /", f"(HTTP {e.status_code})"
            raise
        # Elasticsearch (7.x, which opensearch-py could talk to) sends no distribution
        return str(version.get("distribution") or "Elasticsearch"), str(version.get("number") or "?")

    def mapping(self, index: str) -> dict | None:
        try:
            return dict(self.os.indices.get_mapping(index=index))
        except opensearchpy.NotFoundError:
            return None

    def cluster_settings(self) -> dict:
        return dict(self.os.cluster.get_settings(include_defaults=True, flat_settings=True))

    def bulk(self, body: bytes) -> dict:
        return self.os.bulk(body=body)

    def refresh(self, index: str) -> None:
        self.os.indices.refresh(index=index)

    def count(self, index: str, query: dict) -> int:
        return int(self.os.count(index=index, body={"query": query})["count"])

    def mget(self, index: str, docs: list[dict]) -> list[dict]:
        return list(self.os.mget(index=index, body={"docs": docs})["docs"])

    def scan_ids(self, index: str, page: int) -> Iterator[list[dict]]:
        try:
            resp = self.os.search(index=index, body={"sort": ["_doc"]},
                                  params={"scroll": "2m", "size": page, "_source": "false"})
        except opensearchpy.NotFoundError:
            return
        scroll_id = resp.get("_scroll_id")
        try:
            while resp["hits"]["hits"]:
                yield resp["hits"]["hits"]
                resp = self.os.scroll(body={"scroll_id": scroll_id, "scroll": "2m"})
                scroll_id = resp.get("_scroll_id")
        finally:
            if scroll_id:
                self.os.clear_scroll(body={"scroll_id": scroll_id})

    def close(self) -> None:
        self.os.close()


def open_api(target: Any) -> OpenSearchApi:
    return OpenSearchApi(target)
