"""The file store (``store.kind: files``, the default): immutable change batches on disk, the
capture position, per-group ack cursors.

Capture appends canal-style Dml records as JSON Lines batch files (committed by an atomically
written meta file); Spark jobs ``get`` the batches after their group's cursor, read them with
``spark.read.json(store.paths(batches))`` and ``ack`` them in order. :mod:`.store`
(BatchStore), :mod:`.status` (``sluice store status``), :mod:`.cursors` (the groups' cursor files),
:mod:`.verify` (a batch file against its meta), :mod:`.admin` (crash recovery, prune, drop). See
docs/store.md for the layout, the commit protocol and the semantics.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .store import BatchStore

if TYPE_CHECKING:
    from pipeline.config import Config



def open_log(cfg: Config, *, create: bool) -> BatchStore:
    """The file store under ``store.path/<source>`` (``create``: made when missing); the family's
    entry point (pipeline/store/README.md)."""
    return BatchStore(cfg.store_dir(), create=create)


__all__ = ["BatchStore", "open_log"]
