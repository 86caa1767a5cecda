"""The OpenSearch adapter's entry points, with the signatures every adapter's factory.py has
(adapters/README.md): an :class:`EsTarget` whose ``product`` is ``opensearch``, and the
Elasticsearch adapter's writer, which talks to it through opensearch-py (client.py)."""

from __future__ import annotations

from typing import Any

from adapters.es.config import EsTarget, target_of
from adapters.es.factory import CAPABILITIES, key_rules, make_verifier, make_writer
from adapters.opensearch.config import PRODUCT

__all__ = ["CAPABILITIES", "key_rules", "make_verifier", "make_writer", "target_from_adapter"]


def target_from_adapter(adapter: Any, file: str, key: str, cfg: Any = None) -> EsTarget:
    """The target of one ``name: opensearch`` entry (``cfg``: the deployment, for its source
    data sources, which join and computed mappings are re-queried from)."""
    return target_of(adapter, file, key, cfg, product=PRODUCT)
