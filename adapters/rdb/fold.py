"""Folding one key's changes within a chunk into the fewest that end in the same row.

A chunk of OLTP traffic changes hot rows many times (sysbench's default key distribution sends
three quarters of its writes to one percent of the rows): applying every change costs a statement
slot each, and every repeat of a key adds a *wave* (:mod:`adapters.rdb.sequence`), i.e. more, smaller
statements. Where a key's changes only ever touch that key's row (the tables waves regroup: no
ordered group, every key column compares exactly), the changes of one key in a chunk can be
replaced by at most two that leave the target row exactly as applying all of them would --
whatever the target held before, because a replay after a crash applies them to a row that may
already be ahead.

The writer's semantics per change, on one target row (absent, or present with some image):
``INSERT x`` makes an absent row ``x`` and skips a present one (a replay's duplicate);
``UPDATE x`` sets every column of ``x`` on a present row and misses an absent one; ``DELETE``
makes it absent. :func:`fold` runs the chain from both starting states and keeps the shortest
sequence with the same two outcomes:

=======================  =======================  ========================================
from absent              from present             folded to
=======================  =======================  ========================================
absent                   absent                   the last ``DELETE`` (after the first
                                                  ``INSERT`` when the chain starts with one)
absent                   the last UPDATE's image  that ``UPDATE`` (changed columns merged)
the last image           the last image           a chain starting with ``INSERT``: it, then
                                                  an ``UPDATE`` to the last image; else the
                                                  last ``DELETE`` + an ``INSERT`` of it
the first INSERT's       unchanged                that ``INSERT``
=======================  =======================  ========================================

Only chains that one row of a source with a unique key can write are folded; anything else (an
INSERT of a row the chain had not deleted: source rows sharing a key under ``allowDuplicateKeys``,
whose skipped duplicates and missed changes are counted as such; an UPSERT of a full load) is
applied as it came, and so is a chain whose key holds a
NULL (a nullable unique ``targetPk``: the target keeps each such row apart). Only chains of one
row shape are folded (a row image with fewer columns -- ``binlog_row_image=MINIMAL`` -- sets only
those columns), and UPDATEs that change no written column are dropped first, as the writer skips
them anyway.
"""

from __future__ import annotations

from adapters.base import Change

_FOLDED_KINDS = frozenset({"INSERT", "UPDATE", "DELETE"})
_ABSENT = -1   # the row does not exist
_KEPT = -2     # the row is as the target held it before the chain (a skipped duplicate INSERT)


def _run(chain: list[Change], state: int) -> int:
    """The row after the chain from ``state``: ``_ABSENT``, ``_KEPT``, or the index of the change
    whose image it holds."""
    for i, c in enumerate(chain):
        kind = c.kind
        if kind == "INSERT":
            if state == _ABSENT:
                state = i
        elif kind == "UPDATE":
            if state != _ABSENT:
                state = i
        else:
            state = _ABSENT
    return state


def fold(chain: list[Change], written: tuple[str, ...] = ()) -> list[Change] | None:
    """The folded changes of one key's chain (in order), or None to apply the chain as it came.

    ``chain``: two or more changes of one row, in source order, each INSERT, UPDATE or DELETE,
    none changing the key, all of one row shape, none an UPDATE that changes nothing written.
    ``written``: the non-key columns an UPDATE writes (marked changed in a synthesized UPDATE).

    A chain that starts with an INSERT made its row in this chunk (on a consistent target the row
    is absent before it): the fold keeps that INSERT first, so a healthy target counts no DELETE
    or UPDATE that matched nothing (``missed`` says the target lacks rows)."""
    if any(c.kind not in _FOLDED_KINDS for c in chain) or not _consistent(chain):
        return None
    a, p = _run(chain, _ABSENT), _run(chain, _KEPT)
    new_row = chain[0].kind == "INSERT"
    if a == _ABSENT and p == _ABSENT:
        last_delete = chain[max(i for i, c in enumerate(chain) if c.kind == "DELETE")]
        return [chain[0], last_delete] if new_row else [last_delete]
    if a == _ABSENT and p >= 0:
        return [_merged_update(chain, p)]
    if a >= 0 and a == p:
        last = chain[a]
        if new_row:  # it ends as ``last``'s image from any state: INSERT, then UPDATE to that image
            deleted = any(c.kind == "DELETE" for c in chain[1:a])
            update = _merged_update(chain, a) if last.kind == "UPDATE" and not deleted else \
                last._replace(kind="UPDATE", old=dict.fromkeys(written))
            return [chain[0], update]
        deletes = [i for i, c in enumerate(chain) if c.kind == "DELETE"]
        if deletes:
            insert = last if last.kind == "INSERT" else last._replace(kind="INSERT", old=None)
            return [chain[deletes[-1]], insert]
        return None
    if a >= 0 and p == _KEPT and chain[a].kind == "INSERT":
        return [chain[a]]
    return None


def _consistent(chain: list[Change]) -> bool:
    """A chain one row of a source with a unique key can write: INSERT only where the row is absent,
    UPDATE and DELETE only where it exists (before the chain it exists unless the chain starts with
    an INSERT). Source rows that share a key (``allowDuplicateKeys``) write other chains, and their
    duplicate INSERTs and missed UPDATEs are counted as such (skipped, missed), never folded away."""
    exists = chain[0].kind != "INSERT"
    for c in chain:
        if (c.kind == "INSERT") == exists:
            return False
        exists = c.kind != "DELETE"
    return True


def _merged_update(chain: list[Change], last: int) -> Change:
    """The UPDATE at ``last`` with the before-values of every column the chain's UPDATEs changed
    (each column's earliest), so it counts as changing what any of them changed."""
    old: dict = {}
    for c in chain[: last + 1]:
        if c.kind == "UPDATE" and c.old:
            for k, v in c.old.items():
                old.setdefault(k, v)
    return chain[last]._replace(old=old)
