"""The RDB adapter: MySQL/MariaDB, PostgreSQL and SQLite targets through SQLAlchemy Core.

The entry points are in factory.py (the same for every adapter, adapters/README.md):
``target_from_adapter`` builds an :class:`RdbTarget` from a canal ``outerAdapters`` entry,
``make_writer(target, mappings)`` gives an unopened :class:`RdbWriter`, ``key_rules`` reads
how to partition; ``reset_caches`` forgets reflected tables (the job calls it after DDL).
docs/rdb.md.
"""

from __future__ import annotations

from adapters.rdb import applied, schema
from adapters.rdb.config import RdbTable, RdbTarget, TlsOptions
from adapters.rdb.factory import key_rules, make_verifier, make_writer, target_from_adapter
from adapters.rdb.writer import RdbWriter


def reset_caches() -> None:
    """Forget reflected tables and the ``_sluice_applied`` tables made sure of (the job calls it for
    every sync: a target database dropped and made again is seen)."""
    schema.reset_caches()
    applied.forget()


def after_ddl() -> None:
    """The driver replayed DDL: the writer that replayed it forgot the reflections of the tables
    it changed (:func:`adapters.rdb.schema.forget`), the others stay; the ``_sluice_applied``
    tables made sure of are forgotten (a statement may have dropped a database)."""
    applied.forget()


__all__ = ["RdbTable", "RdbTarget", "RdbWriter", "TlsOptions", "after_ddl", "key_rules", "make_verifier", "make_writer",
           "reset_caches", "target_from_adapter"]


