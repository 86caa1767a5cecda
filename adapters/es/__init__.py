"""The search-index adapter: canal's esMapping (join SQL included) onto Elasticsearch 7/8 indices,
and, through adapters/opensearch's client, onto OpenSearch indices (one adapter, two clients:
adapters/es/api.py).

factory.py (the same entry points as every adapter's, adapters/README.md):
``target_from_adapter(adapter, file, key, cfg=None)`` builds a frozen :class:`EsTarget` from
an ``outerAdapters`` entry (``name: es``/``es7``/``es8``) plus the deployment's source data
sources (``cfg``, for re-queries); ``make_writer(target, mappings)`` gives an unopened
:class:`EsWriter`; ``reset_caches()`` forgets cached index mappings and document plans.
Semantics: docs/es.md.
"""

from __future__ import annotations

from adapters.es.config import EsTarget, SourceDb
from adapters.es.factory import key_rules, make_verifier, make_writer, target_from_adapter
from adapters.es.writer import EsWriter

__all__ = ["EsTarget", "EsWriter", "SourceDb", "key_rules", "make_verifier", "make_writer", "reset_caches",
           "target_from_adapter"]


def reset_caches() -> None:
    """Drop cached index field types and document plans (the job calls this after DDL)."""
    from adapters.es import bulk, plan

    bulk.reset()
    plan.reset()
