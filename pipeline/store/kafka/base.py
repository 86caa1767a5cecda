"""What every change log on Kafka topics has, whoever writes the topics: the driver's local folder
(locks, run log, dead letters under ``store.path/<source>``), the apply lock, the check that
retention kept what a group needs, and the parts of the group role that only look at offsets.

The two kinds on Kafka are siblings that share this base: :class:`~pipeline.store.kafka.store.KafkaStore`
(topics Sluice's capture writes, with a batch topic) and
:class:`~pipeline.store.canal.store.CanalTopicStore` (topics canal-server writes).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pipeline.config import Config
from pipeline.fsutil import not_writable
from pipeline.state.locks import HeldLock, acquire
from pipeline.store.meta import validate_group
from sluice_common.errors import StoreError

from .batches import KafkaBatch
from .client import Topics, list_offsets


class TopicsBase:
    """The shared part of the Kafka kinds (see the module docstring); not a change log by itself."""

    kind = "kafka"

    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.topics = Topics.of(cfg)
        self.root = cfg.store_dir().absolute()
        self.lock_dir = self.root / "locks"
        self._handed: dict[str, int] = {}
        self._metas: dict[int, KafkaBatch] = {}

    # ---- the local folder --------------------------------------------------------------
    def check_writable(self) -> None:
        for d in (self.root, self.lock_dir):
            try:
                d.mkdir(parents=True, exist_ok=True)
                probe = d / f".sluice-probe-{uuid.uuid4().hex}.tmp"
                probe.write_bytes(b"")
                probe.unlink()
            except OSError as e:
                raise not_writable(d, OSError(e.errno, e.strerror)) from None

    @contextmanager
    def apply_lock(self, group: str) -> Iterator[HeldLock]:
        validate_group(group)
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        held = acquire(self.lock_dir / f"apply.{group}.lock", f"apply ({group})",
                       f"only one job may apply group {group!r} at a time: wait for it to finish")
        try:
            held.cleaned = []
            yield held
        finally:
            held.release()

    def check_apply_free(self, group: str) -> None:
        with self.apply_lock(group):
            pass

    # ---- the group role, on offsets ------------------------------------------------------
    def in_order(self, batches: list[KafkaBatch]) -> bool:
        """True when the round's records come from one partition (offset order is batch order)."""
        s, e = batches[0].start_offsets, batches[-1].end_offsets
        return sum(1 for tp, o in e.items() if o > s.get(tp, 0)) <= 1

    def rollback(self, group: str) -> None:
        validate_group(group)
        self._handed.pop(group, None)

    def lineage(self) -> tuple[int, tuple[tuple[int, int], ...]]:
        """Kafka batches are never re-cut (no ``recapture``): always generation 0."""
        return 0, ()

    def _check_retained(self, group: str, pending: list[KafkaBatch]) -> None:
        """Every data partition still holds the offsets ``pending`` starts at (retention may have
        deleted records the group had not acked: refused, nothing applied)."""
        need = {tp: o for tp, o in pending[0].start_offsets.items() if o < pending[-1].end_offsets.get(tp, 0)}
        for tp in pending[-1].end_offsets:
            need.setdefault(tp, 0)
        need = {tp: o for tp, o in need.items() if pending[-1].end_offsets.get(tp, 0) > o}
        low = list_offsets(self.topics, sorted(need), "earliest")
        lost = [(tp, need[tp], low[tp]) for tp in sorted(need) if low[tp] > need[tp]]
        if lost:
            (t, p), want, first = lost[0]
            raise StoreError(
                f"group {group} needs {t} partition {p} from offset {want} (batch {pending[0].batch_id}), but the "
                f"partition starts at offset {first}: retention deleted records the group had not acked"
                + (f" ({len(lost)} partitions)" if len(lost) > 1 else ""),
                hint="nothing was applied or acked; raise the topics' retention.ms above the longest outage, then "
                "rebuild the group's targets (sluice bootstrap) or move its cursor past the gap (store set-cursor)")

    # ---- the admin role -------------------------------------------------------------------
    def prune(self, retain: int = 0) -> list:
        """Kafka's retention deletes old records; nothing to do here."""
        return []

    def verify(self, batch: Any, *, deep: bool = True) -> None:
        """Records are checked when read; nothing else to verify on a broker."""

    def drop_from(self, first: int) -> dict[str, Any]:
        raise StoreError("`store recapture` is for the file store: Kafka batches are committed whole by the "
                         "broker and never corrupt on disk", hint="to apply batches again: store set-cursor")
