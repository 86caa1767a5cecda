"""Collations as the source and its MySQL/MariaDB targets both see them, below ``pipeline`` and
``adapters``: the source's defaults a replayed DDL statement left implicit (:class:`SourceCharsets`,
read from the source by pipeline/source/catalog.py, used by adapters/rdb/charsets.py), and what the
pre-flight key-collation check asks each server (:func:`equal_pairs` over :data:`PROBES`) and
compares (:func:`coarser_example`): pipeline/job/collations.py asks the source, the RDB adapter
(adapters/rdb/keycollations.py) its target.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class SourceCharsets:
    """The source's defaults a DDL statement left implicit (read by the job from the source)."""

    #: database -> (charset, collation): the default of each mirrored database
    databases: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    #: charset -> its default collation on the source server
    charsets: Mapping[str, str] = field(default_factory=dict)


#: strings that tell collations apart: case, accents, trailing and leading spaces, expansions and
#: ligatures, width, kana, dotless i, final sigma, no-break space, emoji, digits
PROBES = ("a", "A", "á", "Á", "à", "ä", "å", "æ", "ae", "AE", "b", "c", "ç", "e", "é", "ê", "i", "ı", "I", "İ",
          "o", "ö", "ø", "oe", "œ", "s", "ss", "ß", "ẞ", "u", "ü", "ue", "y", "ÿ", "z", "Z", "ž", "a ", "a  ",
          " a", "", " ", "ａ", "Ａ", "ﬁ", "fi", "σ", "ς", "Σ", "α", "ά", "я", "Я", "ё", "е", "か", "カ", "が",
          "😀", "😁", "1", "１", "²", "2", "-", "_", "–", "a\t", "\u00a0", "a\u00a0", "n", "ñ", "Ñ", "ł", "l",
          "đ", "d", "ð", "þ", "th", "Ǆ", "DŽ", "ǅ")
_NAME = re.compile(r"^[A-Za-z0-9_]+$")
_equal_cache: dict[Any, frozenset[tuple[int, int]]] = {}
_equal_lock = threading.Lock()


def equal_pairs(cur, charset: str, collation: str) -> frozenset[tuple[int, int]]:
    """The pairs ``(i, j)``, ``i < j``, of :data:`PROBES` that ``collation`` calls equal, and
    ``(i, -1)`` for each probe ``charset`` cannot hold (``cur``: a DB-API cursor on the server)."""
    if not (_NAME.match(charset) and _NAME.match(collation)):
        raise ValueError(f"not a collation name: {charset!r} {collation!r}")
    conv = f"CONVERT(%s USING {charset})"
    cur.execute("SELECT " + ", ".join([f"CONVERT({conv} USING utf8mb4) = %s COLLATE utf8mb4_bin"] * len(PROBES)),
                tuple(x for p in PROBES for x in (p, p)))
    held = [bool(v) for v in cur.fetchone()]
    rows = " UNION ALL ".join(f"SELECT {i} AS i, {conv} COLLATE {collation} AS s" for i in range(len(PROBES)))
    cur.execute(f"SELECT a.i, b.i FROM ({rows}) a JOIN ({rows}) b ON a.s = b.s AND a.i < b.i", PROBES + PROBES)
    return frozenset({(int(i), int(j)) for i, j in cur.fetchall()} | {(i, -1) for i, h in enumerate(held) if not h})


def cached_equal_pairs(key: Any, cur, charset: str, collation: str) -> frozenset[tuple[int, int]]:
    """:func:`equal_pairs`, asked once per ``key`` (a server and the charset and collation) in a process."""
    with _equal_lock:
        if key in _equal_cache:
            return _equal_cache[key]
    pairs = equal_pairs(cur, charset, collation)
    with _equal_lock:
        _equal_cache[key] = pairs
    return pairs


def coarser_example(source: frozenset, target: frozenset) -> tuple[str, str] | None:
    """Two probes the target calls equal and the source does not (both held by both charsets)."""
    lost = {i for i, j in source | target if j == -1}
    for i, j in sorted(target - source):
        if j != -1 and i not in lost and j not in lost:
            return PROBES[i], PROBES[j]
    return None
