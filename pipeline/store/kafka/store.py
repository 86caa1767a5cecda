"""KafkaStore: the change log in Kafka topics, with the BatchStore's interface (docs/kafka.md).

* Capture appends batches as Kafka transactions (:mod:`.producer`); a batch's records carry
  ``batchId``/``seq`` and its batch record (:mod:`.batches`) the binlog positions and the offsets.
* A group's cursor is its Kafka consumer group's committed offsets (the group id is the Sluice
  group id): every data partition at the end of the last acked batch, and the batch topic just
  after that batch's record, whose commit metadata holds the batchId. ``kafka-consumer-groups
  --describe --group G`` shows each partition's lag. ``ack`` commits them all in one request, only
  after every partition of the job committed; rollback is not committing.
* Locks, the run log and dead letters stay in the local folder ``store.path/<source>`` of the
  driver (the executors only read Kafka and write the targets).

With ``writtenBy: canal`` the topics are canal-server's: that is the sibling kind
:mod:`pipeline.store.canal` (no batch topic, nothing to capture). What both kinds on Kafka share
(the local folder, the apply lock, retention checks) is :mod:`.base`.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from pipeline.config import Config
from pipeline.state.locks import HeldLock, acquire
from pipeline.store.changelog import StoreCapabilities, out_of_order_error
from pipeline.store.meta import validate_group, validate_position
from sluice_common.errors import OutOfOrderAckError, StoreError

from . import batches as records
from .base import TopicsBase
from .batches import KafkaBatch, to_batch
from .client import commit, committed, cursor_groups, list_offsets
from .producer import BatchProducer
from .routing import Router

#: capture restates its position (a keep-alive start record) when the batch topic's newest record
#: is older than this, at its start and on an idle source's heartbeats: retention deletes even a
#: topic's newest record
KEEP_ALIVE_S = int(os.environ.get("SLUICE_KAFKA_KEEP_ALIVE_S", "3600"))


class KafkaStore(TopicsBase):
    """The Kafka change log of one source (see the module docstring)."""

    capabilities = StoreCapabilities()  # batches keep the binlog's order across partitions (positions)

    def __init__(self, cfg: Config, *, create: bool = True):
        super().__init__(cfg)  # cfg, topics, root, lock_dir, _handed, _metas
        self._capture: HeldLock | None = None
        self._producer: BatchProducer | None = None
        self._next_id = 1
        self._offsets: dict[tuple[str, int], int] = {}
        self._id: str | None = None
        self._read_from: int | None = None  # the batch topic's offsets [_read_from, _read_to) are in _metas
        self._read_to = 0
        self._seen_end: int | None = None  # the batch topic's end offset when _metas was last brought up to it
        self._after: dict[int, int] = {0: 0}  # batchId -> the batch topic offset a group committed after it
        self._low = 0  # the batch topic's log start, as last seen above a wanted offset (retention)
        self._last: dict[str, Any] = {}  # the newest record read (a batch's, or a start record)
        self._tail: dict[str, Any] | None = None  # while capture holds the lock: the position after the last record
        self._published_at: float | None = None  # while capture holds the lock: when the newest record was written
        self._stale = False  # a batch's commit failed with its outcome unknown: _settle() before going on

    def __repr__(self) -> str:
        return f"KafkaStore({self.topics.bootstrap!r}, {self.topics.topic!r})"

    @property
    def store_id(self) -> str:
        """The id every batch record carries (made by the first capture); targets record ordered
        groups' positions under it."""
        if self._id is None and self._metas:  # every record of the topic carries the same id
            self._id = self._metas[max(self._metas)].store or None
        if self._id is None:
            last = records.last_record(self.topics)
            self._id = str(last[1].get("storeId")) if last else ""
        return self._id or f"kafka-{self.topics.topic}"

    # ---- capture ------------------------------------------------------------------------
    @contextmanager
    def capture_lock(self) -> Iterator[HeldLock]:
        """The local single-writer lock, then the transactional producer: its ``init_transactions``
        fences any other producer of this source and aborts what a killed capture left open."""
        if self.topics.written_by != "sluice":
            raise StoreError(f"store.kafka.writtenBy is {self.topics.written_by}: the topic {self.topics.topic} is "
                             "written by canal-server, so Sluice does not capture into it",
                             hint="run `sluice sync`/`run` to apply it; capture needs writtenBy: sluice")
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        held = acquire(self.lock_dir / "capture.lock", "capture",
                       "only one capture may run per source: wait for it to finish")
        try:
            router = Router(self.topics.topic, self.cfg.store.kafka.dynamicTopic, self.topics.partitions,
                            self.cfg.store.kafka.partitionHash, self.cfg.store.kafka.databaseHash)
            self._producer = BatchProducer(self.topics, router, f"sluice-capture.{self.cfg.source.name}."
                                           f"{self.topics.topic}")
            last = None

            def fenced() -> None:  # after init_transactions: nobody published since we read the tail
                again = records.last_record(self.topics)
                if (again and again[0]) != (last and last[0]):
                    raise StoreError(f"{self.topics.batch_topic}: another capture published batch records while this "
                                     "one started (a second capture of this source on another machine?)",
                                     hint="run only one capture per source; run again to resume after its batches")

            self._producer.open(wait=False, check=fenced)  # the fence runs while capture starts reading
            last = records.last_record(self.topics)
            if last is None:
                self._refuse_if_emptied()
            self._id = str((last[1] if last else {}).get("storeId") or uuid.uuid4().hex)
            self._adopt(last)
            held.cleaned = []
            self._capture = held
            self.keep_alive()
            yield held
        finally:
            self._capture = None
            self._tail = None
            self._stale = False
            if self._producer is not None:
                self._producer.close()
                self._producer = None
            held.release()

    def _adopt(self, last: tuple[int, dict[str, Any]] | None) -> None:
        """Where capture stands, from the batch topic's newest record (None: a new store): its
        position, the next batch id, the data topics' offsets, and when the record was written."""
        body = last[1] if last else {}
        self._next_id = int(body.get("batchId", body.get("afterBatch", 0))) + 1
        self._offsets = records.offsets_of(body.get("to"))
        self._tail = self._position_of(body) if last else None
        age = records.age_s(body, time.time()) if last else None
        self._published_at = time.time() - age if age is not None else None

    def _settle(self) -> None:
        """After a batch whose commit's outcome is unknown (the broker failed during it): a new
        producer's ``init_transactions`` completes or aborts that transaction, then the newest
        record says where capture stands. Without this the next batch would reuse the batch id
        of one that did commit, or resume from a stale position."""
        self._require_capture("settle").settle()
        last = records.last_record(self.topics)
        if last is None:
            self._refuse_if_emptied()
        self._adopt(last)
        self._stale = False

    def keep_alive(self) -> None:
        """Restate capture's position and the next batch id in a start record when the newest
        record is older than ``KEEP_ALIVE_S``: retention deletes even a topic's newest record, and
        capture cannot resume without it. At capture's start and on the heartbeats of an idle
        source (:class:`pipeline.capture.batcher.Batcher`); needs the capture lock."""
        producer = self._require_capture("keep_alive")
        if self._stale:
            self._settle()
        if self._tail is None or self._published_at is None or time.time() - self._published_at <= KEEP_ALIVE_S:
            return  # nothing published yet, the last commit's outcome unknown, or a young newest record
        producer.publish_start(self._id, self._next_id - 1, self._tail, False, self._offsets, keep_alive=True)
        self._published_at = time.time()

    def _refuse_if_emptied(self) -> None:
        """A batch topic that held records and holds none: retention took the last batch record,
        and with it where capture stopped and which batch id comes next. Starting afresh would
        skip the changes since then and reuse batch ids the groups acked: refuse."""
        low = records.log_start(self.topics)
        if not low:
            return
        raise StoreError(
            f"{self.topics.batch_topic} holds no batch record but starts at offset {low}: retention deleted all of "
            "them, the last one too, which held capture's position and the next batch id; capture cannot resume "
            "without skipping changes", hint=f"keep the batch topic's records (kafka-configs --alter --entity-type "
            f"topics --entity-name {self.topics.batch_topic} --add-config retention.ms=-1, or run capture at least "
            f"more often than the retention period less {KEEP_ALIVE_S} s, or keep `capture --follow` up: it "
            "restates its position when its newest record is older than that), then start over with a new "
            "store.kafka.topic and `sluice bootstrap` to reload the targets")

    def _require_capture(self, what: str) -> BatchProducer:
        if self._capture is None or self._producer is None:
            raise StoreError(f"{what} needs the capture lock", hint="call it inside `with store.capture_lock():`")
        return self._producer

    def append_lines(self, lines: list[bytes], *, rows: int, ddl: tuple[int, ...], start: dict[str, Any],
                     end: dict[str, Any], split: bool = False) -> KafkaBatch:
        """Publish the next batch (one Kafka transaction); see :meth:`BatchStore.append_lines`."""
        producer = self._require_capture("append")
        if self._stale:
            self._settle()
        validate_position("start", start)
        validate_position("end", end)
        try:
            batch = producer.publish(self.store_id, self._next_id, lines, rows, ddl, start, end, split, self._offsets)
        except BaseException:
            self._tail = None  # the commit's outcome is unknown: settled before the store is used again
            self._stale = True
            raise
        self._offsets = dict(batch.end_offsets)
        self._next_id += 1
        self._tail = dict(end)
        self._published_at = time.time()
        return batch

    def append(self, recs: Iterable[dict[str, Any]], *, start: dict[str, Any], end: dict[str, Any],
               split: bool = False) -> KafkaBatch:
        """Like :meth:`append_lines` for record dicts (tests, benchmarks)."""
        lines, rows, ddl = [], 0, []
        for i, r in enumerate(recs):
            r = {k: v for k, v in r.items() if k not in ("batchId", "seq")}
            lines.append(json.dumps(r, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()[:-1])
            rows += 1 if r.get("isDdl") else len(r.get("data") or ())
            if r.get("isDdl"):
                ddl.append(i)
        return self.append_lines(lines, rows=rows, ddl=tuple(ddl), start=start, end=end, split=split)

    def last_position(self) -> dict[str, Any] | None:
        if self._capture is not None and self._stale:
            self._settle()
        if self._capture is not None and self._tail is not None:
            return dict(self._tail)  # capture holds the only producer: what it wrote last is the tail
        last = records.last_record(self.topics) if self.topics.written_by == "sluice" else None
        return self._position_of(last[1]) if last else None

    @staticmethod
    def _position_of(body: dict[str, Any]) -> dict[str, Any]:
        return dict(body["end"] if body["kind"] == "batch" else body["position"])

    def set_start_position(self, pos: dict[str, Any], force: bool = False) -> None:
        producer = self._require_capture("set_start_position")
        validate_position("start", pos)
        current = self.last_position()
        if current is not None and not force:
            raise StoreError(f"{self.topics.batch_topic}: the store already has a position; capture would resume at "
                             f"{json.dumps(current, sort_keys=True)}", hint="pass force=True to move it")
        producer.publish_start(self.store_id, self._next_id - 1, pos, force, self._offsets)
        self._tail = dict(pos)
        self._published_at = time.time()

    # ---- batches -------------------------------------------------------------------------
    def _refresh(self, since: int = 0) -> None:
        """Bring ``_metas`` up to the batch topic's end, holding every batch after ``since``.

        A sync needs only the batches after its group's cursor, and the group's committed offset
        says where they start (:meth:`cursor` notes it): reading there, not from the topic's
        start, keeps a sync's cost independent of the topic's history. Other callers (status,
        set-cursor) read from the log start; batch records retention deleted are simply not
        listed (:meth:`get` tells a group that needed them). A sync asks several times (pending,
        get, ack) and a read costs a consumer and a round trip to the partition's end (some 20
        ms), so once the topic is known one offsets request says whether it grew at all."""
        want = max(self._wanted(since), self._low)
        if self._read_from is not None and want >= self._read_from:
            if self._seen_end is not None:
                tp = (self.topics.batch_topic, 0)
                if list_offsets(self.topics, [tp])[tp] == self._seen_end:
                    return
            want = self._read_to
        got, start, end = records.read_to_end(self.topics, want)
        if start > want:
            self._low = start
        if self._read_from is None or start < self._read_from:
            self._read_from = start
        self._read_to = max(self._read_to, start)
        for off, body in got:
            if body["kind"] == "batch":
                b = to_batch(body, off)
                self._metas[b.batch_id] = b
            if off >= self._read_to:
                self._last = body
            self._read_to = max(self._read_to, off + 1)
        self._seen_end = end

    def _wanted(self, since: int) -> int:
        """The batch topic offset the batches after ``since`` start at (0: not known)."""
        return self._metas[since].offset + 1 if since in self._metas else self._after.get(since, 0)

    def newest_batch_id(self) -> int:
        """The newest batch id, also when retention deleted its batch record (a start record names
        it as ``afterBatch``); 0: none yet."""
        if self._capture is not None:
            return self._next_id - 1
        self._refresh()
        return self._newest()

    def _newest(self) -> int:
        """The newest batch id the records read name (0: none read)."""
        return int(self._last.get("batchId", self._last.get("afterBatch", 0)))

    def batches(self, since: int = 0) -> list[KafkaBatch]:
        if self.topics.written_by != "sluice":
            return []
        self._refresh(since)
        return [self._metas[i] for i in sorted(self._metas) if i > since]

    def batch_ids(self) -> list[int]:
        return [b.batch_id for b in self.batches()]

    def meta(self, batch_id: int) -> KafkaBatch:
        if batch_id not in self._metas:
            self._refresh()
        try:
            return self._metas[batch_id]
        except KeyError:
            raise FileNotFoundError(f"batch {batch_id}") from None

    # ---- groups ---------------------------------------------------------------------------
    def cursor(self, group: str) -> int:
        """The newest batchId the group acked (its commit metadata on the batch topic; 0: none)."""
        validate_group(group)
        got = committed(self.topics, group, [(self.topics.batch_topic, 0)]).get((self.topics.batch_topic, 0))
        if got is None:
            return 0
        try:
            batch_id = int(json.loads(got[1])["batchId"])
            self._after[batch_id] = got[0]  # where the batches after it start (_refresh)
            return batch_id
        except (ValueError, KeyError, TypeError):
            raise StoreError(f"group {group}: its committed offset on {self.topics.batch_topic} has no Sluice batchId "
                             f"(metadata {got[1]!r}); it was moved by another tool",
                             hint=f"set it with `sluice store set-cursor --group {group} --to N`") from None

    def groups(self) -> list[str]:
        """Groups of the config that have committed offsets here."""
        return [g.groupId for g in self.cfg.groups if self.cursor(g.groupId) > 0]

    def readers(self) -> list[str]:
        """Every group with a Sluice cursor on the batch topic, this config's and any other
        deployment's sharing the store (asks the cluster for all its consumer groups: for
        ``store restart``, not for every round)."""
        return cursor_groups(self.topics)

    def get(self, group: str, max_batches: int = 1) -> list[KafkaBatch]:
        """The next batches after the group's cursor and what was handed out (not acked)."""
        validate_group(group)
        cursor = self.cursor(group)
        start = max(cursor, self._handed.get(group, 0))
        pending = self.batches(start)[:max_batches]
        self._check_batches_kept(group, start, pending)
        for expected, b in enumerate(pending, start=start + 1):
            if b.batch_id != expected:
                raise StoreError(f"Kafka store: batch {expected} is missing from {self.topics.batch_topic} "
                                 f"(batch {b.batch_id} follows)", hint="the batch topic was changed by hand")
        if pending:
            self._check_retained(group, pending)
            self._handed[group] = pending[-1].batch_id
        return pending

    def _check_batches_kept(self, group: str, start: int, pending: list[KafkaBatch]) -> None:
        """The batch record of batch ``start + 1`` was read, unless retention deleted it."""
        want = self._wanted(start)
        if self._read_from is None or self._read_from <= want:
            return  # read from where the group's batches start: nothing was deleted before them
        if self._read_to <= self._read_from:  # not one record left: the topic was emptied
            raise StoreError(
                f"group {group} is at batch {start}, but {self.topics.batch_topic} holds no batch record any more "
                f"(it starts at offset {self._read_from}): retention deleted all of them", hint="see `sluice "
                "capture`'s error for this topic: the store cannot go on; start over with a new store.kafka.topic "
                "and `sluice bootstrap`")
        # the newest id the records read name (a second look at the topic could see a batch that
        # capture committed since, and mistake the group's next batch for a lost one)
        newest = self._newest()
        first = pending[0].batch_id if pending else (newest + 1 if newest > start else start + 1)
        if first == start + 1:
            return
        raise StoreError(
            f"group {group} needs batch {start + 1}, but retention deleted its batch record from "
            f"{self.topics.batch_topic} (the topic starts at offset {self._read_from}"
            + (f", with batch {first}" if pending else "") + "): retention deleted batch records the group had "
            "not acked", hint=f"nothing was applied or acked; raise the topics' retention.ms above the longest "
            f"outage, then rebuild the group's targets (sluice bootstrap) or move its cursor past the gap "
            f"(sluice store set-cursor --group {group} --to {first - 1})")

    def ack(self, group: str, batch_id: int) -> None:
        """Commit the group's offsets at the end of ``batch_id`` (exactly cursor + 1)."""
        self.ack_round(group, [batch_id])

    def ack_round(self, group: str, batch_ids: list[int]) -> None:
        """Ack a round's batches (cursor + 1, + 2, ... in order) with one commit at the end of the
        last: Kafka commits every partition's offset in one request, so the group moves past the
        whole round or not at all (one commit instead of one per batch: a round of ten batches
        spent half a second acking them one by one)."""
        cursor = self.cursor(group)
        for expected, batch_id in enumerate(batch_ids, start=cursor + 1):
            if batch_id != expected:
                raise out_of_order_error(group, batch_id, expected - 1)
        if not batch_ids:
            return
        try:
            b = self.meta(batch_ids[-1])
        except FileNotFoundError:
            raise OutOfOrderAckError(f"cannot ack batch {batch_ids[-1]} for group {group!r}: no such batch in "
                                     f"{self.topics.batch_topic}",
                                     hint="ack only batchIds that get() returned") from None
        self._commit_at(group, b.batch_id, b.end_offsets, b.offset + 1)

    def _commit_at(self, group: str, batch_id: int, data: dict, batch_offset: int) -> None:
        """Commit the group's offsets just after a batch. Each transaction ends with a commit marker,
        which takes the offset after the batch's last record on every partition it wrote; the group
        commits past it, so ``kafka-consumer-groups`` shows lag 0 for a group that is done."""
        offsets = {tp: o + 1 if o > 0 else 0 for tp, o in data.items()}
        bt = (self.topics.batch_topic, 0)
        offsets[bt] = batch_offset + 1 if batch_offset > 0 else 0
        commit(self.topics, group, offsets, {bt: json.dumps({"batchId": batch_id})})

    def set_cursor(self, group: str, batch_id: int) -> int:
        """Move the group's offsets to the end of ``batch_id`` (0: the start of every partition)."""
        previous = self.cursor(group)
        ids = self.batch_ids()
        newest = self.newest_batch_id()
        if batch_id < 0 or batch_id > newest:
            raise StoreError(f"set_cursor({group!r}, {batch_id}): the cursor must be between 0 and the newest batch "
                             f"{newest}")
        if batch_id == 0:
            data = {tp: 0 for tp in (self._metas[ids[-1]].end_offsets if ids else {})}
            self._commit_at(group, 0, data, 0)
        elif batch_id in self._metas:
            b = self._metas[batch_id]
            self._commit_at(group, batch_id, b.end_offsets, b.offset + 1)
        elif batch_id + 1 in self._metas:  # its record is gone (retention): just before the next one's
            b = self._metas[batch_id + 1]
            self._commit_at(group, batch_id, b.start_offsets, b.offset - 1)
        elif batch_id == newest:  # every batch record is gone, a start record names it: the topic's end
            self._commit_at(group, batch_id, records.offsets_of(self._last.get("to")), (self._seen_end or 0) - 1)
        else:
            kept = f"{ids[0] - 1}..{newest}" if ids else str(newest)
            raise StoreError(f"set_cursor({group!r}, {batch_id}): retention deleted the batch records around batch "
                             f"{batch_id} from {self.topics.batch_topic}", hint=f"move the cursor to one of {kept}")
        self._handed.pop(group, None)
        return previous

    # ---- the job ---------------------------------------------------------------------------
    def frame(self, spark: Any, batches: list[KafkaBatch], ordered: bool) -> Any:
        from .frame import kafka_frame

        return kafka_frame(spark, self.topics, batches[0].start_offsets, batches[-1].end_offsets, canal=False)

    def pending(self, group: str) -> list[KafkaBatch]:
        """The batches after the group's cursor (what its next sync applies)."""
        return self.batches(since=self.cursor(group))

    def ddl_records(self, batches: list[KafkaBatch]) -> list[dict[str, Any]] | None:
        """The DDL records of ``batches``, read from where their batch records say they are."""
        from .fetch import fetch_records

        where = [(t, p, o) for b in batches for _, t, p, o in b.ddl_at]
        return fetch_records(self.topics, where)

    def scope(self, group: str) -> str:
        """Where targets record ordered groups' positions: the store's id and the group."""
        return f"{self.store_id}:{group}"

    def status(self) -> dict[str, Any]:
        from .status import status

        return status(self)
