"""Topics canal-server wrote (``writtenBy: canal``): its flatMessage records, applied by Sluice.

canal's records carry no batch ids and there is no batch topic, so a group's work is each
partition of the topic from the group's committed offset to its last stable offset, taken as
one round ("batch") per sync; the cursor is the number of records the group has acked (the sum
of its committed offsets). A record's position is where it is (``batchId = offset + 1``,
``seq = partition``, :mod:`pipeline.store.kafka.frame`): the source order within a partition, which
is all canal's topics keep. On a one-partition topic (canal's default: no ``canal.mq.partitionsNum``)
that is the binlog's order, so DDL barriers and ordered groups are exact. On several partitions
canal has dropped the order across them (DDL goes to partition 0, rows by key hash): Sluice keeps
per-key order, refuses groups that need more (docs/kafka.md), and records no positions.

A sibling of the Kafka store, not a kind of it: both stand on :class:`~pipeline.store.kafka.base.TopicsBase`
(the local folder, the apply lock, retention checks) and read Kafka through ``kafka/client.py``
and ``kafka/frame.py``. Capture's role is there only to refuse: canal-server writes these topics.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

from pipeline.config import Config
from pipeline.state.locks import HeldLock
from pipeline.store.changelog import StoreCapabilities
from pipeline.store.kafka.base import TopicsBase
from pipeline.store.kafka.batches import KafkaBatch
from pipeline.store.kafka.client import commit, committed, list_offsets, partitions_of
from sluice_common.errors import ConfigError, StoreError


class CanalTopicStore(TopicsBase):
    """A topic canal-server writes; Sluice reads and acks it (see the module docstring)."""

    capabilities = StoreCapabilities(checks_plan=True)  # on several partitions, ordered groups are refused

    def __init__(self, cfg: Config, *, create: bool = True):
        super().__init__(cfg)

    def __repr__(self) -> str:
        return f"CanalTopicStore({self.topics.bootstrap!r}, {self.topics.topic!r})"

    def _partitions(self) -> list[tuple[str, int]]:
        n = partitions_of(self.topics, [self.topics.topic]).get(self.topics.topic)
        if n is None:
            raise StoreError(f"Kafka store: topic {self.topics.topic} does not exist on {self.topics.bootstrap}",
                             hint="check canalAdapters[].instance (the topic canal.mq.topic names)")
        return [(self.topics.topic, p) for p in range(n)]

    @property
    def store_id(self) -> str:
        return f"canal-{self.topics.topic}"

    @property
    def exact_order(self) -> bool:
        """One partition: positions follow the binlog."""
        return len(self._partitions()) == 1

    # ---- capture: canal-server writes these topics ------------------------------------------
    def _not_captured(self) -> NoReturn:
        raise StoreError(f"store.kafka.writtenBy is canal: the topic {self.topics.topic} is written by canal-server, "
                         "so Sluice does not capture into it",
                         hint="run `sluice sync`/`run` to apply it; capture needs writtenBy: sluice")

    @contextmanager
    def capture_lock(self) -> Iterator[HeldLock]:
        self._not_captured()
        yield  # type: ignore[misc]  # (never reached)

    def set_start_position(self, pos: dict[str, Any], force: bool = False) -> None:
        self._not_captured()

    def keep_alive(self) -> None:
        self._not_captured()

    def append_lines(self, lines: list[bytes], *, rows: int, ddl: tuple[int, ...], start: dict[str, Any],
                     end: dict[str, Any], split: bool = False) -> KafkaBatch:
        self._not_captured()

    def append(self, records: Iterable[dict[str, Any]], *, start: dict[str, Any], end: dict[str, Any],
               split: bool = False) -> KafkaBatch:
        self._not_captured()

    def last_position(self) -> dict[str, Any] | None:
        return None

    # ---- batches: one round per sync, no batch records ----------------------------------------
    def batches(self, since: int = 0) -> list[KafkaBatch]:
        return []

    def batch_ids(self) -> list[int]:
        return []

    def newest_batch_id(self) -> int:
        return 0

    def meta(self, batch_id: int) -> KafkaBatch:
        """A round handed out by :meth:`get` (FileNotFoundError: none such)."""
        try:
            return self._metas[batch_id]
        except KeyError:
            raise FileNotFoundError(f"round {batch_id}") from None

    # ---- groups -------------------------------------------------------------------------------
    def group_range(self, group: str) -> tuple[dict, dict]:
        tps = self._partitions()
        got = committed(self.topics, group, tps)
        start = {tp: got[tp][0] if tp in got else 0 for tp in tps}
        return start, list_offsets(self.topics, tps)

    def cursor(self, group: str) -> int:
        return sum(self.group_range(group)[0].values())

    def groups(self) -> list[str]:
        return [g.groupId for g in self.cfg.groups]

    def readers(self) -> list[str]:
        """This config's groups (canal-server writes the topic: Sluice never starts it anywhere)."""
        return self.groups()

    def pending(self, group: str) -> list[KafkaBatch]:
        """The group's whole pending range as one round (a list of one), or none."""
        start, end = self.group_range(group)
        records = sum(max(0, end[tp] - start[tp]) for tp in start)
        if not records:
            return []
        cursor = sum(start.values())
        return [KafkaBatch(batch_id=cursor + 1, file="", sha256="", size=0, records=-1, rows=records, start={},
                           end={}, split=False, created_at="", ddl=None, start_offsets=start, end_offsets=end)]

    def get(self, group: str, max_batches: int = 1) -> list[KafkaBatch]:
        if self._handed.get(group):
            return []
        got = self.pending(group)
        if not got:
            return []
        b = got[0]
        self._check_retained(group, [b])
        self._metas[b.batch_id] = b
        self._handed[group] = b.batch_id
        return [b]

    def ack(self, group: str, batch_id: int) -> None:
        b = self._metas.get(batch_id)
        if b is None or self._handed.get(group) != batch_id:
            raise StoreError(f"cannot ack round {batch_id} of group {group}: it was not handed out")
        commit(self.topics, group, dict(b.end_offsets), {})

    def ack_round(self, group: str, batch_ids: list[int]) -> None:
        for b in batch_ids:
            self.ack(group, b)

    def set_cursor(self, group: str, batch_id: int) -> int:
        if batch_id != 0:
            raise StoreError("on a canal topic the cursor can only be reset to 0 (every record again)",
                             hint="kafka-consumer-groups --reset-offsets moves a canal group's offsets by hand")
        previous = self.cursor(group)
        commit(self.topics, group, {tp: 0 for tp in self._partitions()}, {})
        return previous

    # ---- the job ------------------------------------------------------------------------------
    def frame(self, spark: Any, batches: list[KafkaBatch], ordered: bool) -> Any:
        from pipeline.store.kafka.frame import kafka_frame

        return kafka_frame(spark, self.topics, batches[0].start_offsets, batches[-1].end_offsets, canal=True)

    def ddl_records(self, batches: list[KafkaBatch]) -> None:
        return None  # not indexed: the job finds DDL with a scan

    def scope(self, group: str) -> str:
        """Positions are recorded only where they follow the binlog (one partition); elsewhere none
        (no ordered groups there, and no DDL-ledger skipping by position)."""
        return f"{self.store_id}:{group}" if self.exact_order else ""

    def check_plan(self, plan: Any) -> None:
        """Refuse what a many-partition canal topic cannot give: ordered groups need the source order
        across tables, which canal's partitioning dropped."""
        if self.exact_order:
            return
        if plan.key_plan().ordered:
            raise ConfigError(self.cfg.file, "store.kafka", f"topic {self.topics.topic} (written by canal) has several "
                              "partitions, so the order across them is lost, but group "
                              f"{plan.group_id} has tables whose foreign keys need it (an ordered group)",
                              hint="let canal write one partition (no canal.mq.partitionsNum), or capture with Sluice")

    def status(self) -> dict[str, Any]:
        from .status import status

        return status(self)
