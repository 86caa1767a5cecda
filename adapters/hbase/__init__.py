"""The HBase adapter: canal ``hbaseMapping`` (STRING / NATIVE modes) through happybase and
HBase's Thrift1 gateway.

factory.py (the same entry points as every adapter's, adapters/README.md):
``target_from_adapter`` builds an :class:`HbaseTarget` from a canal ``outerAdapters`` entry
(``name: hbase``); ``make_writer(target, mappings)`` gives an unopened
:class:`HbaseWriter`; ``reset_caches`` is called by the job after DDL (HBase keeps no
per-column schema, so it only drops idle pooled connections). docs/hbase.md.
"""

from __future__ import annotations

from adapters.hbase.client import close_all
from adapters.hbase.config import HbaseTarget
from adapters.hbase.factory import key_rules, make_verifier, make_writer, target_from_adapter
from adapters.hbase.writer import HbaseWriter

__all__ = ["HbaseTarget", "HbaseWriter", "key_rules", "make_verifier", "make_writer", "reset_caches",
           "target_from_adapter"]


def reset_caches() -> None:
    """After a DDL: nothing schema-like is cached; idle connections are closed and reopened on demand."""
    close_all()
