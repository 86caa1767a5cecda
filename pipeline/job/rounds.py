"""How much one round of a sync takes: bounded, so work is acked at a steady pace, and smaller
after a round that did not finish.

A sync applies its pending batches in *rounds*; each round is acked on its own when every
partition committed (:func:`pipeline.job.driver.run_sync`). A round that is killed (kill -9, a
SIGTERM, a target restart, a lost executor) acks nothing, so a round must be short enough to
finish between faults, or a deployment that faults every minute never moves. The size of the
next round, in *units* (rows, plus :data:`DDL_UNITS` per DDL record: a barrier costs a target
round trip and a new Spark job), is the smallest of

* ``spark.roundRows`` (at most this many rows per round);
* ``spark.roundSeconds`` times the apply rate the group's recent rounds reached (units per
  second, an average that leans to the newest round), so a round takes about that long; half of
  that for the first round of a process (its JVM is cold: no compiled code yet); while no rate is
  known (a group's first warm round, which measures it) ``spark.roundRows`` alone bounds it (a first
  round of one batch made every new group's backlog a string of small rounds, each paying a Spark
  job). A process's first round does not teach the rate: it measures the JVM's start (a follower's
  first round of 19k rows took 47 s, and the rounds after it stayed at one batch while the backlog
  grew, issue 38). Nor does a round that took everything pending and stayed under half its
  budget: it measures the per-round overhead, not the rate (a warm follower's rounds of a few rows
  each, 0.5 s apiece, taught 4 rows/s, and when the load came its rounds stayed at one batch
  while the backlog grew: bench/follow_latency.py, 2026-11-28);
* after a round that did not finish, half of what it tried, down to one batch; each round that
  then finishes doubles it again.

A round always takes at least one batch (a batch is applied whole or not at all). What the
group's rounds did is kept in ``<store>/rounds/<group>.json`` (the rate, the limit, and the round
in progress), written by the holder of the group's apply lock only: a round still marked in
progress when the next sync starts was cut short -- its process was killed -- so the next sync
starts at half of it, also across restarts of the process.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.config import SparkConfig
from pipeline.state.locks import LockInfo, held_by
from pipeline.store import BatchMeta
from sluice_common.errors import LockHeldError
from sluice_common.logs import get_logger

log = get_logger("sync")

#: what one DDL record weighs against rows in a round's size
DDL_UNITS = 200
#: how much the newest round counts in the rate's average
RATE_WEIGHT = 0.5
#: groups that finished a round in this process (their JVM is warm)
_WARM: set[str] = set()


def units(batches: list[BatchMeta]) -> int:
    """A round's size: its rows plus DDL_UNITS per DDL record."""
    return sum(b.rows + DDL_UNITS * len(b.ddl or ()) for b in batches)


@dataclass
class RoundSizer:
    """Chooses each round's batches for one group (see the module docstring)."""

    path: Path
    group: str
    max_rows: int
    target_s: float
    rate: float | None = None          # units per second of the recent rounds
    limit: int | None = None           # units allowed after rounds that did not finish
    open_units: int | None = None      # the round in progress (written before it starts)
    taken: tuple[int, bool] | None = None  # the last take: its budget, and whether the budget cut it

    @classmethod
    def load(cls, root: str | os.PathLike[str], group: str, spark: SparkConfig) -> RoundSizer:
        """The group's sizer, with what earlier syncs recorded; a round recorded in progress
        was cut short, and halves the limit."""
        s = cls(Path(root) / "rounds" / f"{group}.json", group, spark.roundRows, spark.roundSeconds)
        if not s.bounded:
            return s
        try:
            raw = json.loads(s.path.read_text())
        except (OSError, ValueError):
            raw = {}
        if isinstance(raw, dict):
            s.rate = _positive(raw.get("rate"))
            s.limit = _positive(raw.get("limit"), int)
            cut = _positive(raw.get("open"), int)
            if cut is not None:
                s.limit = max(1, min(s.limit or cut, cut) // 2)
                log.warning("the last round of this group did not finish (its process ended); this one is "
                            "smaller", group=group, last_units=cut, limit=s.limit)
                s._write()
        return s

    @property
    def bounded(self) -> bool:
        """``spark.roundRows: 0``: rounds are not bounded (each takes ``--max-batches`` batches, a
        round cut short does not shrink the next), and nothing is recorded."""
        return self.max_rows > 0

    def budget(self) -> int:
        """Units the next round may take (at least one batch is taken whatever this says)."""
        b = self.max_rows
        if self.rate:  # else the first round, bounded by rows alone, measures the rate
            b = min(b, int(self.rate * self.target_s * (1.0 if self.group in _WARM else 0.5)))
        if self.limit:
            b = min(b, self.limit)
        return max(1, b)

    def take(self, batches: list[BatchMeta]) -> int:
        """How many of ``batches`` (in order) the next round applies: the longest prefix within
        the budget, at least one."""
        if not self.bounded:
            return len(batches)
        budget, total = self.budget(), 0
        for i, b in enumerate(batches):
            total += units([b])
            if total > budget and i > 0:
                self.taken = (budget, True)
                return i
        self.taken = (budget, False)
        return len(batches)

    def begin(self, size: int) -> None:
        """A round of ``size`` units starts (recorded: if the process dies now, the next is smaller)."""
        self.open_units = size
        self._write()

    def done(self, size: int, seconds: float) -> None:
        """The round finished and was acked in ``seconds``: the rate learns from it (unless it was
        cold, or small and not cut by its budget), a limit grows."""
        taken, self.taken = self.taken, None
        telling = taken is None or taken[1] or 2 * size >= taken[0]  # else: the overhead of a round
        if size > 0 and seconds > 0 and self.group in _WARM and telling:  # a cold round: the JVM's start
            r = size / seconds
            self.rate = r if self.rate is None else RATE_WEIGHT * r + (1 - RATE_WEIGHT) * self.rate
        if self.limit is not None:  # twice what it could do (a limit below one batch took one batch)
            grown = 2 * max(self.limit, size)
            self.limit = None if grown >= self.max_rows else grown
        self.open_units = None
        _WARM.add(self.group)
        self._write()

    def failed(self, size: int) -> None:
        """The round did not finish (an error, an interrupt): the next one tries half of it."""
        self.limit = max(1, min(self.limit or size, size) // 2)
        self.open_units = None
        self._write()

    def _write(self) -> None:
        if not self.bounded:
            return
        body: dict[str, Any] = {"rate": self.rate, "limit": self.limit, "open": self.open_units,
                                "pid": os.getpid(), "at": time.time()}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(body) + "\n")
            os.replace(tmp, self.path)  # no fsync: it must outlive the process, not the machine
        except OSError as e:  # sizing is advice: a store that cannot take it still syncs
            log.warning("the round size could not be recorded", path=str(self.path), error=str(e))


def _positive(v: Any, kind: type = float) -> Any:
    try:
        x = kind(v)
    except (TypeError, ValueError):
        return None
    return x if x > 0 else None


# ---- a follower's claim on its groups ----------------------------------------------------------

def follow_lock_path(store: Any, group: str) -> Path:
    """The lock a ``sluice run --follow`` holds for each of its groups while it runs."""
    return Path(getattr(store, "lock_dir", Path(store.root) / "locks")) / f"follow.{group}.lock"


def follower_of(store: Any, group: str) -> LockInfo | None:
    """The follower that applies ``group`` now, if one runs: other jobs (a cron ``sluice run``,
    ``sluice sync``) leave the group to it rather than hold its apply lock for a backlog."""
    return held_by(follow_lock_path(store, group))


def follower_error(group: str, holder: LockInfo) -> LockHeldError:
    """The refusal of a job that found a follower applying ``group``."""
    return LockHeldError(f"a follower applies group {group}: {holder.describe()}",
                         hint="nothing to do while it runs (it applies every round); stop the follower to "
                         "apply the group with sluice run or sync")
