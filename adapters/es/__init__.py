"""The search-index adapter: canal's esMapping (join SQL included) onto Elasticsearch 7/8 indices,
and, through adapters/opensearch's client, onto OpenSearch indices (one adapter, two clients:
adapters/es/api.py).

``target_from_adapter(adapter, file, key, cfg=None)`` builds a frozen :class:`EsTarget` from
an ``outerAdapters`` entry (``name: es``/``es7``/``es8``) plus the deployment's source data
sources (``cfg``, for re-queries); ``make_writer(target, mappings)`` gives an unopened
:class:`EsWriter`; ``reset_caches()`` forgets cached index mappings and document plans.
Semantics: docs/es.md.
"""

from __future__ import annotations

from adapters.es.config import EsTarget, SourceDb, target_from_adapter
from adapters.es.writer import EsWriter, make_writer

__all__ = ["EsTarget", "EsWriter", "SourceDb", "make_writer", "reset_caches", "target_from_adapter"]


def reset_caches() -> None:
    """Drop cached index field types and document plans (the job calls this after DDL)."""
    from adapters.es import bulk, documents

    bulk.reset()
    documents._plans.clear()
