"""The change log's base: one small interface per role, the capabilities record, and the factory.

A change log is used in three roles, and each caller types against the one it uses:

* :class:`CaptureLog`, what capture writes through (pipeline/capture): the capture lock, the stored
  position, appending a batch, the keep-alive of an idle source;
* :class:`GroupLog`, what a group reads and acks through (the job's driver, the follower, ``run``,
  ``sync``, dead-letter replay): the apply lock, the batches after the cursor as a DataFrame with
  their DDL, ``get``/``ack``/``rollback`` (acks in order), the scope and lineage targets record;
* :class:`AdminLog`, what operations and maintenance use (``status``, ``store ...``, bootstrap):
  the groups and their cursors, the batches, verify, prune, the summary.

:class:`LogBase` is what every role has (the driver's local folder, the store's id, the
capabilities); :class:`ChangeLog` is all three, what :func:`open_store` returns. The kinds:
:class:`~pipeline.store.files.store.BatchStore` (``store.kind: files``, the embedded default:
batch files on a local or shared file system), :class:`~pipeline.store.kafka.store.KafkaStore`
(``store.kind: kafka``: Kafka topics, canal's MQ mode) and
:class:`~pipeline.store.canal.store.CanalTopicStore` (``writtenBy: canal``: the topics canal-server
writes). They hand out the same batches (``BatchMeta``: batchId, rows, positions), the same ack
protocol and the same positions ``(batchId, seq, row)``. What one kind does beyond the roles it
declares in :class:`StoreCapabilities` (the class attribute ``capabilities``); callers ask that
record, never the store (``hasattr``). tests/unit/test_store_roles.py checks that every kind has
every role's members.
"""

from __future__ import annotations

import importlib
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
    """What a change log does beyond its roles, declared once by each kind."""

    #: ``check_plan(plan)``: the log refuses, before a sync, a group its order cannot serve (a canal
    #: topic on several partitions lost the order across tables that an ordered group needs)
    checks_plan: bool = False
    #: ``paths(batches)``: the batches are verified local files that every executor can read, so a
    #: sync's tasks may read them themselves instead of through Spark (pipeline/job/scan.py)
    local_files: bool = False


class LogBase(Protocol):
    """What every role has: where the driver's state lives, and which store this is."""

    #: the driver's local folder: locks, run log, dead letters, checked mappings (pipeline/state)
    root: Path
    #: the locks' folder under it
    lock_dir: Path
    #: what this kind does beyond the roles (the methods each field names)
    capabilities: StoreCapabilities

    @property
    def store_id(self) -> str: ...

    def check_writable(self) -> None: ...


class CaptureLog(LogBase, Protocol):
    """What capture writes through: one writer per source, under the capture lock."""

    def capture_lock(self) -> AbstractContextManager[Any]: ...
    def last_position(self) -> dict[str, Any] | None: ...
    def set_start_position(self, pos: dict[str, Any], force: bool = False) -> None: ...
    def keep_alive(self) -> None: ...
    def append_lines(self, lines: list[bytes], *, rows: int, ddl: tuple[int, ...], start: dict[str, Any],
                     end: dict[str, Any], split: bool = False) -> BatchMeta: ...
    def append(self, records: Iterable[dict[str, Any]], *, start: dict[str, Any], end: dict[str, Any],
               split: bool = False) -> BatchMeta: ...


class GroupLog(LogBase, Protocol):
    """What a group reads and acks through: get -> frame (+ DDL) -> apply -> ack, or rollback."""

    def apply_lock(self, group: str) -> AbstractContextManager[Any]: ...
    def check_apply_free(self, group: str) -> None: ...
    def cursor(self, group: str) -> int: ...
    def pending(self, group: str) -> list[BatchMeta]: ...
    def get(self, group: str, max_batches: int = 1) -> list[BatchMeta]: ...
    def frame(self, spark: Any, batches: list[BatchMeta], ordered: bool) -> Any: ...
    def in_order(self, batches: list[BatchMeta]) -> bool: ...
    def ddl_records(self, batches: list[BatchMeta]) -> list[dict[str, Any]] | None: ...
    def scope(self, group: str) -> str: ...
    def lineage(self) -> tuple[int, tuple[tuple[int, int], ...]]: ...
    def ack(self, group: str, batch_id: int) -> None: ...
    def ack_round(self, group: str, batch_ids: list[int]) -> None: ...
    def rollback(self, group: str) -> None: ...


class AdminLog(LogBase, Protocol):
    """What operations and maintenance use: status, cursors moved by hand, verify, prune."""

    def groups(self) -> list[str]: ...
    def readers(self) -> list[str]: ...  # every deployment's groups that read the store (may ask a cluster)
    def cursor(self, group: str) -> int: ...
    def set_cursor(self, group: str, batch_id: int) -> int: ...
    def batches(self, since: int = 0) -> list[BatchMeta]: ...
    def batch_ids(self) -> list[int]: ...
    def meta(self, batch_id: int) -> BatchMeta: ...
    def newest_batch_id(self) -> int: ...
    def last_position(self) -> dict[str, Any] | None: ...
    def status(self) -> dict[str, Any]: ...
    def verify(self, batch: Any, *, deep: bool = True) -> None: ...
    def prune(self, retain: int = 0) -> list[BatchMeta]: ...
    def drop_from(self, first: int) -> dict[str, Any]: ...


class ChangeLog(CaptureLog, GroupLog, AdminLog, Protocol):
    """Every role: what :func:`open_store` returns (a caller keeps only the role it uses)."""


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


#: the kinds, each a subpackage ``pipeline/store/<kind>/`` with the family's file set
#: (pipeline/store/README.md; tests/unit/test_store_file_set.py)
KINDS = ("files", "kafka", "canal")


def kind_of(cfg: Config) -> str:
    """Which kind ``cfg.store`` describes: ``files``, ``kafka`` (Sluice writes the topics) or
    ``canal`` (canal-server writes them)."""
    if cfg.store.kind == "kafka":
        assert cfg.store.kafka is not None
        return "canal" if cfg.store.kafka.writtenBy == "canal" else "kafka"
    return "files"


def open_store(cfg: Config, *, create: bool = True) -> ChangeLog:
    """The change log ``cfg.store`` describes (``create``: a missing file store is made), opened
    through its kind's ``open_log``."""
    kind = importlib.import_module(f"{__package__}.{kind_of(cfg)}")
    return kind.open_log(cfg, create=create)
