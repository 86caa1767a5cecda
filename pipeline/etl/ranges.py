"""Split a table into primary-key ranges for parallel reads (never OFFSET paging).

A :class:`KeyRange` is ``lo < key <= hi`` (``None`` = open end), compared as a row over the
primary-key columns in key order. Boundaries come from:

* a single integer key over a dense key space: equal-width ranges between ``MIN`` and ``MAX``;
* anything else (composite or non-integer keys, or integer keys whose span is much larger
  than the row count, i.e. sparse or skewed): **ordered key sampling** -- the server scans
  the key in order and returns about ``64 x parts`` random keys (``WHERE RAND() < p ORDER BY
  key``); every ``len/parts``-th sampled key is a boundary, so each range holds about the
  same number of rows whatever the distribution;
* a table without a primary key: one range (one streaming SELECT).

Within a range the reader pages by key (``key > last ORDER BY key LIMIT readBatch``), so a
page costs the same wherever it is, and each page is a short read of current data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pymysql.cursors

from pipeline.etl.source import TableMeta, qi
from sluice_common.mysqltypes import INTEGER_TYPES

SAMPLES_PER_PART = 64
#: an integer key whose span exceeds this many times the row count is split by sampling
SPARSE_FACTOR = 20
#: below this many (estimated) rows per part, use fewer parts
MIN_ROWS_PER_PART = 2000


@dataclass(frozen=True)
class KeyRange:
    """``lo < key <= hi``; ``None`` bounds are open. Values are the key's raw text/bytes."""

    lo: tuple | None = None
    hi: tuple | None = None

    def __str__(self) -> str:
        def b(v):
            return "-inf" if v is None else ",".join(x.decode("latin-1") if isinstance(x, bytes) else str(x)
                                                     for x in v)
        return f"({b(self.lo)}, {b(self.hi) if self.hi is not None else '+inf'}]"


def _cols(pk: tuple[str, ...], alias: str) -> list[str]:
    pre = f"{alias}." if alias else ""
    return [pre + qi(c) for c in pk]


def greater(pk: tuple[str, ...], bound: tuple, alias: str = "") -> tuple[str, list]:
    """SQL for ``(pk) > bound`` (expanded, with a leading ``k1 >= b1`` the optimizer can range on)."""
    cols = _cols(pk, alias)
    if len(cols) == 1:
        return f"{cols[0]} > %s", [bound[0]]
    terms, params = [], []
    for i in range(len(cols)):
        eqs = [f"{cols[j]} = %s" for j in range(i)]
        terms.append("(" + " AND ".join([*eqs, f"{cols[i]} > %s"]) + ")")
        params += [*bound[:i], bound[i]]
    return f"({cols[0]} >= %s AND ({' OR '.join(terms)}))", [bound[0], *params]


def at_most(pk: tuple[str, ...], bound: tuple, alias: str = "") -> tuple[str, list]:
    """SQL for ``(pk) <= bound``."""
    cols = _cols(pk, alias)
    if len(cols) == 1:
        return f"{cols[0]} <= %s", [bound[0]]
    terms, params = [], []
    n = len(cols)
    for i in range(n):
        eqs = [f"{cols[j]} = %s" for j in range(i)]
        op = "<=" if i == n - 1 else "<"
        terms.append("(" + " AND ".join([*eqs, f"{cols[i]} {op} %s"]) + ")")
        params += [*bound[:i], bound[i]]
    return f"({cols[0]} <= %s AND ({' OR '.join(terms)}))", [bound[0], *params]


def range_predicate(pk: tuple[str, ...], r: KeyRange, alias: str = "", after: tuple | None = None
                    ) -> tuple[str, list]:
    """The WHERE text (``1=1`` when unbounded) and parameters of a range, starting after ``after``
    (the last key read) when given."""
    parts, params = [], []
    lo = after if after is not None else r.lo
    if pk and lo is not None:
        s, p = greater(pk, lo, alias)
        parts.append(s)
        params += p
    if pk and r.hi is not None:
        s, p = at_most(pk, r.hi, alias)
        parts.append(s)
        params += p
    return (" AND ".join(parts) or "1=1"), params


def _is_int_key(meta: TableMeta) -> bool:
    return len(meta.pk) == 1 and meta.column(meta.pk[0]).data_type in INTEGER_TYPES


def estimate_rows(conn, meta: TableMeta) -> int:
    """The row estimate; small or unknown estimates are counted exactly (cheap then)."""
    if meta.est_rows >= 50_000:
        return meta.est_rows
    with conn.cursor(pymysql.cursors.Cursor) as cur:
        cur.execute(f"SELECT COUNT(*) FROM {meta.qualified}")
        return int(cur.fetchone()[0])


def split(conn, meta: TableMeta, parts: int, rows: int | None = None) -> list[KeyRange]:
    """Key ranges covering the whole table exactly once (see the module docstring)."""
    if not meta.pk or parts <= 1:
        return [KeyRange()]
    rows = estimate_rows(conn, meta) if rows is None else rows
    parts = max(1, min(parts, math.ceil(rows / MIN_ROWS_PER_PART)))
    if parts <= 1:
        return [KeyRange()]
    if _is_int_key(meta):
        col = qi(meta.pk[0])
        with conn.cursor(pymysql.cursors.Cursor) as cur:
            cur.execute(f"SELECT MIN({col}), MAX({col}) FROM {meta.qualified}")
            lo, hi = cur.fetchone()
        if lo is None:
            return [KeyRange()]
        lo, hi = int(lo), int(hi)
        span = hi - lo + 1
        if span <= SPARSE_FACTOR * max(rows, 1):
            bounds = sorted({lo - 1 + (span * i) // parts for i in range(1, parts)})
            return _from_bounds([(str(b),) for b in bounds if lo <= b < hi])
    return _from_bounds(sample_bounds(conn, meta, parts, rows))


def sample_bounds(conn, meta: TableMeta, parts: int, rows: int) -> list[tuple]:
    """``parts - 1`` boundary keys from an ordered random sample of the key."""
    want = SAMPLES_PER_PART * parts
    p = min(1.0, want / max(rows, 1))
    cols = ", ".join(qi(c) for c in meta.pk)
    where = "" if p >= 1.0 else f" WHERE RAND() < {p:.9f}"
    with conn.cursor(pymysql.cursors.Cursor) as cur:
        cur.execute(f"SELECT {cols} FROM {meta.qualified}{where} ORDER BY {cols}")
        sample = [tuple(r) for r in cur.fetchall()]
    if len(sample) < 2:
        return []
    out: list[tuple] = []
    for i in range(1, parts):
        b = sample[min(len(sample) - 1, (len(sample) * i) // parts)]
        if not out or b != out[-1]:
            out.append(b)
    if out and out[-1] == sample[-1]:
        out.pop()  # the last range would be empty in the sample (not wrong, just wasted)
    return out


def _from_bounds(bounds: list[tuple[Any, ...]]) -> list[KeyRange]:
    edges: list[tuple | None] = [None, *bounds, None]
    return [KeyRange(edges[i], edges[i + 1]) for i in range(len(edges) - 1)]
