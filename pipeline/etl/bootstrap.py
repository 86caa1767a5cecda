"""``sluice bootstrap``: a full load of every group with a consistent hand-off to the binlog.

1. Take the store's capture lock (no capture runs meanwhile) and every group's apply lock (no
   sync runs meanwhile); refuse a store that already has a position unless ``force``.
2. Pre-flight every group (mappings against the source, targets reachable).
3. Take the snapshot position P (:mod:`pipeline.etl.snapshot`).
4. Load every mapping of every group in one Spark job (:func:`pipeline.etl.driver.run_loads`, UPSERT).
5. Only when all of it loaded: set the capture start to P (``set_start_position(force=...)``)
   and move every group's cursor to the newest stored batch, so batches captured before the
   load (superseded by it) are not applied on top of it.

Capture then streams from P; changes made during the load are replayed and absorbed by
idempotent apply (the argument is in docs/etl.md). A failed load changes nothing in the store but a
marker (:mod:`pipeline.state.unfinished`): the targets may hold the snapshot's rows, so capture refuses
to start at the source's current position until a bootstrap succeeds.
"""

from __future__ import annotations

import contextlib
import json
import time

from pipeline.config import Config
from pipeline.etl.driver import EtlFailed, EtlSummary, run_loads
from pipeline.etl.snapshot import snapshot_position
from pipeline.job import mapped, positions
from pipeline.job.group import load_group
from pipeline.state import unfinished
from pipeline.store import open_store
from sluice_common.errors import StoreError
from sluice_common.logs import get_logger, register_secret

log = get_logger("bootstrap")


def run_bootstrap(cfg: Config, spark, *, force: bool = False, partitions: int | None = None,
                  params: tuple[str, ...] = (), progress_every: float = 5.0) -> dict:
    """Run a bootstrap (see the module docstring); returns a JSON-able summary. ``spark``: a
    SparkSession, or a function that makes one (called only once the checks passed)."""
    register_secret(cfg.source.password.reveal())
    if not cfg.groups:
        raise StoreError(f"{cfg.file}: no groups to bootstrap", hint="add groups with outerAdapters and mappings")
    t0 = time.monotonic()
    store = open_store(cfg)
    with store.capture_lock(), contextlib.ExitStack() as locks:
        existing = store.last_position()
        if existing is not None and not force:
            raise StoreError(f"{store.root}: the store already has a capture position "
                             f"{json.dumps(existing, sort_keys=True)}; bootstrapping again would move it",
                             hint="pass --force to load again and restart capture from a new snapshot "
                                  "(stored batches stay; every group's cursor moves past them)")
        for g in cfg.groups:
            locks.enter_context(store.apply_lock(g.groupId))
        plans = [load_group(cfg, g.groupId) for g in cfg.groups]
        for plan in plans:
            plan.check()
        session = spark() if callable(spark) else spark
        pos, how = snapshot_position(cfg.source)
        log.info("bootstrap snapshot", position=pos.text(), how=how)
        unfinished.mark(store.root, pos)  # until it succeeds: capture refuses to start at "now"
        again = f"sluice bootstrap --config {cfg.file}" + (" --force" if existing is not None else "")
        try:
            summaries: list[EtlSummary] = run_loads(cfg, [(plan, None) for plan in plans], session,
                                                    partitions=partitions, params=params,
                                                    progress_every=progress_every, check=False, snapshot=pos)
        except EtlFailed as e:  # "run the load again" must mean this command: a `sluice etl` sets no position
            kept = ("the store keeps its previous position: a sync resumes from it over the targets this load "
                    "changed" if existing is not None else "the store records no capture position until a "
                    "bootstrap succeeds")
            raise EtlFailed(e.message, hint=f"fix the cause and run it again: {again} ({kept})") from None
        next_id = int((existing or {}).get("nextId", 1) or 1)
        newest = store.newest_batch_id()  # a Kafka store's newest batch record may be gone (retention)
        if newest in store.batch_ids():
            next_id = max(next_id, int(store.meta(newest).end.get("nextId", 1) or 1))
        start = pos.with_(next_id=next_id).to_dict()
        store.set_start_position(start, force=force)
        cursors = {}
        for plan in plans:
            old = store.cursor(plan.group_id)
            store.set_cursor(plan.group_id, newest)
            cursors[plan.group_id] = {"from": old, "to": newest}
        # the targets hold the snapshot now: a store lost before the first sync resumes here
        positions.record(cfg, plans, start, store.store_id, newest)
        mapped.record_start(store.root, [g.groupId for g in cfg.groups], newest, by="bootstrap")
        unfinished.clear(store.root)
    out = {"position": start, "how": how, "forced": bool(force and existing is not None), "cursors": cursors,
           "seconds": round(time.monotonic() - t0, 3), "groups": [s.as_dict() for s in summaries]}
    log.info("bootstrap done", position=pos.text(), rows=sum(s.rows for s in summaries), seconds=out["seconds"])
    return out
