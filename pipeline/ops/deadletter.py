"""``sluice deadletter replay``: apply dead-lettered rows again, in order, through the same writers.

Plain Python on one machine (no Spark): each entry is one transaction. An entry that applies is
recorded as resolved; one that fails with a row error again keeps its new error, and every later
entry of the same key is kept without being tried (per-key order, docs/deadletter.md). Any other
error (target down after retries, auth, a missing table) stops the replay; what was done so far
is recorded first. Runs under the group's apply lock, so no sync of the group runs meanwhile.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.config import Config
from pipeline.job.deadletter import change_of
from pipeline.job.group import load_group
from pipeline.state.deadletter import DeadLetterStore
from pipeline.store import GroupLog, open_store
from pipeline.writers import Options, Writers
from sluice_common.errors import is_row_error
from sluice_common.logs import get_logger

log = get_logger("deadletter")
WAITING = "not tried: an earlier change of this key still fails"


@dataclass
class ReplayResult:
    """What one replay did: entries applied, entries still failing (with their new error)."""

    applied: int = 0
    failed: list[dict] = field(default_factory=list)
    left: int = 0  # live entries after the replay (all mappings of the group)


def dead_letter_store(cfg: Config, group: str) -> tuple[GroupLog, DeadLetterStore]:
    cfg.group(group)  # an unknown group is a config error
    store = open_store(cfg, create=False)
    return store, DeadLetterStore(store.root, group)


def same_mapping(stored: str, wanted: str, base: Path) -> bool:
    """Whether the entry's mapping file is the one named on the command line."""
    if stored == wanted:
        return True
    return os.path.realpath(base / stored) == os.path.realpath(base / wanted)


def list_entries(cfg: Config, group: str, mapping: str | None = None) -> list[dict]:
    """The group's live dead-letter entries (one per change, source order)."""
    _, dead = dead_letter_store(cfg, group)
    entries = dead.entries()
    if mapping:
        base = _base(cfg)
        entries = [e for e in entries if same_mapping(e["mapping"], mapping, base)]
    return entries


def replay(cfg: Config, group: str, mapping: str | None = None, *, retries: int = 5) -> ReplayResult:
    """Apply the live entries again (optionally of one mapping file); see the module docstring."""
    store, dead = dead_letter_store(cfg, group)
    store.check_writable()
    plan = load_group(cfg, group)
    midx_of = {m.file: i for i, m in enumerate(plan.mappings)}
    base = _base(cfg)
    result = ReplayResult()
    with store.apply_lock(group):
        dead.discard_uncommitted()
        entries = [e for e in dead.entries() if not mapping or same_mapping(e["mapping"], mapping, base)]
        # one writer per target, one transaction per change, transient errors retried (waits doubling
        # from 0.5 s up to 20 s); no lineage: a replayed entry is not a round of the group's binlog
        writers = Writers(plan, Options(retries=retries, backoff_max=20.0))
        resolved: list[str] = []
        errors: dict[str, str] = {}
        waiting: set[tuple[str, str, str]] = set()
        try:
            for e in entries:
                k = (e["mapping"], e["table"], e["key"])
                midx = midx_of.get(e["mapping"])
                if midx is None:
                    msg = f"mapping {e['mapping']} is not in group {group}"
                elif k in waiting:
                    msg = WAITING
                else:
                    try:
                        change = change_of(e)
                        writers.transaction(midx, lambda w, m=plan.mappings[midx], c=change: w.apply(m, [c]))
                        resolved += e["ids"]
                        result.applied += 1
                        continue
                    except Exception as err:  # noqa: BLE001 - row errors are kept, the rest stops
                        if not is_row_error(err):
                            raise
                        msg = str(err)
                waiting.add(k)
                errors.update({i: msg for i in e["ids"]})
                result.failed.append({**e, "error": msg})
        finally:
            writers.abort()  # roll back and close every writer, quietly
            dead.record_replay(resolved, errors)
            dead.compact()
        result.left = len(dead.entries())
    log.info("replayed", group=group, applied=result.applied, failed=len(result.failed), left=result.left)
    return result


def _base(cfg: Config) -> Path:
    return Path(cfg.file).resolve().parent if cfg.file not in ("", "<config>") else Path.cwd()
