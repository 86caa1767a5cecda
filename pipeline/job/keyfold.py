"""The part key of a change: its ordered group, or its key as the target compares it.

:class:`KeyPlan` turns the adapters' key rules (the factory's ``key_rules``; the RDB adapter's
``KeyRules``) into Spark columns: ``group_expr`` (the ordered group of a change's table, or NULL)
and ``fold_expr`` (the key string with every key column that does not compare exactly replaced by
its fold, by the rules' ``folder``: adapters/rdb/collation.py). Folds run in a Python UDF (only
added to the plan when some key needs a fold); the rest of the plan stays in the JVM.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

SEP, NULL, FOLDED = "\u0001", "\u0000", "\u0003"


@dataclass(frozen=True)
class KeyPlan:
    """Ordered groups and key folds of one segment (picklable; empty: plain key hashing)."""

    ordered: dict[tuple[int, str], str] = field(default_factory=dict)
    folds: dict[tuple[int, str], tuple[tuple[str, str], ...]] = field(default_factory=dict)
    #: midx -> ``(fold kind, texts) -> folds`` of its target (the rules' ``folder``; one object per
    #: target, so a UDF batch asks each target server once per kind)
    folders: dict[int, Any] = field(default_factory=dict)
    #: mappings whose writer folds each key's changes (``Capabilities.folds``): their hash-partitioned
    #: tables with exact keys are delivered grouped by key (:meth:`by_key_expr`)
    by_key: frozenset[int] = frozenset()

    @staticmethod
    def _rule_key() -> Column:
        return F.concat(F.col("midx").cast("string"), F.lit(SEP), F.lower(F.col("table")))

    @staticmethod
    def _lookup(entries: dict[str, str]) -> Column:
        pairs = [F.lit(x) for k, v in sorted(entries.items()) for x in (k, v)]
        return F.create_map(*pairs)

    def group_expr(self) -> Column:
        """The ordered group of the change's (mapping, table), or NULL."""
        if not self.ordered:
            return F.lit(None).cast("string")
        entries = {f"{m}{SEP}{t.lower()}": g for (m, t), g in self.ordered.items()}
        return F.element_at(self._lookup(entries), self._rule_key())

    def by_key_expr(self, key: Column) -> Column:
        """The key, then mapping and table, of a change that its partition may deliver grouped by key
        (a folding writer's table, not in an ordered group, every key column exact), else NULL.
        Sorting by it and then by seq keeps each key's changes together and in order; the key comes
        first so the rows reach the target in key order (sequential inserts stay sequential; a hash
        here scattered them over the table's B-tree: 25.6k -> 18.8k inserted rows/s)."""
        if not self.by_key:
            return F.lit(None).cast("long")
        mine = F.col("midx").isin(*sorted(self.by_key)) & F.col("grp").isNull()
        if self.folds:
            entries = {f"{m}{SEP}{t.lower()}": "1" for (m, t) in self.folds}
            mine &= F.element_at(self._lookup(entries), self._rule_key()).isNull()
        return F.when(mine, F.concat_ws(SEP, key, F.col("midx").cast("string"), F.col("database"), F.col("table")))

    def fold_expr(self, key: Column) -> Column:
        """``key`` (values joined by U+0001) with the non-exact key columns folded."""
        if not self.folds:
            return key
        specs = sorted(self.folds.items())
        entries = {f"{m}{SEP}{t.lower()}": str(i) for i, ((m, t), _) in enumerate(specs)}
        rule = F.element_at(self._lookup(entries), self._rule_key())
        udf = F.pandas_udf(fold_function([(self.folders.get(m), dict(kinds)) for (m, _), kinds in specs]),
                           "string")
        return udf(rule, F.concat_ws(SEP, F.col("knames")), key)


def fold_function(specs: list[tuple[Any, dict[str, str]]]):
    """The pandas UDF body: ``(rule, names, key) -> folded key`` (``rule`` indexes ``specs``, each
    ``(folder, {key column: fold kind})``)."""
    def fold(rule, names, key):
        out = key.copy()
        rows: dict[int, list[str]] = {}  # row -> key parts, folded in place
        pending: dict[tuple[Any, str], list[tuple[int, int]]] = {}  # (folder, kind) -> [(row, part)]
        for i, (r, n, k) in enumerate(zip(rule, names, key, strict=True)):
            if not isinstance(r, str) or not isinstance(k, str):
                continue
            folder, kinds = specs[int(r)]
            parts = rows[i] = k.split(SEP)
            for j, col in enumerate(n.split(SEP) if n else ()):
                kind = kinds.get(col)
                if kind is not None and j < len(parts) and parts[j] != NULL:
                    pending.setdefault((folder, kind), []).append((i, j))
        for (folder, kind), where in pending.items():
            folded = folder(kind, [rows[i][j] for i, j in where])
            for (i, j), f in zip(where, folded, strict=True):
                rows[i][j] = FOLDED + f
        for i, parts in rows.items():
            out.iat[i] = SEP.join(parts)
        return out
    return fold
