"""The batch store: immutable change batches on disk, capture position, per-group ack cursors.

Capture appends canal-style Dml records as JSON Lines batch files (committed by an
atomically written meta file); Spark jobs ``get`` the batches after their group's
cursor, read them with ``spark.read.json(store.paths(batches))`` and ``ack`` them in
order. See docs/store.md for the layout, the commit protocol and the semantics.
"""

from __future__ import annotations

from .batchstore import BatchStore
from .changelog import ChangeLog, open_store
from .locks import HeldLock, LockInfo
from .meta import BatchMeta, data_name, meta_name, validate_group

__all__ = ["BatchMeta", "BatchStore", "ChangeLog", "HeldLock", "LockInfo", "data_name", "meta_name", "open_store",
           "validate_group"]
