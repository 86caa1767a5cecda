"""Adapter kinds by name: target configs from a group's ``outerAdapters`` and writers.

The one place that knows which subpackage serves which canal adapter name
(``rdb``; ``es``/``es7``/``es8``; ``opensearch``; ``hbase``), imported lazily so an executor
loads only what its partition uses. Every subpackage's ``factory.py`` has the same three
functions with the same signatures and declares its :class:`~adapters.base.Capabilities`
(adapters/README.md), so every adapter is called alike and asked alike.
``opensearch`` serves esMappings (kind ``es``): its factory parses the entry into a target whose
client is opensearch-py, and the es writer applies the changes (adapters/es/api.py: one
adapter, two clients).
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from adapters.base import Capabilities
from sluice_common.errors import ConfigError

KINDS = {"rdb": "rdb", "es": "es", "es7": "es", "es8": "es", "opensearch": "es", "hbase": "hbase"}
#: adapter names whose entries are parsed by a subpackage other than their kind's
CONFIG_MODULES = {"opensearch": "opensearch"}
_epoch = {"value": -1}


def kind_of(adapter_name: str) -> str:
    """The mapping kind (rdb/es/hbase) an outerAdapter ``name`` serves."""
    return KINDS[adapter_name]


def _factory(package: str):
    return importlib.import_module(f"adapters.{package}.factory")


def target_from_adapter(adapter: Any, file: str, key: str, cfg: Any = None) -> Any:
    """Build the frozen target config of one ``outerAdapters`` entry (errors name file/key).

    ``cfg``: the deployment Config, passed to every adapter (the ES adapter needs
    ``srcDataSources``/``source`` to re-query join SQL; the others ignore it)."""
    kind = KINDS.get(adapter.name)
    if kind is None:
        raise ConfigError(file, f"{key}.name",
                          f"adapter {adapter.name!r} cannot write (known: rdb, es, opensearch, hbase)")
    return _factory(CONFIG_MODULES.get(adapter.name, kind)).target_from_adapter(adapter, file, key, cfg)


def capabilities(kind: str) -> Capabilities:
    """What the adapter of a mapping kind (rdb/es/hbase) does beyond the writer contract: its
    factory's ``CAPABILITIES`` (lineage, positions, source charsets, foreign keys, the compare)."""
    return _factory(kind).CAPABILITIES


def make_writer(kind: str, target: Any, mappings: tuple) -> Any:
    """A new (unopened) writer for a target."""
    return _factory(kind).make_writer(target, mappings)


def make_verifier(kind: str, target: Any, mappings: tuple) -> Any:
    """What ``sluice verify`` and ``sluice repair`` ask of a target (an :class:`adapters.base.Verifier`;
    which of its methods apply follows ``capabilities(kind).compare``)."""
    return _factory(kind).make_verifier(target, mappings)


def key_rules(kind: str, target: Any, target_id: str, mappings: list[tuple[int, Any]]) -> Any:
    """The adapter's partitioning rules for these ``(midx, mapping)`` (None: plain key hashing,
    e.g. Elasticsearch ``_id`` and HBase row keys, which compare bytes)."""
    return _factory(kind).key_rules(target, target_id, mappings)


def after_ddl(epoch: int) -> None:
    """The driver replayed DDL and the job's DDL epoch moved on to ``epoch``: executors drop
    their schema caches when they see it; in this process, an adapter that says what to forget
    after a DDL (``after_ddl``: the RDB adapter's writer forgets the tables the DDL changed as it
    replays it) keeps the rest of its cache, every other loaded adapter forgets everything."""
    _epoch["value"] = epoch
    for kind in set(KINDS.values()):
        mod = sys.modules.get(f"adapters.{kind}")
        hook = (getattr(mod, "after_ddl", None) or getattr(mod, "reset_caches", None)) if mod else None
        if hook is not None:
            hook()


def reset_caches(epoch: int) -> None:
    """Drop every loaded adapter's schema caches when the job's DDL epoch moved on."""
    if _epoch["value"] == epoch:
        return
    _epoch["value"] = epoch
    for kind in set(KINDS.values()):
        mod = sys.modules.get(f"adapters.{kind}")  # only adapters this process has loaded
        reset = getattr(mod, "reset_caches", None) if mod else None
        if reset is not None:
            reset()
