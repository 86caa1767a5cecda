"""The file store (``store.kind: files``, the default): immutable change batches on disk, the
capture position, per-group ack cursors.

Capture appends canal-style Dml records as JSON Lines batch files (committed by an atomically
written meta file); Spark jobs ``get`` the batches after their group's cursor, read them with
``spark.read.json(store.paths(batches))`` and ``ack`` them in order. :mod:`.batchstore`
(BatchStore), :mod:`.cursors` (the groups' cursor files), :mod:`.verify` (a batch file against its
meta), :mod:`.admin` (crash recovery, prune, drop, status). See docs/store.md for the layout, the
commit protocol and the semantics.
"""

from __future__ import annotations

from .batchstore import BatchStore

__all__ = ["BatchStore"]
