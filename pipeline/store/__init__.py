"""The change log between capture and the job, as a family of kinds (pipeline/store/README.md).

The base, here: one small interface per role (``changelog.py``: :class:`CaptureLog` what capture
writes through, :class:`GroupLog` what a group reads and acks through, :class:`AdminLog` what
operations use; :class:`ChangeLog` all of them) and :func:`open_store`, the batch meta
(``meta.py``) and the batch record as Spark reads it (``records.py``). The kinds beside it, siblings
with one file set: ``files/`` (the embedded default, batch files; docs/store.md), ``kafka/`` (Kafka
topics, canal's MQ mode; docs/kafka.md) and ``canal/`` (topics canal-server writes). Driver state
(locks, run log, dead letters, waivers) is not a store: it is in :mod:`pipeline.state`.
"""

from __future__ import annotations

from .changelog import AdminLog, CaptureLog, ChangeLog, GroupLog, LogBase, StoreCapabilities, open_store
from .meta import BatchMeta, data_name, meta_name, validate_group

__all__ = ["AdminLog", "BatchMeta", "CaptureLog", "ChangeLog", "GroupLog", "LogBase", "StoreCapabilities", "data_name",
           "meta_name", "open_store", "validate_group"]
