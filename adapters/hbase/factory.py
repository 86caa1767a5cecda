"""The HBase adapter's entry points, with the signatures every adapter's factory.py has
(adapters/README.md)."""

from __future__ import annotations

from typing import Any

from adapters.base import Capabilities
from adapters.hbase.config import HbaseTarget, target_of
from adapters.hbase.verify import HbaseVerifier
from adapters.hbase.writer import HbaseWriter

#: rows by row key: no lineage or positions recorded, no foreign keys; compared by counts and a sample
CAPABILITIES = Capabilities(compare="rows")

def target_from_adapter(adapter: Any, file: str, key: str, cfg: Any = None) -> HbaseTarget:
    """The target of one ``outerAdapters`` entry (``name: hbase``); errors name ``file``/``key``
    (``cfg``, the deployment, is not needed here)."""
    return target_of(adapter, file, key)


def make_writer(target: HbaseTarget, mappings: tuple[Any, ...]) -> HbaseWriter:
    """A new, unopened writer for ``target`` applying ``mappings`` (Mappings with an hbaseMapping)."""
    return HbaseWriter(target, tuple(mappings))


def make_verifier(target: HbaseTarget, mappings: tuple[Any, ...]) -> HbaseVerifier:
    """What ``sluice verify``/``repair`` ask of ``target``: counts, sampled rows, a key range's rows
    (adapters/hbase/verify.py)."""
    return HbaseVerifier(target, tuple(mappings))


def key_rules(target: HbaseTarget, target_id: str, mappings: list[tuple[int, Any]]) -> None:
    """None: plain key hashing (row keys compare as bytes)."""
    return None
