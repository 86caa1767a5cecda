"""Batch store maintenance: crash recovery, prune, drop, and the consumer-side errors.

Kept apart from :mod:`pipeline.store.files.store` so that the main class stays about the
protocol; every function here takes the store as its first argument.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from pipeline.fsutil import fsync_dir, remove_stray_temps
from sluice_common.errors import StoreError

from ..meta import BatchMeta, data_name, meta_name, validate_group

if TYPE_CHECKING:
    from .store import BatchStore

log = logging.getLogger("sluice.store")


def recover(store: BatchStore) -> list[str]:
    """Remove what a crashed writer left (run under the capture lock); return the paths.

    A data file without its meta file was never committed (the crash came between the
    two renames, or during a prune): nothing refers to it, and capture resumes before it.
    """
    removed = [str(p) for p in remove_stray_temps(store.batch_dir)]
    removed += [str(p) for p in remove_stray_temps(store.root, {"position.json", "store.json"})]
    committed = set(store.batch_ids())
    orphans = [i for i in store._data_ids() if i not in committed]
    for batch_id in orphans:
        path = store.batch_dir / data_name(batch_id)
        path.unlink(missing_ok=True)
        removed.append(str(path))
        log.warning("removed uncommitted batch file %s (no %s: the writer crashed before commit)",
                    path, meta_name(batch_id))
    if orphans:
        fsync_dir(store.batch_dir)
    return removed


def remove_group_temps(store: BatchStore, group: str) -> list[str]:
    """Remove stray temp files of ``group``'s cursor file (run under its apply lock)."""
    return [str(p) for p in remove_stray_temps(store.group_dir, {f"{group}.json"})]


def missing_batch_error(store: BatchStore, group: str, cursor: int, expected: int, found: int) -> StoreError:
    """The error for a gap in the batch sequence that ``group`` needs."""
    ids = store.batch_ids()
    first = ids[0] if ids else found
    if expected < first:
        return StoreError(
            f"group {group!r} needs batch {expected} (its cursor is {cursor}) but the oldest batch "
            f"in {store.batch_dir} is {first}: the batches before it were pruned or deleted",
            hint=f"skip the pruned batches: sluice store set-cursor --config <config> --group {group} --to "
            f"{first - 1}, then load what they held into the group's targets: sluice repair --config <config> "
            f"--group {group}",
        )
    return StoreError(
        f"batch {expected} is missing from {store.batch_dir} (batch {found} follows): the store is damaged",
        hint=f"restore {meta_name(expected)} and {data_name(expected)} from a backup, or re-capture "
        f"from batch {expected - 1}'s end position into a fresh store",
    )


def check_cursor_target(store: BatchStore, group: str, batch_id: int) -> dict[str, Any] | None:
    """Validate a set_cursor target; return the end position of that batch (None for 0)."""
    validate_group(group)
    if not isinstance(batch_id, int) or isinstance(batch_id, bool):
        raise StoreError(f"set_cursor: batch id must be an integer, got {batch_id!r}")
    ids = store.batch_ids()
    newest = ids[-1] if ids else 0
    if batch_id < 0 or batch_id > newest:
        raise StoreError(f"set_cursor({group!r}, {batch_id}): the cursor must be between 0 and the "
                         f"newest batch {newest}")
    if ids and batch_id < ids[0] - 1:
        raise StoreError(
            f"set_cursor({group!r}, {batch_id}): batches before {ids[0]} were pruned, so the group "
            f"cannot replay from batch {batch_id + 1}",
            hint=f"the earliest possible cursor is {ids[0] - 1} (replays every batch still stored)",
        )
    return store.meta(batch_id).end if batch_id in ids else None


def prune(store: BatchStore, retain: int) -> list[BatchMeta]:
    """Delete batches acked by every group, except the newest ``retain`` of them.

    Never deletes an unacked batch of any group, nor the newest batch of the store (it
    carries the next batchId and the resume position). Without groups nothing is acked,
    so nothing is deleted. Each batch's meta file goes first (uncommit), then its data.
    """
    if not isinstance(retain, int) or retain < 0:
        raise StoreError(f"prune: retain must be a non-negative integer, got {retain!r}")
    groups = store.groups()
    if not groups:
        return []
    floor = min(store.cursor(g) for g in groups)
    ids = store.batch_ids()
    acked = [i for i in ids if i <= floor]
    doomed = [i for i in acked[: max(0, len(acked) - retain)] if i != ids[-1]]
    deleted: list[BatchMeta] = []
    for batch_id in doomed:
        meta_path = store.batch_dir / meta_name(batch_id)
        try:
            meta = BatchMeta.load(meta_path)
        except FileNotFoundError:
            continue  # pruned concurrently
        meta_path.unlink(missing_ok=True)
        (store.batch_dir / meta.file).unlink(missing_ok=True)
        deleted.append(meta)
    if deleted:
        fsync_dir(store.batch_dir)
        log.info("pruned batches %d..%d (acked by every group: %s)",
                 deleted[0].batch_id, deleted[-1].batch_id, ", ".join(groups))
    return deleted


def drop_from(store: BatchStore, first: int) -> dict[str, Any]:
    """Remove batch ``first`` and every later one so that capture reads them again from the
    binlog (the recovery for a corrupt batch file); return the position capture resumes at.

    The caller holds the capture lock. Refused while a group has acked ``first`` or later: the
    re-captured batches may be cut at other positions, so such a group must first move its
    cursor back (``store set-cursor``; replays are idempotent). Newest first, each meta file
    before its data file (uncommit, then delete), then the resume position is recorded.
    """
    ids = store.batch_ids()
    if first not in ids:
        span = f"{ids[0]}..{ids[-1]}" if ids else "none"
        raise StoreError(f"{store.root}: no committed batch {first} (batches: {span})")
    for g in store.groups():
        if store.cursor(g) >= first:
            raise StoreError(f"group {g} has acked batch {store.cursor(g)} >= {first}; re-captured batches may "
                             "be cut at other positions", hint=f"first run: sluice store set-cursor --group {g} "
                             f"--to {first - 1} (replays are idempotent)")
    try:
        pos = store.meta(first - 1).end if first - 1 in ids else store.meta(first).start
    except (FileNotFoundError, StoreError) as e:
        raise StoreError(f"{store.root}: cannot tell where batch {first} starts ({e})",
                         hint=f"drop from batch {first - 1} instead") from None
    store.record_recapture(first)
    for batch_id in reversed([i for i in ids if i >= first]):
        (store.batch_dir / meta_name(batch_id)).unlink(missing_ok=True)
        (store.batch_dir / data_name(batch_id)).unlink(missing_ok=True)
    fsync_dir(store.batch_dir)
    store.set_start_position(pos, force=True)
    log.info("dropped batches %d..%d for re-capture from %s", first, ids[-1], pos)
    return pos
