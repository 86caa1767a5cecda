"""Adapter kinds by name: target configs from a group's ``outerAdapters`` and writers.

The one place that knows which subpackage serves which canal adapter name
(``rdb``; ``es``/``es7``/``es8``; ``opensearch``; ``hbase``), imported lazily so an executor
loads only what its partition uses. ``opensearch`` serves esMappings (kind ``es``): its
subpackage parses the entry into a target whose client is opensearch-py, and the es writer
applies the changes (adapters/es/api.py: one adapter, two clients).
"""

from __future__ import annotations

import importlib
import inspect
import sys
from typing import Any

from pipeline.errors import ConfigError

KINDS = {"rdb": "rdb", "es": "es", "es7": "es", "es8": "es", "opensearch": "es", "hbase": "hbase"}
#: adapter names whose entries are parsed by a subpackage other than their kind's
CONFIG_MODULES = {"opensearch": "opensearch"}
_epoch = {"value": -1}


def kind_of(adapter_name: str) -> str:
    """The mapping kind (rdb/es/hbase) an outerAdapter ``name`` serves."""
    return KINDS[adapter_name]


def _module(kind: str):
    return importlib.import_module(f"adapters.{kind}")


def target_from_adapter(adapter: Any, file: str, key: str, cfg: Any = None) -> Any:
    """Build the frozen target config of one ``outerAdapters`` entry (errors name file/key).

    ``cfg``: the deployment Config, passed on to adapters whose ``target_from_adapter`` takes
    it (the ES adapter needs ``srcDataSources``/``source`` to re-query join SQL)."""
    kind = KINDS.get(adapter.name)
    if kind is None:
        raise ConfigError(file, f"{key}.name",
                          f"adapter {adapter.name!r} cannot write (known: rdb, es, opensearch, hbase)")
    mod = _module(CONFIG_MODULES.get(adapter.name, kind))
    if not hasattr(mod, "target_from_adapter"):
        raise ConfigError(file, f"{key}.name", f"the {kind} adapter is not available in this version")
    if cfg is not None and "cfg" in inspect.signature(mod.target_from_adapter).parameters:
        return mod.target_from_adapter(adapter, file, key, cfg=cfg)
    return mod.target_from_adapter(adapter, file, key)


def make_writer(kind: str, target: Any, mappings: tuple) -> Any:
    """A new (unopened) writer for a target."""
    return _module(kind).make_writer(target, mappings)


def key_rules(kind: str, target: Any, target_id: str, mappings: list[tuple[int, Any]]) -> Any:
    """The adapter's partitioning rules for these ``(midx, mapping)`` (None: plain key hashing,
    e.g. Elasticsearch ``_id`` and HBase row keys, which compare bytes)."""
    rules = getattr(_module(kind), "key_rules", None)
    return rules(target, target_id, mappings) if rules is not None else None


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
