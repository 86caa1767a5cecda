"""Folding one key's changes (adapters/rdb/fold.py), checked against the writer's semantics on
every chain of up to six changes from every starting state of the target row. No services."""

from __future__ import annotations

import itertools

import pytest

from adapters.base import Change
from adapters.rdb.fold import fold

KINDS = ("INSERT", "UPDATE", "DELETE")
START = ("absent", "present", "ahead")  # ahead: a replay finds the row holding a later image


def _chain(kinds: tuple[str, ...]) -> list[Change]:
    out = []
    for i, k in enumerate(kinds):
        data = {"id": "1", "v": f"v{i}", "w": f"w{i}"}
        old = {"v": f"v{i - 1}"} if k == "UPDATE" else None
        out.append(Change(k, "db", "t", data, old, ("id",), {}, (1, i, 0)))
    return out


def _apply(changes: list[Change], row: dict | None) -> tuple[dict | None, int]:
    """The target row after the changes (INSERT skips a present row, UPDATE sets every column of
    a present row and misses an absent one, DELETE removes), and how many matched no row."""
    missed = 0
    for c in changes:
        if c.kind == "INSERT":
            row = row if row is not None else dict(c.data)
        elif c.kind == "UPDATE":
            missed += row is None
            row = dict(c.data) if row is not None else None
        else:
            missed += row is None
            row = None
    return row, missed


def _start(name: str) -> dict | None:
    return {"absent": None, "present": {"id": "1", "v": "old", "w": "old"},
            "ahead": {"id": "1", "v": "later", "w": "later"}}[name]


@pytest.mark.parametrize("n", range(2, 7))
def test_a_folded_chain_ends_every_row_as_the_chain_does(n):
    folded_some = 0
    for kinds in itertools.product(KINDS, repeat=n):
        chain = _chain(kinds)
        out = fold(chain, ("v", "w"))
        if out is None:
            continue
        assert 1 <= len(out) <= 2, kinds
        folded_some += 1
        for start in START:
            assert _apply(out, _start(start))[0] == _apply(chain, _start(start))[0], (kinds, start, out)
        assert [c.seq for c in out] == sorted(c.seq for c in out)  # per-key order is kept
    assert folded_some


def _consistent(kinds: tuple[str, ...]) -> bool:
    """A chain a real binlog can hold: INSERT only where the row is absent, UPDATE/DELETE only where
    it exists (the row exists before the chain unless the chain starts with an INSERT)."""
    exists = kinds[0] != "INSERT"
    for k in kinds:
        if (k == "INSERT") == exists:
            return False
        exists = k != "DELETE"
    return True


@pytest.mark.parametrize("n", range(2, 7))
def test_consistent_chains_fold_and_a_healthy_target_counts_no_miss(n):
    """Every chain a real binlog can hold folds; applied to the row as the source had it before
    the chain, the folded changes match a row every time (``missed`` would say the target lacks
    rows), as the chain itself does."""
    for kinds in filter(_consistent, itertools.product(KINDS, repeat=n)):
        chain = _chain(kinds)
        out = fold(chain, ("v", "w"))
        assert out is not None, kinds
        before = None if kinds[0] == "INSERT" else _start("present")
        assert _apply(chain, before)[1] == 0
        assert _apply(out, before) == _apply(chain, before), (kinds, out)


def test_upserts_and_unknown_kinds_are_not_folded():
    assert fold(_chain(("DELETE", "INSERT"))[:1] + [_chain(("UPSERT",))[0]]) is None
    assert fold([_chain(("UPSERT",))[0]] * 2) is None


def test_an_update_chain_keeps_every_changed_column_as_changed():
    chain = _chain(("UPDATE", "UPDATE"))
    chain[0] = chain[0]._replace(old={"w": "w-1"})
    chain[1] = chain[1]._replace(old={"v": "v0"})
    (out,) = fold(chain)
    assert out.kind == "UPDATE" and out.data == chain[1].data and out.old == {"w": "w-1", "v": "v0"}


def test_an_insert_the_chain_did_not_make_room_for_is_not_folded():
    """Source rows sharing a key (allowDuplicateKeys) write such chains: their duplicate INSERT is
    skipped and their UPDATE misses, counted so (tests/integration/test_first_hour.py), not folded."""
    assert fold(_chain(("UPDATE", "INSERT"))) is None
    assert fold(_chain(("INSERT", "INSERT", "DELETE", "UPDATE"))) is None
    for n in range(2, 6):
        for kinds in itertools.product(KINDS, repeat=n):
            assert (fold(_chain(kinds), ("v", "w")) is not None) == _consistent(kinds), kinds
