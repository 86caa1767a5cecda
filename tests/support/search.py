"""One search server of the suite (Elasticsearch 8 or OpenSearch 2), behind the few calls tests make.

elasticsearch-py and opensearch-py spell requests differently (``query=`` vs ``body=``), so the
shared ES/OpenSearch tests talk to the server through :class:`SearchServer`; the adapter under
test uses its own client. The ``search`` fixture (tests/conftest.py) is parametrized over both
servers, so one test body runs against each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from adapters.es import EsTarget

#: outerAdapters ``name`` of each product
ADAPTER_NAMES = {"elasticsearch": "es8", "opensearch": "opensearch"}


@dataclass
class SearchServer:
    product: str  # "elasticsearch" | "opensearch"
    info: dict    # the service's info (scripts/services)
    client: Any   # elasticsearch.Elasticsearch | opensearchpy.OpenSearch

    @classmethod
    def open(cls, product: str, info: dict) -> SearchServer:
        if product == "elasticsearch":
            from elasticsearch import Elasticsearch

            return cls(product, info, Elasticsearch(info["url"], request_timeout=30))
        from opensearchpy import OpenSearch

        return cls(product, info, OpenSearch(info["url"], timeout=30))

    def close(self) -> None:
        self.client.close()

    @property
    def url(self) -> str:
        return self.info["url"]

    @property
    def cluster_name(self) -> str:
        return "sluice" if self.product == "elasticsearch" else "sluice-os"

    @property
    def is_os(self) -> bool:
        return self.product == "opensearch"

    def target(self, **kw: Any) -> EsTarget:
        """An adapter target of this server (``hosts`` given, or this server's URL)."""
        hosts = kw.pop("hosts", (self.url,))
        kw.setdefault("product", self.product)
        return EsTarget(hosts, **kw)

    def adapter(self, key: str | None = None, **props: Any) -> dict:
        """An ``outerAdapters`` entry for this server, as a deployment config holds it."""
        entry = {"name": ADAPTER_NAMES[self.product], "hosts": self.url.removeprefix("http://"),
                 "properties": {"mode": "rest", **props}}
        if key:
            entry["key"] = key
        return entry

    # -- indices ------------------------------------------------------------------------------
    def create_index(self, index: str, mappings: dict | None = None, settings: dict | None = None) -> None:
        body: dict[str, Any] = {}
        if mappings is not None:
            body["mappings"] = mappings
        if settings is not None:
            body["settings"] = settings
        if self.is_os:
            self.client.indices.create(index=index, body=body)
        else:
            self.client.indices.create(index=index, **body)

    def delete_index(self, index: str) -> None:
        if self.is_os:
            self.client.indices.delete(index=index, params={"ignore_unavailable": "true"})
        else:
            self.client.indices.delete(index=index, ignore_unavailable=True)

    def cluster_setting(self, name: str, value: Any) -> None:
        """Set (None: reset) a persistent cluster setting."""
        if self.is_os:
            self.client.cluster.put_settings(body={"persistent": {name: value}})
        else:
            self.client.cluster.put_settings(persistent={name: value})

    def put_settings(self, index: str, settings: dict) -> None:
        if self.is_os:
            self.client.indices.put_settings(index=index, body=settings)
        else:
            self.client.indices.put_settings(index=index, settings=settings)

    def refresh(self, index: str) -> None:
        self.client.indices.refresh(index=index)

    # -- documents ----------------------------------------------------------------------------
    def hits(self, index: str, query: dict | None = None, size: int = 10000) -> list[dict]:
        """Every hit of a query (``_id``, ``_routing``, ``_source``), after a refresh."""
        self.refresh(index)
        q = query or {"match_all": {}}
        if self.is_os:
            resp = self.client.search(index=index, body={"query": q, "size": size})
        else:
            resp = self.client.search(index=index, query=q, size=size)
        return list(resp["hits"]["hits"])

    def docs(self, index: str, query: dict | None = None) -> dict[str, dict]:
        """``_id`` -> ``_source`` of every document (or of a query's hits)."""
        return {h["_id"]: h["_source"] for h in self.hits(index, query)}

    def get(self, index: str, doc_id: str, routing: str | None = None) -> dict:
        """A document's ``_source`` (by id, with routing when given)."""
        kw = {"routing": routing} if routing is not None else {}
        if self.is_os:
            return self.client.get(index=index, id=doc_id, params=kw)["_source"]
        return self.client.get(index=index, id=doc_id, **kw)["_source"]

    def delete_doc(self, index: str, doc_id: str) -> None:
        if self.is_os:
            self.client.delete(index=index, id=doc_id, params={"refresh": "true"})
        else:
            self.client.delete(index=index, id=doc_id, refresh=True)

    def count(self, index: str, query: dict | None = None) -> int:
        return len(self.hits(index, query))
