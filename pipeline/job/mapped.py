"""What a group's mappings covered at its last sync, and what changed since (issue 37).

After a sync that acked its batches, the group's mappings are recorded in
``<store>/mapped/<group>.json``: per mapping file, the source tables it reads and the columns it
writes. The next sync compares the mappings it loads with that record and says (in its summary,
the run record and ``sluice status``) what the change means for rows:

* **a mapping removed** (its file gone, or no longer reading a table) while no other mapping of the
  group reads the table: the pending changes of that table are acked without being applied; the
  summary names the table, the rows skipped, and how to apply them after all (restore the file and
  replay from the cursor the sync started at: replays are idempotent);
* **a column added to a mapping** (``targetColumns`` grew, ``excludeColumns`` shrank, ``mapAll``
  turned on): rows applied before do not have it; the summary names the columns and the command
  that backfills them;
* **a new mapping file**: rows its table held before the pending batches are not in its target;
  the same backfill command loads them;
* **a group new to the store** (not among the groups the store started with -- ``_start.json``,
  written by capture's first start, ``bootstrap`` and ``store restart`` -- and no sync of it finished
  yet: added to a running deployment): its targets get the changes the store holds, not the rows its
  tables held before; the summary names the load command, until a sync of the group finishes;
* **a mapping pointed elsewhere** (:func:`target`: another adapter; ``targetTable``/``targetDb``,
  ``targetPk``, a target column fed by another source column; an ES index, type, ``_id``/``pk`` or SQL;
  an HBase table, family, row key, separator, mode, qualifier case or cell): rows applied before are
  where and as the old mapping wrote them; the summary names what changed and the same command
  rewrites them (a part the last record lacks, from an older sync, is not compared);
* **a mapping pointed at another source table** (the table renamed at the source, ``dbMapping.table``
  set to the new name): the old table's pending changes are not applied to its target; the summary
  names the rewrite first (the renamed table's rows hold them), then the replay;
* **changes applied without a mapped column** their table did not have when they were written
  (:func:`lacked_notes`: a column renamed or added at the source while they were pending): the
  summary names the table, the column and the rewrite.

Nothing is refused: each is something an operator may mean. It is said once, at the first sync
after the change (the record moves on when that sync acks).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.fsutil import now_iso, write_atomic
from pipeline.mapping import DbMapping, EsMapping, HbaseMapping, Mapping
from sluice_common.logs import get_logger

log = get_logger("sync")
FOLDER = "mapped"


def reads(m: Mapping) -> list[str]:
    """The source tables ``m`` reads, as ``db.table`` (``db.*``: every table of a mirrored database;
    ``*.t``: an ES SQL table without a schema)."""
    spec = m.spec
    if isinstance(spec, EsMapping):
        return sorted({f"{t.schema or '*'}.{t.name}" for t in spec.query.tables})
    if isinstance(spec, DbMapping) and spec.mirrorDb:
        return [f"{spec.database}.*"]
    return [f"{spec.database}.{spec.table}"]


def writes(m: Mapping) -> list[str]:
    """The columns (fields) ``m`` writes: target names; ``*`` for every source column (mapAll, a
    mirror), then ``-col`` for each one it leaves out."""
    spec = m.spec
    if isinstance(spec, DbMapping):
        if spec.mirrorDb:
            return ["*"]
        named = sorted({t for t, _ in spec.column_pairs})
        return ["*", *(f"-{c}" for c in sorted(spec.excludeColumns))] if spec.mapAll else named
    if isinstance(spec, HbaseMapping):  # every column is written, listed in columns or not
        return ["*", *(f"-{c}" for c in sorted(spec.excludeColumns))]
    if isinstance(spec, EsMapping):
        return sorted(spec.query.field_names)
    return []


def target(m: Mapping) -> dict[str, Any]:
    """Where and how ``m`` writes its rows (compared part by part at the next sync): the adapter, and
    per kind the table or index, the key and what fills each column."""
    spec, out = m.spec, {"adapter": m.outerAdapterKey}
    if isinstance(spec, DbMapping):
        if spec.mirrorDb:
            return {**out, "database": spec.target_schema}
        name = spec.target_name if spec.target_schema is None else f"{spec.target_schema}.{spec.target_name}"
        key = dict(spec.primary_key)
        return {**out, "table": name, "key": key, "columns": {t: s for t, s in spec.column_pairs if t not in key}}
    if isinstance(spec, EsMapping):
        return {**out, "index": spec.index, "type": spec.type, "_id": spec.id, "pk": spec.pk,
                "sql": " ".join(spec.sql.split()), "objFields": dict(sorted(spec.objFields.items())),
                "skips": sorted(spec.skips)}
    if isinstance(spec, HbaseMapping):
        return {**out, "table": spec.hbaseTable, "family": spec.family, "rowKey": spec.rowKey,
                "rowKeySeparator": spec.rowKeySeparator, "mode": spec.mode,
                "uppercaseQualifier": spec.uppercaseQualifier,
                "cells": {c: spec.columns[c] or "" for c in sorted(spec.columns)}}
    return out


def _path(root: Path, group: str) -> Path:
    return Path(root) / FOLDER / f"{group}.json"


def recorded(root: Path, group: str) -> dict[str, dict[str, Any]] | None:
    """``{file: {"reads": [...], "writes": [...], "target": {...} or None}}`` of the group's last sync
    (None: none yet; ``target`` None: recorded before targets were)."""
    try:
        body = json.loads(_path(root, group).read_bytes())
        files = body["mappings"]
        return {str(f): {"reads": list(v["reads"]), "writes": list(v["writes"]),
                         "target": dict(v["target"]) if v.get("target") is not None else None}
                for f, v in files.items()}
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        log.warning("the record of the group's mappings is unreadable; changes since the last sync are not "
                    "compared", file=str(_path(root, group)), error=str(e))
        return None


def remember(root: Path, group: str, mappings: tuple[Mapping, ...], schemas: dict[str, str] | None = None) -> None:
    """Record the group's mappings after a sync that acked (best effort: a store that cannot take
    the file only loses the comparison). ``schemas``: as :func:`compare` takes them; an RDB table
    named without its database is recorded with the one it was written in."""
    schemas = schemas or {}
    body = {"format": 1, "group": group, "at": now_iso(),
            "mappings": {m.file: {"reads": reads(m), "writes": writes(m),
                                  "target": _qualified(target(m), schemas.get(m.file))} for m in mappings}}
    try:
        _path(root, group).parent.mkdir(parents=True, exist_ok=True)
        write_atomic(_path(root, group), (json.dumps(body, indent=1, ensure_ascii=False) + "\n").encode())
    except Exception as e:  # noqa: BLE001 - the sync is done; only the comparison next time is lost
        log.warning("could not record the group's mappings", file=str(_path(root, group)), error=str(e))


@dataclass
class Changes:
    """What changed in a group's mappings since its last sync (see the module docstring)."""

    #: source table (``db.table``/``db.*``) -> the file that read it; no mapping reads it now
    dropped: dict[str, str] = field(default_factory=dict)
    #: file -> (the tables it read at the last sync and reads no more, what it reads now): a file
    #: pointed at another table (the source table renamed, as the pre-flight's refusal of the old
    #: name asks); the old table's pending changes are not applied to its target
    repointed: dict[str, tuple[list[str], list[str]]] = field(default_factory=dict)
    #: file -> the columns it writes now and did not before
    widened: dict[str, list[str]] = field(default_factory=dict)
    #: files new since the last sync
    added: list[str] = field(default_factory=list)
    #: file -> what of its target changed (``what: old -> new``)
    moved: dict[str, list[str]] = field(default_factory=dict)
    #: the group is new to a store that started with other groups: those groups (:func:`joined`)
    joined: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.dropped or self.widened or self.added or self.moved or self.joined or self.repointed)


def compare(root: Path, group: str, mappings: tuple[Mapping, ...],
            schemas: dict[str, str] | None = None) -> Changes:
    """The changes since the group's last sync (nothing when it has none recorded yet). ``schemas``:
    each mapping file's default target schema (a MySQL/MariaDB target's database), so that naming it
    in ``targetTable`` or leaving it out is the same table, not a move."""
    before = recorded(root, group)
    out = Changes()
    if before is None:
        return out
    now = {m.file: m for m in mappings}
    for file, was in sorted(before.items()):
        m = now.get(file)
        for table in was["reads"]:
            if (m is None or table not in reads(m)) and not any(_covers(x, table) for x in mappings):
                out.dropped[table] = file
        if m is not None:
            gone = [t for t in was["reads"] if t not in reads(m) and not _covers(m, t)]
            if gone:
                out.repointed[file] = (gone, reads(m))
            new = _new_columns(was["writes"], writes(m))
            if new:
                out.widened[file] = new
            schema = (schemas or {}).get(file)  # also for a record made before it was recorded
            moved = _moved(_qualified(was["target"], schema), _qualified(target(m), schema))
            if moved:
                out.moved[file] = moved
    out.added = [f for f in now if f not in before]
    return out


#: the groups of the config that started the store (or bootstrapped it, or started it again)
STARTED = "_start.json"  # a group name starts with a letter or digit: no group's record


def _start_path(root: Path) -> Path:
    return Path(root) / FOLDER / STARTED


def record_start(root: Path, groups: list[str], after_batch: int = 0, by: str = "capture") -> None:
    """Record the groups a store starts with, the batches before that start (the cursor it set) and
    what started it (``capture``'s first start, ``bootstrap``, ``restart``): a group not among them
    was added later (:func:`joined`). Best effort, as :func:`remember`."""
    body = {"format": 1, "at": now_iso(), "groups": sorted(groups), "afterBatch": after_batch, "by": by}
    try:
        _start_path(root).parent.mkdir(parents=True, exist_ok=True)
        write_atomic(_start_path(root), (json.dumps(body, indent=1) + "\n").encode())
    except Exception as e:  # noqa: BLE001 - only the note about groups added later is lost
        log.warning("could not record the groups the store starts with", file=str(_start_path(root)),
                    error=str(e))


def started(root: Path) -> dict[str, Any] | None:
    """``{"groups": [...], "afterBatch": N, "by": ...}`` of the store's start (None: not recorded)."""
    try:
        body = json.loads(_start_path(root).read_bytes())
        return {"groups": [str(g) for g in body["groups"]], "afterBatch": int(body.get("afterBatch") or 0),
                "by": str(body.get("by") or "capture")}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def joined(store: Any, group: str) -> list[str]:
    """The groups the store started with, when ``group`` is not one of them and never finished a sync
    (no record of its mappings): a group added to a running deployment, whose targets get only what
    the store holds. A store started before that record existed: the groups registered in it (those
    that synced before) stand in."""
    if recorded(store.root, group) is not None:
        return []
    start = started(store.root)
    groups = start["groups"] if start is not None else store.groups()
    return [] if group in groups else sorted(groups)


def _covers(m: Mapping, table: str) -> bool:
    db, _, name = table.partition(".")
    return any(_same(db, d) and (n == name or n == "*") for d, _, n in (t.partition(".") for t in reads(m)))


def _same(a: str, b: str) -> bool:
    return a == b or "*" in (a, b)


def _moved(was: dict[str, Any] | None, now: dict[str, Any]) -> list[str]:
    """What of a mapping's target changed: the parts both records have (none when the record has no
    target: an older sync's; a part recorded since is compared from the next sync on)."""
    if was is None or was == now:
        return []
    out = []
    for part in now.keys() & was.keys():
        old, new = was[part], now[part]
        if old == new:
            continue
        if part in ("columns", "cells") and isinstance(old, dict) and isinstance(new, dict):
            # per column both write (one added or removed: said as widened, or not written any more)
            for t in sorted(new.keys() & old.keys()):
                if new[t] == old[t]:
                    continue
                if part == "columns":
                    out.append(f"column {t} from {new[t]} (was {old[t]})")
                else:
                    out.append(f"cell of {t} {new[t] or 'default'} (was {old[t] or 'default'})")
        elif part == "key" and isinstance(old, dict) and isinstance(new, dict):
            out.append(f"key {_pairs(new)} (was {_pairs(old)})")
        else:
            out.append(f"{part} {_text(new)} (was {_text(old)})")
    return sorted(out)


def _qualified(part: dict[str, Any] | None, schema: str | None) -> dict[str, Any] | None:
    """A target record whose RDB table (the dbMapping shape: with ``columns``) is named without its
    database, with ``schema`` (the target's default database) spelled out: ``t`` and ``db.t`` on a
    target whose URL names ``db`` are one table."""
    if part is None or not schema or "columns" not in part:
        return part
    table = part.get("table")
    return {**part, "table": f"{schema}.{table}"} if isinstance(table, str) and "." not in table else part


def _pairs(d: dict) -> str:
    return ", ".join(f"{t}={s}" for t, s in d.items())


def _text(v: Any) -> str:
    return "none" if v is None else str(v)


def _new_columns(was: list[str], now: list[str]) -> list[str]:
    """Columns ``now`` writes that ``was`` did not (``*``: every column; ``-c``: all but c)."""
    if "*" in now:
        if "*" not in was:
            return ["every source column" + (f" except {', '.join(c[1:] for c in now if c.startswith('-'))}"
                                             if any(c.startswith("-") for c in now) else "")]
        return sorted(c[1:] for c in was if c.startswith("-") and c not in now)
    if "*" in was:
        return []
    return sorted(set(now) - set(was))


def backfill_command(cfg: Any, group: str, file: str) -> str:
    """The command that loads a mapping's rows into its target again (``sluice repair``, issue 39)."""
    return f"sluice repair --config {cfg.file} --group {group} --mapping {file}"


def notes(cfg: Any, group: str, changes: Changes, skipped: dict[str, int], cursor: int) -> list[str]:
    """What to tell the operator about ``changes`` (``skipped``: rows of dropped tables this sync
    acked without applying, by ``db.table``; ``cursor``: the group's cursor before the sync)."""
    out = []
    if changes.joined:
        out.append(f"group {group} is new to this store (it started with group {', '.join(changes.joined)}): "
                   "it applies the changes the store holds, from its first batch; rows its tables held before that "
                   "are not in its targets unless a load put them there (sluice bootstrap, etl); load them: "
                   f"sluice repair --config {cfg.file} --group {group}")
    replay = f"sluice store set-cursor --config {cfg.file} --group {group} --to {cursor}"
    for table, file in sorted(changes.dropped.items()):
        if file in changes.repointed:  # said below, with the rows skipped
            continue
        rows = sum(n for t, n in skipped.items() if _covers_name(table, t))
        out.append(f"skipped {rows} rows of {table}: no mapping of group {group} covers it any more ({file} read it "
                   f"at the last sync); to apply them after all, restore {file} and replay: {replay}")
    for file, (gone, now) in sorted(changes.repointed.items()):
        # a renamed table's older changes: its rows under the new name hold them
        rows = sum(n for old in gone for t, n in skipped.items() if _covers_name(old, t))
        was = ", ".join(gone)
        out.append(f"{file} reads {', '.join(now)} now ({was} at the last sync): the pending changes of {was} were "
                   f"not applied to its target{f' ({rows} skipped: no mapping covers it now)' if rows else ''}; if "
                   f"the table was renamed, its rows under the new name hold them: rewrite them: "
                   f"{backfill_command(cfg, group, file)}; if it was not, restore {file} and replay: {replay}")
    for file, cols in sorted(changes.widened.items()):
        out.append(f"{file} now writes {', '.join(cols)}: rows applied before this sync lack it; backfill them: "
                   f"{backfill_command(cfg, group, file)}")
    for file, what in sorted(changes.moved.items()):
        out.append(f"{file} now writes with {'; '.join(what)}: rows applied before this sync are where and as the "
                   f"old mapping wrote them; rewrite them: {backfill_command(cfg, group, file)}")
    for file in changes.added:
        out.append(f"{file} is new since the last sync: rows its table held before the pending batches are not in "
                   f"its target; load them: {backfill_command(cfg, group, file)}")
    return out


def lacked_notes(cfg: Any, group: str, lacked: dict[str, int]) -> list[str]:
    """What to tell the operator about changes applied without columns their table did not have when
    they were written (``ApplyStats.lacked``): the mapping names a column added or renamed at the
    source since, and older changes were still pending (a rename's older rows carry the old name)."""
    out = []
    for key in sorted(lacked):
        file, table, cols = json.loads(key)  # adapters.base.lacked_key
        src, tgt = ", ".join(s for s, _ in cols), ", ".join(t for _, t in cols)
        many = len(cols) > 1
        out.append(f"{file}: changes of {table} written before the source table had column{'s' if many else ''} "
                   f"{src} (which {file} maps to {tgt}) were applied without {'them' if many else 'it'}, so {tgt} "
                   f"in those rows {'are' if many else 'is'} not the source's (added or renamed since); rewrite "
                   f"them: {backfill_command(cfg, group, file)}")
    return out


def _covers_name(pattern: str, table: str) -> bool:
    db, _, name = pattern.partition(".")
    tdb, _, tname = table.partition(".")
    return _same(db, tdb) and (name == "*" or name == tname)


def count_skipped(dml: Any, dropped: dict[str, str], into: dict[str, int]) -> None:
    """Add the rows of the dropped tables in a round's DataFrame (``database``, ``table``, ``data``)
    to ``into`` by ``db.table``: one small Spark job, run only when a mapping was dropped."""
    from pyspark.sql import functions as F

    cond = None
    for pattern in dropped:
        db, _, name = pattern.partition(".")
        one = F.lit(True) if db == "*" else F.col("database") == db
        if name != "*":
            one = one & (F.col("table") == name)
        cond = one if cond is None else cond | one
    rows = (dml.where(~F.coalesce(F.col("isDdl"), F.lit(False)) & cond)
            .groupBy("database", "table").agg(F.sum(F.size("data")).alias("n")).collect())
    for r in rows:
        key = f"{r['database']}.{r['table']}"
        into[key] = into.get(key, 0) + int(r["n"] or 0)
