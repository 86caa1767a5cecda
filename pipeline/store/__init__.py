"""The change log between capture and the job, as a family of kinds (pipeline/store/README.md).

The base, here: :class:`ChangeLog` and :func:`open_store` (``changelog.py``), the batch meta
(``meta.py``) and the batch record as Spark reads it (``records.py``). The kinds beside it:
``files/`` (the embedded default, batch files; docs/store.md) and ``kafka/`` (Kafka topics, canal's
MQ mode; docs/kafka.md). Driver state (locks, run log, dead letters, waivers) is not a store: it is
in :mod:`pipeline.state`.
"""

from __future__ import annotations

from .changelog import ChangeLog, StoreCapabilities, open_store
from .meta import BatchMeta, data_name, meta_name, validate_group

__all__ = ["BatchMeta", "ChangeLog", "StoreCapabilities", "data_name", "meta_name", "open_store", "validate_group"]
