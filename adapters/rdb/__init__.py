"""The RDB adapter: MySQL/MariaDB, PostgreSQL and SQLite targets through SQLAlchemy Core.

The entry points are in factory.py (the same for every adapter, adapters/README.md):
``target_from_adapter`` builds an :class:`RdbTarget` from a canal ``outerAdapters`` entry,
``make_writer(target, mappings)`` gives an unopened :class:`RdbWriter`, ``key_rules`` reads
how to partition; ``reset_caches`` forgets reflected tables (the job calls it after DDL).
docs/rdb.md.
"""

from __future__ import annotations

from adapters.rdb.config import RdbTable, RdbTarget, TlsOptions
from adapters.rdb.factory import key_rules, make_writer, target_from_adapter
from adapters.rdb.schema import reset_caches
from adapters.rdb.writer import RdbWriter

__all__ = ["RdbTable", "RdbTarget", "RdbWriter", "TlsOptions", "key_rules", "make_writer", "reset_caches",
           "target_from_adapter"]


