"""The change log's one interface, and the factory that opens the configured one.

Capture, the job driver and the operations commands use a change log through :class:`ChangeLog`;
two implementations exist: :class:`~pipeline.store.files.batchstore.BatchStore` (``store.kind:
files``, the embedded default: batch files on a local or shared file system) and
:class:`~pipeline.store.kafka.store.KafkaStore` (``store.kind: kafka``: Kafka topics, canal's MQ
mode; :class:`~pipeline.store.kafka.canal.CanalTopicStore` when canal-server writes them).
Both hand out the same batches (``BatchMeta``: batchId, rows, positions), the same ack protocol
(``get``/``ack``/``rollback``, acks in order), and the same positions ``(batchId, seq, row)``.
What one kind does beyond the interface it declares in :class:`StoreCapabilities` (the class
attribute ``capabilities``); callers ask that record, never the store (``hasattr``).
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pipeline.config import Config
from sluice_common.errors import OutOfOrderAckError

from .meta import BatchMeta


@dataclass(frozen=True, slots=True)
class StoreCapabilities:
    """What a change log does beyond :class:`ChangeLog`, declared once by each implementation."""

    #: ``check_plan(plan)``: the log refuses, before a sync, a group its order cannot serve (a canal
    #: topic on several partitions lost the order across tables that an ordered group needs)
    checks_plan: bool = False


class ChangeLog(Protocol):
    """What capture, the job and the commands need from a store."""

    #: the driver's local folder: locks, run log, dead letters, checked mappings
    root: Path
    #: what this kind does beyond the interface (the methods each field names)
    capabilities: StoreCapabilities

    @property
    def store_id(self) -> str: ...

    # capture
    def check_writable(self) -> None: ...
    def capture_lock(self) -> AbstractContextManager[Any]: ...
    def last_position(self) -> dict[str, Any] | None: ...
    def set_start_position(self, pos: dict[str, Any], force: bool = False) -> None: ...
    def keep_alive(self) -> None: ...
    def append_lines(self, lines: list[bytes], *, rows: int, ddl: tuple[int, ...], start: dict[str, Any],
                     end: dict[str, Any], split: bool = False) -> BatchMeta: ...
    def append(self, records: Iterable[dict[str, Any]], *, start: dict[str, Any], end: dict[str, Any],
               split: bool = False) -> BatchMeta: ...

    # groups
    def apply_lock(self, group: str) -> AbstractContextManager[Any]: ...
    def check_apply_free(self, group: str) -> None: ...
    def cursor(self, group: str) -> int: ...
    def set_cursor(self, group: str, batch_id: int) -> int: ...
    def groups(self) -> list[str]: ...
    def batches(self, since: int = 0) -> list[BatchMeta]: ...
    def newest_batch_id(self) -> int: ...
    def lineage(self) -> tuple[int, tuple[tuple[int, int], ...]]: ...
    def status(self) -> dict[str, Any]: ...
    def prune(self, retain: int = 0) -> list[BatchMeta]: ...

    # the job: get -> frame (+ DDL) -> apply -> ack, or rollback
    def pending(self, group: str) -> list[BatchMeta]: ...
    def get(self, group: str, max_batches: int = 1) -> list[BatchMeta]: ...
    def frame(self, spark: Any, batches: list[BatchMeta], ordered: bool) -> Any: ...
    def in_order(self, batches: list[BatchMeta]) -> bool: ...
    def ddl_records(self, batches: list[BatchMeta]) -> list[dict[str, Any]] | None: ...
    def scope(self, group: str) -> str: ...
    def ack(self, group: str, batch_id: int) -> None: ...
    def ack_round(self, group: str, batch_ids: list[int]) -> None: ...
    def rollback(self, group: str) -> None: ...


def out_of_order_error(group: str, batch_id: int, cursor: int) -> OutOfOrderAckError:
    """The error for an ack that is not exactly cursor + 1."""
    if batch_id <= cursor:
        what = f"batch {batch_id} is already acked (the group's cursor is {cursor})"
    else:
        what = (f"batches {cursor + 1}..{batch_id - 1} are not acked yet (the group's cursor is "
                f"{cursor}); the next ack must be batch {cursor + 1}")
    return OutOfOrderAckError(
        f"out-of-order ack of batch {batch_id} for group {group!r}: {what}",
        hint="ack batches one by one in the order get() returned them, each only after all of its "
        "changes have committed; after a failure call rollback() and get() again",
    )


def open_store(cfg: Config, *, create: bool = True) -> ChangeLog:
    """The change log ``cfg.store`` describes (``create``: a missing file store is made)."""
    if cfg.store.kind == "kafka":
        assert cfg.store.kafka is not None
        if cfg.store.kafka.writtenBy == "canal":
            from .kafka.canal import CanalTopicStore

            return CanalTopicStore(cfg, create=create)
        from .kafka.store import KafkaStore

        return KafkaStore(cfg, create=create)
    from .files.batchstore import BatchStore

    return BatchStore(cfg.store_dir(), create=create)
