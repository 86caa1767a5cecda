"""The OpenSearch adapter: canal's esMapping onto OpenSearch indices, through opensearch-py.

canal's own adapter refuses OpenSearch (its version check fails on OpenSearch 2.x, canal issue
#5503), and so does elasticsearch-py (its product check). This adapter is the Elasticsearch
adapter (adapters/es: documents, join-SQL re-query, values, bulk items, dead letters, the
writer) with another client: only what talks to the server is here.

* ``config.py``: ``outerAdapters`` entries with ``name: opensearch`` (the keys; the product);
* ``factory.py``: the entry points -> a frozen :class:`~adapters.es.config.EsTarget` whose
  ``product`` is ``opensearch``, and the Elasticsearch adapter's writer;
* ``client.py``: the :class:`~adapters.es.api.SearchApi` of opensearch-py;
* ``errors.py``: the one place opensearch-py exceptions become Sluice errors.

Entry points (as every adapter's, adapters/README.md): ``target_from_adapter``, ``make_writer``,
``key_rules`` (factory.py), ``reset_caches``.
Semantics: docs/es.md (the OpenSearch section).
"""

from __future__ import annotations

from adapters.es import EsTarget, EsWriter, reset_caches
from adapters.opensearch.factory import key_rules, make_verifier, make_writer, target_from_adapter

__all__ = ["EsTarget", "EsWriter", "key_rules", "make_verifier", "make_writer", "reset_caches", "target_from_adapter"]
