"""A segment without a shuffle: every task reads the round's batch files and keeps its own keys.

The plan of :mod:`pipeline.job.plan` has the JVM read every batch line, parse every row image
for its key, hash-partition the rows (a shuffle), sort each partition and hand it to the Python
worker over Arrow, where each row image is parsed again. On a 2-core machine those JVM stages
cost more CPU than the apply (docs/benchmarks.md, backlog). When a segment needs nothing the
JVM is for -- every change partitioned by its exact key (no ordered group, no folded ``_ci``
key), batches in local files every executor reads
(``StoreCapabilities.local_files``) -- the driver runs it as an RDD of P numbers
(:func:`pipeline.job.segment.scan_tasks`), one task per partition, and each task (:func:`own_changes`):

1. reads every line of the round's files with orjson, keeping the lines inside the segment
   (DDL lines and waived lines out, as :meth:`pipeline.job.plan.Segment.condition`);
2. routes each line to the mappings that want its table, splits it into rows, and turns an UPDATE
   that changes the route's key into a DELETE of the old key and an INSERT of the new row;
3. keeps the rows whose part key (mapping and key, as the plan's ``part``) hashes to its partition
   (CRC-32: the same in every task), and sorts them as the plan sorts a hash partition: the rows
   of a folding writer's key-grouped tables last, by key, then seq; the others by seq (one
   partition too, which the plan streams in seq order unsorted: each key's order is the same).

Every task parses the whole round (a JSON parse per line per partition); in exchange the JVM's
parse, the shuffle, the sort and the Arrow transfer are gone, and each row image is parsed once.
So partitions trade CPU for parallelism: one task parses each line once (on a machine whose cores
are busy with other work, such as a primary beside the follower, that is the faster setting;
docs/benchmarks.md, follower freshness).
"""

from __future__ import annotations

import gc
import zlib
from dataclasses import dataclass
from typing import Any

import orjson

from adapters.base import Change
from pipeline.job.keyfold import NULL, SEP, KeyPlan
from pipeline.job.routing import Route
from sluice_common.errors import SluiceError

#: rows handed to the feed at a time (the order check and the per-mapping split run per piece)
PIECE = 5000
#: a task holds its rows of the round in memory (to sort them; the plan's sort spills to disk), and
#: one task may get every row (one hot key, a ``concurrent: false`` mapping): rounds of more rows run
#: the plan (``spark.roundRows`` is 100,000 by default; 0, unbounded rounds, mostly exceed it)
MAX_ROUND_ROWS = 250_000
#: ... and of batch files of at most this many bytes (wide rows: the objects take several times
#: their JSON); a larger round runs the plan, whose one-partition stream holds a piece at a time
MAX_ROUND_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class ScanPlan:
    """One segment for :func:`own_changes` (picklable): the files, routes and partitioning."""

    paths: tuple[str, ...]
    routes: tuple[Route, ...]
    partitions: int
    #: mappings whose writer folds each key's changes (``KeyPlan.by_key``): delivered grouped by key
    by_key: frozenset[int]
    #: lines strictly after ``start`` and strictly before ``end`` ((batchId, seq); None: open)
    start: tuple[int, int] | None = None
    end: tuple[int, int] | None = None
    #: (batchId, seq) of lines a repair made good: not applied
    skip: frozenset = frozenset()


class RoundFiles:
    """The round's batch files for :func:`scan_plan`: verified by the store once per round (its
    ``paths`` hashes every file), handed to each segment only as far as its batches reach."""

    def __init__(self, store: Any, batches: list):
        self.store, self.batches = store, batches
        self.local = bool(store.capabilities.local_files)
        self.rows = sum(b.rows for b in batches)
        self.bytes = sum(getattr(b, "size", 0) for b in batches)
        self._paths: dict[int, str] | None = None

    def verify(self) -> None:
        """Check every file of the round (size and sha256) once, before anything of it runs: a
        corrupt batch refuses the round up front, not after a DDL barrier ahead of it was applied."""
        if self._paths is None:
            self._paths = dict(zip([b.batch_id for b in self.batches], self.store.paths(self.batches), strict=True))

    def between(self, start: tuple[int, int] | None, end: tuple[int, int] | None) -> tuple[str, ...]:
        """The files of the batches a segment from ``start`` to ``end`` can hold lines of."""
        self.verify()
        return tuple(p for b, p in self._paths.items()
                     if (start is None or b >= start[0]) and (end is None or b <= end[0]))


class RoundFrame:
    """The round's DataFrame (:meth:`~pipeline.store.changelog.ChangeLog.frame`), made when first
    asked for: a round whose segments all scan (:mod:`pipeline.job.scan`) reads its files itself
    (verified once, by :class:`RoundFiles`) and builds none. ``where`` and
    ``persist`` apply in the order given, when it is made or at once if it was."""

    def __init__(self, make):
        self._make, self._df, self._steps = make, None, []

    def frame(self):
        if self._df is None:
            df = self._make()
            for step in self._steps:
                df = step(df)
            self._df = df
        return self._df

    def where(self, cond) -> None:
        self._step(lambda df: df.where(cond))

    def persist(self) -> None:
        self._step(lambda df: df.persist())

    def _step(self, step) -> None:
        if self._df is None:
            self._steps.append(step)
        else:
            self._df = step(self._df)

    def unpersist(self) -> None:
        if self._df is not None:
            self._df.unpersist()


def scan_plan(files: RoundFiles, segment: Any, routes: list[Route], keys: KeyPlan | None, partitions: int,
              waived: list[tuple[int, int]], enabled: bool = True) -> ScanPlan | None:
    """The segment as a :class:`ScanPlan`, or None where the JVM's plan must run it: an ordered group
    or a folded key in the segment's key rules, a store whose batches are no local files, a round of
    more than :data:`MAX_ROUND_ROWS` rows or :data:`MAX_ROUND_BYTES` bytes, or ``spark.scan: false``.
    One partition scans too: its task parses each line once, against the JVM's parse and the Arrow
    transfer of the plan's stream (a backlog's sync 44 -> 28 s; docs/benchmarks.md)."""
    keys = keys or KeyPlan()
    if not enabled or keys.ordered or keys.folds or not files.local:
        return None
    if files.rows > MAX_ROUND_ROWS or files.bytes > MAX_ROUND_BYTES:
        return None
    return ScanPlan(files.between(segment.start, segment.end), tuple(routes), partitions, frozenset(keys.by_key),
                    segment.start, segment.end, frozenset(waived))


def _routes_of(plan: ScanPlan):
    """``(database, table) -> the routes that want its lines``, memoized (few tables per round)."""
    memo: dict[tuple[str, str], list[Route]] = {}

    def hits(database: str, table: str) -> list[Route]:
        found = memo.get((database, table))
        if found is None:
            found = memo[(database, table)] = [r for r in plan.routes if _matches(r, database, table)]
        return found
    return hits


def _matches(route: Route, database: str | None, table: str | None) -> bool:
    """:meth:`Route.condition` in Python (a NULL database or table matches no named one)."""
    def eq(value: str | None, want: str) -> bool:
        if value is None:
            return False
        return value.lower() == want.lower() if route.case_insensitive else value == want
    return (route.database is None or eq(database, route.database)) and (route.table is None or eq(table, route.table))


def _text(v: Any) -> str:
    """A key part as text (the capture writes strings; anything else by its JSON)."""
    return NULL if v is None else (v if isinstance(v, str) else orjson.dumps(v).decode())


def _key(image: dict, names: tuple) -> str:
    if len(names) == 1:
        v = image.get(names[0])
        return v if isinstance(v, str) else _text(v)
    return SEP.join([_text(image.get(k)) for k in names])


def _old_key(new: dict, old: dict, names: tuple) -> str:
    if len(names) == 1:
        k = names[0]
        return _text(old[k] if k in old else new.get(k))
    return SEP.join([_text(old[k] if k in old else new.get(k)) for k in names])


def own_changes(plan: ScanPlan, pid: int) -> list[tuple[tuple, int, Change, str | None]]:
    """The changes of partition ``pid``, in the order the plan's sort gives: ``(order key, midx,
    change, group key)`` (the group key as :func:`pipeline.job.feed.group_keys`: None unless the
    row is delivered grouped by key)."""
    hits, loads = _routes_of(plan), orjson.loads
    start, end, skip = plan.start, plan.end, plan.skip
    out: list = []
    collecting = gc.isenabled()
    gc.disable()  # the rows are kept, not garbage: each collection would walk them all again (-30%)
    try:
        _read(plan, pid, out, hits, loads, start, end, skip, {})
    finally:
        if collecting:
            gc.enable()
    out.sort(key=_order)
    return out


def _read(plan: ScanPlan, pid: int, out: list, hits, loads, start, end, skip, shared: dict) -> None:
    """Every line of the plan's files inside the segment, split into ``out`` (the rows of ``pid``)."""
    for path in plan.paths:
        with open(path, "rb") as f:
            for no, line in enumerate(f, 1):
                try:
                    r = loads(line)
                except orjson.JSONDecodeError as e:  # verified on the driver: changed since
                    raise SluiceError(f"batch file {path}, line {no}: not a JSON line ({e}); nothing was acked",
                                      hint="run `sluice store verify --config <config>`: it names the "
                                           "corrupt batches") from None
                if r.get("isDdl"):
                    continue
                pos = (r["batchId"], r["seq"])
                if (start is not None and pos <= start) or (end is not None and pos >= end) or pos in skip:
                    continue
                routes = hits(r.get("database"), r.get("table"))
                if routes:
                    _split(r, pos, routes, plan, pid, out, shared)


def _order(row: tuple) -> tuple:
    return row[0]


def _shared(r: dict, db: str | None, table: str | None, memo: dict) -> tuple[tuple, dict]:
    """The line's ``pkNames`` (as a tuple) and ``mysqlType``, as the objects of the last line of its
    table that had the same ones (the rows a task keeps share them, as the Arrow decoder's do)."""
    pk, types = tuple(r.get("pkNames") or ()), r.get("mysqlType") or {}
    known = memo.get((db, table))
    if known is not None and known[0] == pk and known[1] == types:
        return known
    memo[(db, table)] = found = (pk, types)
    return found


def _split(r: dict, pos: tuple[int, int], routes: list[Route], plan: ScanPlan, pid: int, out: list,
           shared: dict) -> None:
    """Rows of one line for its routes, the ones whose part key hashes to ``pid`` appended to ``out``."""
    data, old, row_no = r.get("data") or (), r.get("old") or (), r.get("rowNo") or ()
    kind, db, table = r.get("type"), r.get("database"), r.get("table")
    bid, seq = pos
    pk, types = _shared(r, db, table, shared)
    fk = r.get("fkChecks") is not False
    update = kind == "UPDATE"
    n = plan.partitions
    for route in routes:
        midx = route.midx
        names = pk if route.key_columns is None else route.key_columns
        grouped = route.concurrent and midx in plan.by_key
        prefix = f"{midx}\u0002"
        every = not route.concurrent  # the mapping's changes share one partition (the plan's part: no key)
        if every and not _mine(prefix, "", n, pid):
            continue
        for i, d in enumerate(data):
            image = isinstance(d, dict)  # the plan parses no key change out of a row image that is none
            if not image:
                d = {}
            o = old[i] if i < len(old) else None
            at = (bid, seq, row_no[i] if i < len(row_no) else i)
            key = _key(d, names)
            if update and image and o.__class__ is dict:
                before = _old_key(d, o, names)
                if before != key:  # the key changed: DELETE of the old key, INSERT of the new row
                    if every or _mine(prefix, before, n, pid):
                        was = {k: (o[k] if k in o else v) for k, v in d.items()}
                        out.append(_entry(grouped, before, midx, at, 0,
                                          Change("DELETE", db, table, was, None, pk, types, at, False, fk)))
                    if every or _mine(prefix, key, n, pid):
                        out.append(_entry(grouped, key, midx, at, 1,
                                          Change("INSERT", db, table, d, None, pk, types, at, False, fk)))
                    continue
            if every or _mine(prefix, key, n, pid):
                out.append(_entry(grouped, key, midx, at, 0, Change(kind, db, table, d, o, pk, types, at, False, fk)))


def _mine(prefix: str, key: str, n: int, pid: int) -> bool:
    """Does the part key ``prefix + key`` (the plan's ``part``) hash to partition ``pid`` of ``n``?"""
    if n == 1:
        return True
    return zlib.crc32((prefix + key).encode("utf-8", "surrogatepass")) % n == pid


def _entry(grouped: bool, key: str, midx: int, at: tuple, sub: int, change: Change) -> tuple:
    """A kept row: its order key (the plan's sort), mapping, change and group key (None: not grouped)."""
    hk = SEP.join((key, str(midx), change.database or "", change.table or "")) if grouped else None
    return (grouped, hk or "", *at, sub), midx, change, hk


def pieces(rows: list, size: int = PIECE):
    """``(midx list, changes, group keys)`` pieces of :func:`own_changes`'s rows, for the feed."""
    for i in range(0, len(rows), size):
        part = rows[i:i + size]
        yield [x[1] for x in part], [x[2] for x in part], [x[3] for x in part]
