"""BatchStore: immutable change batches, the capture position, and per-group ack cursors.

One directory per source (see docs/store.md). Capture appends batches under the capture
lock; each Spark job run reads the batches after its group's cursor (``get``), applies
them, and acks them in order. Semantics follow canal's streaming get/ack/rollback, with
durable cursors and batch files that every Spark node can read.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pipeline import __version__
from pipeline.fsutil import not_writable, now_iso, publish, spark_file_path, write_atomic, write_temp
from pipeline.state.locks import HeldLock, acquire
from sluice_common.errors import OutOfOrderAckError, StoreError

from ..changelog import StoreCapabilities, out_of_order_error
from ..meta import DATA_RE, META_RE, BatchMeta, data_name, meta_name, validate_group, validate_position
from . import admin
from .cursors import CursorFiles
from .verify import check_batch, encode_lines, encode_records

log = logging.getLogger("sluice.store")
STORE_FILE = "store.json"
POSITION_FILE = "position.json"
LINEAGE_FILE = "lineage.json"

BatchRef = BatchMeta | int


class BatchStore:
    """The batch store of one source, rooted at ``root`` (local or shared mount)."""

    #: the batch files keep the binlog's order (every group can be served); executors read them
    capabilities = StoreCapabilities(local_files=True)

    def __init__(self, root: str | os.PathLike[str], *, create: bool = True):
        """Open the store; with ``create`` make it if missing, else raise StoreError."""
        self.root = Path(root).absolute()
        self.batch_dir = self.root / "batches"
        self.group_dir = self.root / "groups"
        self.lock_dir = self.root / "locks"
        self._cursors = CursorFiles(self.group_dir)
        self._capture: HeldLock | None = None
        self._next_id = 0
        self._handed: dict[str, int] = {}
        self._open(create)

    def __repr__(self) -> str:
        return f"BatchStore({str(self.root)!r})"

    def _open(self, create: bool) -> None:
        marker = self.root / STORE_FILE
        if not marker.exists():
            if not create:
                raise StoreError(
                    f"{self.root}: no batch store here ({STORE_FILE} is missing)",
                    hint="check the store path in the config (and that the shared mount is mounted)",
                )
            body = {"format": 1, "createdAt": now_iso(), "id": uuid.uuid4().hex}
            try:
                for d in (self.root, self.batch_dir, self.group_dir, self.lock_dir):
                    d.mkdir(parents=True, exist_ok=True)
                write_atomic(marker, (json.dumps(body) + "\n").encode(), overwrite=False)
            except StoreError:
                if not marker.exists():  # a full or read-only disk, not another process creating it
                    raise
            except OSError as e:
                raise StoreError(f"{self.root}: cannot create the batch store: {e}",
                                 hint="check the store path and its permissions") from None
        try:
            body = json.loads(marker.read_bytes())
            fmt = body.get("format")
        except (OSError, ValueError, AttributeError) as e:
            raise StoreError(f"{marker}: unreadable store marker: {e}") from None
        if isinstance(fmt, int) and not isinstance(fmt, bool) and fmt > 1:
            raise StoreError(f"{marker}: this store was written by a newer Sluice (store format {fmt}; this "
                             f"Sluice {__version__} reads format 1)",
                             hint="run the Sluice version that wrote it (upgrade this installation); do not edit "
                             "the store by hand")
        if fmt != 1:
            raise StoreError(f"{marker}: store format {fmt!r} is not supported by this Sluice (reads 1)",
                             hint="check that store.path points at a Sluice batch store")
        #: this store's identity (stores made before it was recorded: their creation time)
        self.store_id = str(body.get("id") or f"created-{body.get('createdAt', '')}")

    def check_writable(self) -> None:
        """Raise StoreError naming the first store folder this process cannot write to (a
        read-only mount, another owner), before a command starts work it could not record."""
        for d in (self.root, self.batch_dir, self.group_dir, self.lock_dir):
            try:
                d.mkdir(parents=True, exist_ok=True)
                fd, probe = tempfile.mkstemp(prefix=".sluice-probe-", suffix=".tmp", dir=d)
                os.close(fd)
                os.unlink(probe)
            except OSError as e:  # name the folder, not the probe file
                raise not_writable(d, OSError(e.errno, e.strerror)) from None

    # ---- locks -------------------------------------------------------------------

    @contextmanager
    def capture_lock(self) -> Iterator[HeldLock]:
        """Hold the source's single-writer lock; on entry remove orphans and stray temps."""
        if self._capture is not None:
            raise StoreError(f"{self.root}: this process already holds the capture lock")
        held = acquire(self.lock_dir / "capture.lock", "capture",
                       "only one capture may run per source: wait for it to finish")
        try:
            held.cleaned = admin.recover(self)
            self._next_id = (self.batch_ids() or [0])[-1] + 1
            self._capture = held
            yield held
        finally:
            self._capture = None
            held.release()

    def _acquire_apply(self, group: str) -> HeldLock:
        validate_group(group)
        return acquire(self.lock_dir / f"apply.{group}.lock", f"apply ({group})",
                       f"only one job may apply group {group!r} at a time: wait for it to finish")

    def check_apply_free(self, group: str) -> None:
        """Raise LockHeldError now if another job applies ``group`` (before paying for Spark's
        start-up); nothing is kept or cleaned: the job takes :meth:`apply_lock` for the work."""
        self._acquire_apply(group).release()

    @contextmanager
    def apply_lock(self, group: str) -> Iterator[HeldLock]:
        """Hold the lock that lets one job at a time apply and ack ``group``."""
        held = self._acquire_apply(group)
        try:
            held.cleaned = admin.remove_group_temps(self, group)
            yield held
        finally:
            held.release()

    def _require_capture(self, what: str) -> None:
        if self._capture is None:
            raise StoreError(f"{what} needs the capture lock",
                             hint="call it inside `with store.capture_lock():`")

    # ---- writing -----------------------------------------------------------------

    def append(self, records: Iterable[dict[str, Any]], *, start: dict[str, Any], end: dict[str, Any],
               split: bool = False) -> BatchMeta:
        """Durably commit ``records`` as the next batch; return its metadata."""
        self._require_capture("append")
        recs = list(records)
        try:
            data, rows, ddl = encode_records(recs, self._next_id)
        except ValueError as e:
            raise StoreError(f"cannot append batch {self._next_id}: {e}") from None
        return self._commit(data, len(recs), rows, ddl, start, end, split)

    def append_lines(self, lines: list[bytes], *, rows: int, ddl: tuple[int, ...], start: dict[str, Any],
                     end: dict[str, Any], split: bool = False) -> BatchMeta:
        """Like ``append``, for records capture encoded itself: each line is one Dml object's JSON
        without its closing ``}`` (the store adds ``batchId`` and ``seq``); ``rows`` and ``ddl`` (the
        seqs of DDL records) are what ``append`` would count."""
        self._require_capture("append")
        return self._commit(encode_lines(lines, self._next_id), len(lines), rows, ddl, start, end, split)

    def _commit(self, data: bytes, records: int, rows: int, ddl: tuple[int, ...], start: dict[str, Any],
                end: dict[str, Any], split: bool) -> BatchMeta:
        validate_position("start", start)
        validate_position("end", end)
        batch_id = self._next_id
        data_path = self.batch_dir / data_name(batch_id)
        meta = BatchMeta(batch_id=batch_id, file=data_path.name, sha256=hashlib.sha256(data).hexdigest(),
                         size=len(data), records=records, rows=rows, start=dict(start),
                         end=dict(end), split=bool(split), created_at=now_iso(), path=str(data_path),
                         ddl=tuple(ddl))
        publish(write_temp(data_path, data), data_path, overwrite=False)
        try:
            write_atomic(self.batch_dir / meta_name(batch_id), meta.dumps(), overwrite=False)
        except BaseException:
            data_path.unlink(missing_ok=True)  # not committed: leave no orphan behind
            raise
        self._next_id = batch_id + 1
        return meta

    def keep_alive(self) -> None:
        """Capture's source is idle: nothing to restate (a batch file never expires)."""

    def set_start_position(self, pos: dict[str, Any], force: bool = False) -> None:
        """Set where capture starts; refuse if a position or batches exist, unless ``force``."""
        self._require_capture("set_start_position")
        validate_position("start", pos)
        newest = (self.batch_ids() or [0])[-1]
        current = self.last_position()
        if current is not None and not force:
            what = f"batches up to {newest}" if newest else "a start position"
            raise StoreError(
                f"{self.root}: the store already has {what}; capture would resume at "
                f"{json.dumps(current, sort_keys=True)}",
                hint="pass force=True to make capture resume from the new position instead "
                "(stored batches stay and are still applied)",
            )
        body = {"position": pos, "afterBatch": newest, "setAt": now_iso(), "forced": bool(force)}
        write_atomic(self.root / POSITION_FILE, (json.dumps(body, ensure_ascii=False) + "\n").encode())
        log.info("capture start position set to %s (after batch %d)", pos, newest)

    # ---- reading positions and batches ---------------------------------------------

    def last_position(self) -> dict[str, Any] | None:
        """Where capture resumes: the newest batch's end, or a later set start position."""
        ids = self.batch_ids()
        newest = ids[-1] if ids else 0
        try:
            raw = json.loads((self.root / POSITION_FILE).read_bytes())
            if int(raw["afterBatch"]) >= newest:
                return dict(raw["position"])
        except FileNotFoundError:
            pass
        except (OSError, ValueError, KeyError, TypeError, OverflowError, RecursionError) as e:
            raise StoreError(f"{self.root / POSITION_FILE}: unreadable start position: {e}",
                             hint="set it again with set_start_position(pos, force=True)") from None
        return self.meta(newest).end if newest else None

    def batches(self, since: int = 0) -> list[BatchMeta]:
        """Committed batches with batchId > ``since``, oldest first."""
        return [self.meta(i) for i in self.batch_ids() if i > since]

    def newest_batch_id(self) -> int:
        """The newest batchId (0: none)."""
        return (self.batch_ids() or [0])[-1]

    def batch_ids(self) -> list[int]:
        """All committed batchIds, ascending."""
        try:
            names = os.listdir(self.batch_dir)
        except FileNotFoundError:
            return []
        return sorted(int(m.group(1)) for m in map(META_RE.match, names) if m)

    def _data_ids(self) -> list[int]:
        return sorted(int(m.group(1)) for m in map(DATA_RE.match, os.listdir(self.batch_dir)) if m)

    def meta(self, batch_id: int) -> BatchMeta:
        """The committed metadata of ``batch_id`` (FileNotFoundError if not committed)."""
        return BatchMeta.load(self.batch_dir / meta_name(batch_id))

    def _resolve(self, batch: BatchRef) -> BatchMeta:
        if isinstance(batch, BatchMeta):
            return batch
        try:
            return self.meta(int(batch))
        except FileNotFoundError:
            raise StoreError(f"{self.root}: batch {batch} is not in the store") from None

    def read(self, batch: BatchRef, *, decode: bool = True) -> list[dict[str, Any]]:
        """The verified records of ``batch`` (raises CorruptBatchError naming the file)."""
        meta = self._resolve(batch)
        try:
            prev_end: dict[str, Any] | None = self.meta(meta.batch_id - 1).end
        except (FileNotFoundError, StoreError):
            prev_end = None
        return check_batch(meta, self.batch_dir / meta.file, prev_end, decode=decode)

    def verify(self, batch: BatchRef, *, deep: bool = True) -> None:
        """Check size and sha256 (and with ``deep``, every JSON line) of ``batch``; raise
        CorruptBatchError if anything is off."""
        self.read(batch, decode=deep)

    def paths(self, batches: Iterable[BatchRef], *, uri: bool = False) -> list[str]:
        """Verified absolute data file paths, e.g. for ``spark.read.schema(s).json(paths)``.

        With ``uri`` they are ``file://`` paths as Spark (Hadoop's ``Path``) takes them, which it reads
        from the local (shared) file system even when the cluster's default file system is HDFS
        (:func:`~pipeline.fsutil.spark_file_path`: a folder with spaces, non-ASCII letters or
        ``[`` in its name is read as itself).
        """
        out = []
        for b in batches:
            meta = self._resolve(b)
            self.verify(meta, deep=False)  # size + sha256: the exact bytes append wrote
            path = self.batch_dir / meta.file
            out.append(spark_file_path(path) if uri else str(path))
        return out

    # ---- consuming: get / ack / rollback / cursors ------------------------------------

    def get(self, group: str, max_batches: int = 1) -> list[BatchMeta]:
        """The next batches after the group's cursor and after what was handed out un-acked.

        Registers the group (cursor 0) on first use, so prune keeps its batches.
        """
        validate_group(group)
        if max_batches < 1:
            raise StoreError(f"get: max_batches must be at least 1, got {max_batches}")
        cur = self._cursors.read(group)
        cursor = cur.batch_id if cur is not None else self._cursors.write(group, 0, None, "register").batch_id
        start = max(cursor, self._handed.get(group, 0))
        wanted = [i for i in self.batch_ids() if i > start][:max_batches]
        for expected, got in enumerate(wanted, start=start + 1):
            if got != expected:
                raise admin.missing_batch_error(self, group, cursor, expected, got)
        metas = [self.meta(i) for i in wanted]
        if metas:
            self._handed[group] = metas[-1].batch_id
        return metas

    def ack(self, group: str, batch_id: int) -> None:
        """Durably mark ``batch_id`` applied by ``group``; it must be exactly cursor + 1."""
        cursor = self.cursor(group)
        if batch_id != cursor + 1:
            raise out_of_order_error(group, batch_id, cursor)
        try:
            meta = self.meta(batch_id)
        except FileNotFoundError:
            raise OutOfOrderAckError(
                f"cannot ack batch {batch_id} for group {group!r}: no such batch in {self.root}",
                hint="ack only batchIds that get() returned",
            ) from None
        self._cursors.write(group, batch_id, meta.end, "ack")

    def ack_round(self, group: str, batch_ids: list[int]) -> None:
        """Ack a round's batches in order (each one :meth:`ack` in turn)."""
        for b in batch_ids:
            self.ack(group, b)

    def rollback(self, group: str) -> None:
        """Forget what get handed out to ``group``; the next get starts again at the cursor."""
        validate_group(group)
        self._handed.pop(group, None)

    def cursor(self, group: str) -> int:
        """The newest batchId ``group`` has acked (0 when new)."""
        cur = self._cursors.read(group)
        return cur.batch_id if cur is not None else 0

    def set_cursor(self, group: str, batch_id: int) -> int:
        """Operator reset of ``group``'s cursor (0 replays everything); returns the old cursor."""
        previous = self.cursor(group)
        position = admin.check_cursor_target(self, group, batch_id)
        self._cursors.write(group, batch_id, position, "set")
        self._handed.pop(group, None)
        log.info("cursor of group %s set from %d to %d", group, previous, batch_id)
        return previous

    def groups(self) -> list[str]:
        """All registered groups (those that ever called get, ack or set_cursor)."""
        return self._cursors.groups()

    def readers(self) -> list[str]:
        """The groups that read the store, any deployment's: the registered ones."""
        return self.groups()

    # ---- the job (the ChangeLog interface: pipeline/store/changelog.py) -----------------------

    def frame(self, spark: Any, batches: list[BatchMeta], ordered: bool) -> Any:
        """The batches' lines as the job's DataFrame (verified files read by Spark)."""
        from ..records import read_dml

        return read_dml(spark, self.paths(batches, uri=True), ordered)

    def pending(self, group: str) -> list[BatchMeta]:
        """The batches after the group's cursor (what its next sync applies)."""
        return self.batches(since=self.cursor(group))

    def in_order(self, batches: list[BatchMeta]) -> bool:
        """Files read with ``ordered`` stream in (batchId, seq) order."""
        return True

    def ddl_records(self, batches: list[BatchMeta]) -> list[dict[str, Any]] | None:
        """The DDL lines of ``batches`` from the seqs their metas list (None: an older meta without
        them; the job scans instead)."""
        if any(b.ddl is None for b in batches):
            return None
        out: list[dict[str, Any]] = []
        for b in batches:
            if b.ddl:
                lines = self.read(b)
                out += [lines[i] for i in b.ddl]
        return out

    def scope(self, group: str) -> str:
        """Where targets record ordered groups' positions: the store's id and the group."""
        return f"{self.store_id}:{group}"

    # ---- maintenance -------------------------------------------------------------------

    def prune(self, retain: int = 0) -> list[BatchMeta]:
        """Delete batches every group has acked, keeping the newest ``retain`` of those."""
        return admin.prune(self, retain)

    def drop_from(self, first: int) -> dict[str, Any]:
        """Remove batch ``first`` and later ones so capture reads them again (capture lock held).
        The lineage records it: batches ``first``.. will be cut anew (see :meth:`lineage`)."""
        self._require_capture("drop_from")
        pos = admin.drop_from(self, first)
        self._next_id = first
        return pos

    def record_recapture(self, first: int) -> None:
        """Add "batches ``first``.. are cut anew" to the lineage (before they are deleted)."""
        generation, recaptures = self.lineage()
        body = {"generation": generation + 1, "recaptures": [*map(list, recaptures), [generation + 1, first]]}
        write_atomic(self.root / LINEAGE_FILE, (json.dumps(body) + "\n").encode())

    def lineage(self) -> tuple[int, tuple[tuple[int, int], ...]]:
        """``(generation, ((generation, first batch), ...))``: how often batches were dropped for
        re-capture, and from where. Positions recorded in targets (adapters/rdb/progress.py) under
        an older generation no longer vouch for batches at or after such a ``first``."""
        try:
            body = json.loads((self.root / LINEAGE_FILE).read_bytes())
        except FileNotFoundError:
            return 0, ()
        except (OSError, ValueError) as e:
            raise StoreError(f"{self.root / LINEAGE_FILE}: unreadable: {e}") from None
        return int(body["generation"]), tuple((int(g), int(f)) for g, f in body["recaptures"])

    def status(self) -> dict[str, Any]:
        """A JSON-ready summary for ``sluice store status``."""
        from .status import status

        return status(self)
