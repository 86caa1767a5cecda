"""The part key's pieces without Spark or a server: the fold UDF body for folds that need no
server, and the feed keeping an ordered group's order across mappings."""

from __future__ import annotations

import pandas as pd

from adapters.base import Change
from adapters.rdb.keys import KeyRules
from pipeline.job.feed import Feed
from pipeline.job.keyfold import FOLDED, NULL, SEP, fold_function


def test_only_the_named_key_columns_of_rules_rows_are_folded():
    folder = KeyRules.folder(None)  # folds that need no server
    fold = fold_function([(folder, {"k2": "lower"}), (folder, {"id": "rtrim"})])
    rule = pd.Series(["0", None, "1", "0"])
    names = pd.Series([f"k1{SEP}k2", "id", "id", f"k1{SEP}k2"])
    key = pd.Series([f"Ab{SEP}Zz  ", "x  ", "y  ", f"Q{SEP}{NULL}"])
    out = list(fold(rule, names, key))
    assert out == [f"Ab{SEP}{FOLDED}zz", "x  ", f"{FOLDED}y", f"Q{SEP}{NULL}"]


class Recorder:
    def __init__(self) -> None:
        self.flushed: list[tuple[int, list[int]]] = []

    def flush(self, midx: int, chunk: list[Change]) -> None:
        self.flushed.append((midx, [c.seq[1] for c in chunk]))


def ch(i: int, ordered: bool) -> Change:
    return Change("INSERT", "db", "t", {"id": str(i)}, seq=(1, i, 0), ordered=ordered)


def test_an_ordered_group_across_two_mappings_is_flushed_in_source_order():
    run = Recorder()
    feed = Feed(run, [100, 100])
    feed.add([0, 0], [ch(1, True), ch(2, False)])
    feed.add([1], [ch(3, True)])       # mapping 1's ordered change waits for mapping 0's
    feed.add([1, 0], [ch(4, False), ch(5, True)])
    feed.drain()
    assert run.flushed == [(0, [1, 2]), (1, [3, 4]), (0, [5])]


def test_unordered_changes_of_two_mappings_keep_filling_their_chunks():
    run = Recorder()
    feed = Feed(run, [100, 100])
    feed.add([0, 1, 0, 1], [ch(1, False), ch(2, False), ch(3, False), ch(4, False)])
    feed.drain()
    assert run.flushed == [(0, [1, 3]), (1, [2, 4])]
