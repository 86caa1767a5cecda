"""From the Arrow batches a partition receives to the chunks it applies.

``changes`` decodes one batch column by column into :class:`Change` objects, ``check_order``
enforces the seq order the plan promises (a scanned segment's task sorts its rows itself),
``Feed`` cuts each mapping's changes into chunks of ``commitBatch``, and ``Pipe`` applies the
chunks on a second thread, in order, so that decoding the next batch overlaps with the target
executing the current chunk (a database driver waits on its socket with the GIL released).
"""

from __future__ import annotations

import queue
import threading
from itertools import islice
from operator import le
from typing import Any

import orjson
import pyarrow as pa

from adapters.base import Change
from sluice_common.errors import SluiceError


class Decoded(dict):
    """Decoded JSON text by text (``pkNames``, ``mysqlType``: one distinct text per table)."""

    def __init__(self, empty):
        super().__init__()
        self.empty = empty

    def __missing__(self, text):
        value = (orjson.loads(text) or self.empty) if text else self.empty
        self[text] = value = tuple(value) if isinstance(value, list) else value
        return value


def repeated(column: pa.Array, decode=None) -> list:
    """A column of few distinct values (kind, database, table, pkNames, mysqlType) as a list that
    holds one Python object per distinct value: Arrow dictionary-encodes it, ``decode`` (if
    given) runs once per distinct value, and the rows only index into the result."""
    enc = column.dictionary_encode(null_encoding="encode")
    values = enc.dictionary.to_pylist()
    if decode is not None:
        values = list(map(decode, values))
    if len(values) == 1:
        return values * len(column)
    return list(map(values.__getitem__, enc.indices.to_pylist()))


def changes(batch: pa.RecordBatch, pks: Decoded, types: Decoded) -> tuple[list[int], list[Change]]:
    """The mapping indexes and Change objects of one Arrow batch, built column by column: the
    row images ``d``/``o`` arrive as JSON text (decoded here with orjson), the repeated columns
    are materialized once per distinct value (:func:`repeated`)."""
    col, loads = batch.column, orjson.loads
    d = col("d")
    d = list(map(loads, d.to_pylist())) if d.null_count == 0 else [loads(x) if x else {} for x in d.to_pylist()]
    o = col("o")
    o = [None] * len(o) if o.null_count == len(o) else [loads(x) if x else None for x in o.to_pylist()]
    seqs = list(zip(col("batchId").to_pylist(), col("seq").to_pylist(), col("row").to_pylist(), strict=True))
    ordered = col("ordered").to_pylist() if "ordered" in batch.schema.names else [False] * len(seqs)
    fk = col("fk").to_pylist() if "fk" in batch.schema.names else [True] * len(seqs)
    out = list(map(Change, repeated(col("kind")), repeated(col("database")), repeated(col("table")), d, o,
                   repeated(col("pkNames"), pks.__getitem__), repeated(col("mysqlType"), types.__getitem__),
                   seqs, ordered, fk))
    return col("midx").to_pylist(), out


class Feed:
    """Per-mapping chunks of ``commitBatch`` changes, flushed through the run as they fill.

    Changes of an ordered group may belong to several mappings (foreign keys across two mapped
    databases): before an ordered change of one mapping is buffered, the other mapping's
    buffer that holds earlier ordered changes is flushed, so they are applied in source order."""

    def __init__(self, run: Any, limits: list[int]):
        self.run, self.limits = run, limits
        self.pending: dict[int, list[Change]] = {}
        self._ordered_in: int | None = None  # the mapping whose buffer may hold ordered changes

    def add(self, midx: list[int], changes: list[Change]) -> None:
        first = midx[0]
        if midx.count(first) == len(midx):  # the common case: one mapping's changes
            if len(self.limits) > 1 and any(c.ordered for c in changes):
                self._ordered(first)
            self._extend(first, changes)
            return
        for m, c in zip(midx, changes, strict=True):
            if c.ordered:
                self._ordered(m)
            self._extend(m, [c])

    def _ordered(self, m: int) -> None:
        prev = self._ordered_in
        if prev is not None and prev != m and self.pending.get(prev):
            self.run.flush(prev, self.pending[prev])
            self.pending[prev] = []
        self._ordered_in = m

    def _extend(self, m: int, changes: list[Change]) -> None:
        buf, limit, i = self.pending.setdefault(m, []), self.limits[m], 0
        while i < len(changes):
            take = limit - len(buf)
            buf.extend(changes[i:i + take])
            i += take
            if len(buf) >= limit:
                self.run.flush(m, buf)
                buf = self.pending[m] = []

    def drain(self) -> None:
        for m, buf in self.pending.items():
            if buf:
                self.run.flush(m, buf)
        self.pending = {}


def check_order(last: tuple, changes: list[Change], pid: int, hks: list | None = None) -> tuple:
    """The plan promises seq order within a partition -- for a folding writer's key-grouped rows
    (``hks``: their group keys, None for the others), order by group key and then seq, after the
    others; never apply out of it. Returns the order key of the last change (the next ``last``)."""
    if hks is None:
        keys = [(False, "", c.seq) for c in changes]
    else:
        keys = [(h is not None, h or "", c.seq) for h, c in zip(hks, changes, strict=True)]
    if keys[0] >= last and all(map(le, keys, islice(keys, 1, None))):
        return keys[-1]
    bad = next(k for p, k in zip([last, *keys], keys, strict=False) if k < p)
    raise SluiceError(f"internal: change {bad[2]} reached partition {pid} out of order; nothing was acked",
                      hint="report this; rerun with spark.partitions > 1 (the plan sorts each partition)")


def group_keys(batch: pa.RecordBatch) -> list | None:
    """The ``hk`` column of a batch: each key-grouped row's group key (None when the plan has none: one partition)."""
    return batch.column("hk").to_pylist() if "hk" in batch.schema.names else None


class Pipe:
    """``flush(midx, chunk)`` on a thread of its own, one chunk after the other in the order given.

    At most ``depth`` chunks wait. After a failure later chunks are dropped (not applied) and the
    error is raised to the caller at its next ``flush`` or at ``finish``."""

    def __init__(self, run: Any, depth: int = 2):
        self.run = run
        self.error: BaseException | None = None
        self._dropping = False
        self._q: queue.Queue = queue.Queue(maxsize=depth)
        self._thread = threading.Thread(target=self._loop, name="sluice-apply", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            if self.error is None and not self._dropping:
                try:
                    self.run.flush(*item)
                except BaseException as e:  # noqa: BLE001 - handed to the caller
                    self.error = e

    def flush(self, midx: int, chunk: list[Change]) -> None:
        if self.error is not None:
            raise self.error
        self._q.put((midx, chunk))

    def finish(self) -> None:
        """Wait for every submitted chunk; raise the first failure."""
        self.stop(drop=False)
        if self.error is not None:
            raise self.error

    def stop(self, drop: bool = True) -> None:
        """End the thread; ``drop``: chunks still waiting are not applied (the caller failed)."""
        self._dropping = drop
        if self._thread.is_alive():
            self._q.put(None)
            self._thread.join()


