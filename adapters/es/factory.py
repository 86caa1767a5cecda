"""The search-index adapter's entry points, with the signatures every adapter's factory.py has
(adapters/README.md). adapters/opensearch/factory.py is the same for ``name: opensearch``."""

from __future__ import annotations

from typing import Any

from adapters.base import Capabilities
from adapters.es.config import EsTarget, target_of
from adapters.es.verify import EsVerifier
from adapters.es.writer import EsWriter

#: documents by ``_id``: no lineage or positions recorded, no foreign keys; compared by counts and a sample
CAPABILITIES = Capabilities(compare="documents")

def target_from_adapter(adapter: Any, file: str, key: str, cfg: Any = None) -> EsTarget:
    """The target of one ``outerAdapters`` entry (``name: es``/``es7``/``es8``); ``cfg``: the
    deployment, whose source data sources join and computed mappings are re-queried from."""
    return target_of(adapter, file, key, cfg, product="elasticsearch")


def make_writer(target: EsTarget, mappings: tuple[Any, ...]) -> EsWriter:
    """A new, unopened writer for ``target`` applying ``mappings`` (Mappings with an esMapping)."""
    return EsWriter(target, tuple(mappings))


def make_verifier(target: EsTarget, mappings: tuple[Any, ...]) -> EsVerifier:
    """What ``sluice verify``/``repair`` ask of ``target``: counts, sampled documents, a key range's
    documents (adapters/es/verify.py)."""
    return EsVerifier(target, tuple(mappings))


def key_rules(target: EsTarget, target_id: str, mappings: list[tuple[int, Any]]) -> None:
    """None: plain key hashing (document ids compare as bytes)."""
    return None
