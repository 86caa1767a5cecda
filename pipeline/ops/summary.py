"""One-line summaries for people: a group's sync, the capture lag, a group's last run.

``sluice sync``, ``sluice run`` and ``sluice status`` print the same numbers the same way, and
say what a missing number means instead of printing ``None``.
"""

from __future__ import annotations

from typing import Any

COUNTED = ("inserted", "updated", "deleted", "skipped", "missed", "folded")


def _sum(s: dict[str, Any], kind: str) -> int:
    return sum((s.get(kind) or {}).values())


def sync_lines(group: str, s: dict[str, Any]) -> list[str]:
    """The summary of one group's sync (a SyncSummary dict, or a run record's ``sync.<group>``)."""
    cursor = s.get("cursor")
    if s.get("ok") is False:
        if s.get("note"):
            return [f"sync {group}: not run: {s['note']}" + (f" (cursor {cursor})" if cursor is not None else "")]
        acked = s.get("batches") or 0
        done = f"after acking {acked} batches" if acked else "nothing acked"
        return [f"sync {group}: FAILED, {done} (cursor {cursor}); the next run applies the rest again"]
    if s.get("note"):
        return [f"sync {group}: {s['note']} (cursor {cursor})"]
    t = {k: _sum(s, k) for k in COUNTED}
    line = (f"sync {group}: {s.get('batches', 0)} batches, {s.get('rows', 0)} rows, {s.get('ddl', 0)} DDL in "
            f"{s.get('seconds', 0)} s ({s.get('rows_per_s', 0)} rows/s), cursor {cursor}; inserted {t['inserted']}, "
            f"updated {t['updated']}, deleted {t['deleted']}, skipped as applied already {t['skipped']}")
    if t["missed"]:
        line += f", matched no target row {t['missed']}"
    if t["folded"]:
        line += f", folded into a later change of their row {t['folded']}"
    lines = [line]
    for table, n in sorted((s.get("missed") or {}).items()):
        lines.append(f"  {n} UPDATE/DELETE of {table} matched no target row: the target lacks rows the source "
                     "has, or source rows share a key (compare with `sluice verify`)")
    for mapping, tables in sorted((s.get("deadLettered") or {}).items()):
        for table, n in sorted(tables.items()):
            lines.append(f"  dead-lettered {n} rows of {table} ({mapping}); see `sluice deadletter list`")
    lines += [f"  note: {n}" for n in s.get("notes") or ()]
    return lines


def lag_text(lag: dict[str, Any]) -> str:
    """``capture 0.0 s behind the source (0 bytes)``, or why it is not known."""
    if lag.get("lag_s") is None and lag.get("behind_bytes") is None:
        why = lag.get("error") or "not measured"
        return f"capture lag unknown ({why})"
    secs = "?" if lag.get("lag_s") is None else lag["lag_s"]
    unread = "?" if lag.get("behind_bytes") is None else lag["behind_bytes"]
    return f"capture {secs} s behind the source ({unread} bytes)"


def group_run_text(lr: dict[str, Any]) -> str:
    """A group's last run for ``sluice status``: counts when it ran, else that it failed."""
    if lr.get("ok"):
        return (f"{lr['finished']}: ok, {lr.get('batches') or 0} batches, {lr.get('rows') or 0} rows, "
                f"{lr.get('rows_per_s') or 0} rows/s")
    acked = lr.get("batches") or 0
    what = "INTERRUPTED" if lr.get("interrupted") else "FAILED"
    return f"{lr['finished']}: {what}, " + (f"{acked} batches acked before it stopped" if acked else "nothing acked")


def freshness_text(gs: dict[str, Any]) -> str:
    """A group's end-to-end freshness: the source commit time of its newest applied row."""
    if not gs.get("applied_event_at"):
        return "no row applied yet"
    state = "caught up" if gs.get("caught_up") else "rows pending"
    return (f"newest applied row committed at the source {gs['applied_event_at']} "
            f"({gs.get('freshness_s')} s ago; {state})")
