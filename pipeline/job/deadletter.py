"""Executor side of the dead-letter store: which rows go there, and in which order.

The rule that keeps per-key order (docs/deadletter.md): a *key* is ``(mapping, source table,
target key)``. Once a change of a key is dead-lettered, every later change of that key goes to
the dead-letter store too, without being tried - in the same partition, in later segments and
rounds of the run, and in later runs (the driver passes the keys of the live entries as
``blocked``) - until ``sluice deadletter replay`` applies the earlier ones. A table without a
key has the empty key: one dead-lettered row blocks the rest of that table for the mapping.
"""

from __future__ import annotations

from pathlib import Path

from adapters.base import Change
from pipeline.fsutil import now_iso
from pipeline.state.deadletter import content_id, write_part

BLOCKED = "not tried: an earlier change of this key is in the dead-letter store"


def key_columns(mapping, change: Change) -> tuple[str, ...]:
    """The source columns whose values form the change's target key (as the job partitions)."""
    from pipeline.job.routing import routes_for

    table = change.table.casefold()
    for r in routes_for(0, mapping):
        if r.table is None or r.table.casefold() == table:
            return tuple(r.key_columns) if r.key_columns is not None else tuple(change.pk_names)
    return tuple(change.pk_names)


def key_text(columns: tuple[str, ...], change: Change) -> str:
    """``id='7'`` / ``a='1', b='x'``; empty for a table without a key."""
    return ", ".join(f"{c}={change.data.get(c)!r}" for c in columns)


def entry(mapping, change: Change, key: str, error: str, *, blocked: bool = False) -> dict:
    """One dead-letter entry: the change itself (replayable), where it came from, and why."""
    table = f"{change.database}.{change.table}"
    return {"cid": content_id(mapping.file, table, key, change.kind, change.seq),
            "mapping": mapping.file, "table": table, "key": key, "kind": change.kind,
            "batchId": change.seq[0], "seq": change.seq[1], "row": change.seq[2],
            "error": error, "blocked": blocked, "at": now_iso(),
            "change": {"kind": change.kind, "database": change.database, "table": change.table,
                       "data": change.data, "old": change.old, "pkNames": list(change.pk_names),
                       "mysqlType": change.mysql_type, **({} if change.fk_checks else {"fkChecks": False})}}


def change_of(e: dict) -> Change:
    """The Change an entry holds (for replay)."""
    c = e["change"]
    return Change(c["kind"], c["database"], c["table"], c.get("data") or {}, c.get("old"),
                  tuple(c.get("pkNames") or ()), c.get("mysqlType") or {}, (e["batchId"], e["seq"], e["row"]),
                  fk_checks=c.get("fkChecks", True))


class DeadLetters:
    """The dead-lettered rows of one partition, kept until :meth:`publish` writes them."""

    def __init__(self, blocked: frozenset = frozenset()):
        self.blocked = set(blocked)  # (mapping file, table, key)
        self.entries: list[dict] = []
        self._cols: dict[tuple[int, str, tuple], tuple[str, ...]] = {}

    def key(self, mapping, change: Change) -> tuple[str, str, str]:
        ck = (id(mapping), change.table, change.pk_names)
        cols = self._cols.get(ck)
        if cols is None:
            cols = self._cols[ck] = key_columns(mapping, change)
        return mapping.file, f"{change.database}.{change.table}", key_text(cols, change)

    def filter(self, mapping, chunk: list[Change]) -> list[Change]:
        """The changes of ``chunk`` that may be applied; the others go to the dead-letter store."""
        if not self.blocked:
            return chunk
        out = []
        for c in chunk:
            k = self.key(mapping, c)
            if k in self.blocked:
                self.entries.append(entry(mapping, c, k[2], BLOCKED, blocked=True))
            else:
                out.append(c)
        return out

    def add(self, mapping, change: Change, error: BaseException) -> str:
        """Dead-letter one change the target rejected; block its key. Returns the table."""
        k = self.key(mapping, change)
        self.blocked.add(k)
        self.entries.append(entry(mapping, change, k[2], str(error)))
        return k[1]

    def publish(self, round_dir: str | None, name: str) -> Path | None:
        """Write the entries durably (before the partition reports success)."""
        if not self.entries:
            return None
        if not round_dir:
            raise RuntimeError("dead-lettered rows but the job has no dead-letter folder")
        for n, e in enumerate(self.entries):
            e["n"] = n
        return write_part(round_dir, name, self.entries)
