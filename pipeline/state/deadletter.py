"""The dead-letter store: rows a target rejected for their own data, kept for ``replay``.

Layout, inside the batch store (a path every Spark node already reaches)::

    <store>/deadletter/<group>/
      <first>-<last>-<hex>/              one sync round (its batch range + a random tag)
        s000-p00003-a0.jsonl             entries of segment 0, partition 3, task attempt 0
        COMMITTED.json                   written by the driver before it acks the round
      replays/<time>-<hex>.json          what one ``sluice deadletter replay`` resolved / still failed

Executors write their partition file whole (temp + fsync + rename + directory fsync) before
the partition reports success. A round without ``COMMITTED.json`` belongs to a sync that did
not ack: its batches are applied again, so the next sync (under the group's apply lock)
deletes it. Readers dedupe: the same change (a retried Spark task, a re-run after a crash
between commit and ack) counts once, by its content id ``cid``.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any

from pipeline.fsutil import fsync_dir, is_temp_name, now_iso, write_atomic

COMMITTED = "COMMITTED.json"
REPLAYS = "replays"


def content_id(mapping: str, table: str, key: str, kind: str, seq: tuple[int, int, int]) -> str:
    """The identity of one dead-lettered change: the same change always gets the same id."""
    text = json.dumps([mapping, table, key, kind, list(seq)], ensure_ascii=False)
    return hashlib.sha1(text.encode()).hexdigest()[:20]  # noqa: S324 - an identity, not a secret


def order_key(entry: dict) -> tuple:
    """Source order: (batchId, seq, row), a key-changing UPDATE's DELETE before its INSERT."""
    return (entry["batchId"], entry["seq"], entry["row"], 0 if entry["kind"] == "DELETE" else 1,
            entry.get("n", 0))


def write_part(round_dir: str | Path, name: str, entries: list[dict]) -> Path:
    """Durably write one partition's entries (executor side); the same name is replaced whole."""
    d = Path(round_dir)
    d.mkdir(parents=True, exist_ok=True)
    fsync_dir(d.parent)
    data = "".join(json.dumps(e, ensure_ascii=False, separators=(",", ":")) + "\n" for e in entries)
    final = d / name
    write_atomic(final, data.encode())
    return final


class DeadLetterStore:
    """One group's dead-letter folder (see the module docstring)."""

    def __init__(self, store_root: str | Path, group: str):
        self.dir = Path(store_root) / "deadletter" / group

    def new_round(self, first: int, last: int) -> Path:
        """The folder for one sync round (not created until an executor writes to it)."""
        return self.dir / f"{first:012d}-{last:012d}-{secrets.token_hex(4)}"

    def _rounds(self, committed: bool | None = None) -> list[Path]:
        if not self.dir.is_dir():
            return []
        out = []
        for d in sorted(self.dir.iterdir()):
            if d.is_dir() and d.name != REPLAYS and (committed is None or (d / COMMITTED).exists() == committed):
                out.append(d)
        return out

    @staticmethod
    def round_entries(round_dir: Path) -> list[dict]:
        """Every entry of a round (its partition files), deduped by ``cid``, in source order."""
        seen: dict[str, dict] = {}
        if round_dir.is_dir():
            for f in sorted(round_dir.glob("*.jsonl")):
                if is_temp_name(f.name):
                    continue
                for line in f.read_text(encoding="utf-8").splitlines():
                    if line.strip():
                        e = json.loads(line)
                        seen.setdefault(e["cid"], e)
        for e in seen.values():
            e["id"] = f"{round_dir.name}/{e['cid']}"
        return sorted(seen.values(), key=order_key)

    def commit_round(self, round_dir: Path) -> dict[str, dict[str, int]]:
        """Mark a round's entries as belonging to an acked sync (before the ack); its counts
        ``{mapping: {table: n}}``. A round nobody wrote to is nothing to commit."""
        entries = self.round_entries(round_dir)
        if not entries:
            return {}
        counts: dict[str, Counter] = {}
        for e in entries:
            counts.setdefault(e["mapping"], Counter())[e["table"]] += 1
        out = {m: dict(c) for m, c in counts.items()}
        write_atomic(round_dir / COMMITTED, json.dumps({"committedAt": now_iso(), "counts": out}).encode())
        return out

    def discard_uncommitted(self) -> list[Path]:
        """Delete rounds of syncs that did not ack (only under the group's apply lock)."""
        gone = self._rounds(committed=False)
        for d in gone:
            shutil.rmtree(d, ignore_errors=True)
        if gone:
            fsync_dir(self.dir)
        return gone

    def _replays(self) -> tuple[set[str], dict[str, str]]:
        resolved: set[str] = set()
        errors: dict[str, str] = {}
        d = self.dir / REPLAYS
        for f in sorted(d.glob("*.json")) if d.is_dir() else []:
            if is_temp_name(f.name):
                continue
            rec = json.loads(f.read_text(encoding="utf-8"))
            resolved.update(rec.get("resolved", ()))
            errors.update(rec.get("errors", {}))
        return resolved, errors

    def entries(self) -> list[dict]:
        """Live entries (committed, not resolved by a replay), one per change, in source order.

        Each has ``ids`` (every stored copy of the change) and ``error`` (the newest one)."""
        resolved, errors = self._replays()
        live: dict[str, dict] = {}
        for d in self._rounds(committed=True):
            for e in self.round_entries(d):
                if e["id"] in resolved:
                    continue
                first = live.setdefault(e["cid"], {**e, "ids": []})
                first["ids"].append(e["id"])
                if e["id"] in errors:
                    first["error"] = errors[e["id"]]
        return sorted(live.values(), key=order_key)

    def blocked(self) -> frozenset[tuple[str, str, str]]:
        """``(mapping, table, key)`` of every live entry: later changes to them wait behind it."""
        return frozenset((e["mapping"], e["table"], e["key"]) for e in self.entries())

    def record_replay(self, resolved: list[str], errors: dict[str, str]) -> Path | None:
        """Durably record what a replay applied (``resolved`` ids) and the new errors of the rest."""
        if not resolved and not errors:
            return None
        d = self.dir / REPLAYS
        d.mkdir(parents=True, exist_ok=True)
        name = f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{time.time_ns() % 10**9:09d}.json"
        path = d / name
        write_atomic(path, json.dumps({"at": now_iso(), "resolved": sorted(resolved), "errors": errors},
                                      ensure_ascii=False).encode(), overwrite=False)
        return path

    def compact(self) -> int:
        """Delete committed rounds whose every entry was resolved, then replay records that
        name nothing left. Returns the number of rounds deleted."""
        resolved, _ = self._replays()
        gone = 0
        left: set[str] = set()
        for d in self._rounds(committed=True):
            ids = {e["id"] for e in self.round_entries(d)}
            if ids <= resolved:
                shutil.rmtree(d, ignore_errors=True)
                gone += 1
            else:
                left |= ids
        if gone:
            fsync_dir(self.dir)
        rd = self.dir / REPLAYS
        for f in sorted(rd.glob("*.json")) if rd.is_dir() else []:
            rec = json.loads(f.read_text(encoding="utf-8"))
            if not (set(rec.get("resolved", ())) | set(rec.get("errors", {}))) & left:
                f.unlink()
        return gone

    def summary(self) -> dict[str, Any]:
        """Live entry counts per mapping and table, and rounds left by syncs that did not ack."""
        counts: dict[str, Counter] = {}
        for e in self.entries():
            counts.setdefault(e["mapping"], Counter())[e["table"]] += 1
        return {"live": {m: dict(c) for m, c in counts.items()},
                "uncommitted_rounds": [d.name for d in self._rounds(committed=False)]}
