"""``sluice store restart --from FILE:POS|now``: start a store again at another position.

A store started at the wrong place (a ``--from`` past the changes the targets need, ``--from now``
where they needed earlier ones) had no way back but deleting it by hand: ``capture --from`` refuses a
store that has a position, and ``store recapture`` reads again from the store's own start.

Only while nothing of the store reached a target: no group acked a batch of it since its start (or
its last restart or bootstrap), and no target holds a record of it (:func:`pipeline.job.positions.read_all`:
a round applied but not acked, or a ``sluice bootstrap`` that loaded the targets at its snapshot,
whose changes a later start would skip); a target that cannot be asked, or a group of another
deployment sharing the store, refuses it too. Then it is what ``sluice bootstrap --force`` does
without the load: the new start is checked as ``capture --from`` checks a new store's
(:func:`pipeline.capture.fresh.new_start`), recorded with the store's next Dml id, every group's
cursor moves past the stored batches, and those are pruned but the newest (batch numbers go on, so
no record of the old batches' positions can cover the new ones). A group added later starts at
cursor 0: it applies what is left of the old history before the new one (replays converge; its
first syncs name the load it needs, :func:`pipeline.job.mapped.joined`), or is refused at the gap
prune left. Elasticsearch and HBase targets record nothing: a store that ``bootstrap`` started is
refused whatever its targets.
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any

from pipeline.capture import fresh
from pipeline.capture.server_check import inspect_server
from pipeline.config import Config
from pipeline.job import mapped
from pipeline.source.connect import connect
from pipeline.store import open_store
from sluice_common.errors import UsageError
from sluice_common.logs import get_logger, register_secret

log = get_logger("capture")


def restart(cfg: Config, start_from: str) -> dict[str, Any]:
    """Record ``start_from`` as the store's start and move every group past its batches (see the
    module docstring); returns the old and new start and the groups' cursors."""
    register_secret(cfg.source.password.reveal())
    store = open_store(cfg, create=False)
    store.check_writable()
    reload = f"to load the targets afresh from a new snapshot: sluice bootstrap --config {cfg.file} --force"
    with store.capture_lock(), ExitStack() as locks:
        mine = [g.groupId for g in cfg.groups]
        foreign = sorted(set(store.readers()) - set(mine))
        if foreign:
            raise UsageError(f"{store.root}: the store is shared with group(s) {', '.join(foreign)}, which "
                             f"{cfg.file} does not have: their targets cannot be checked from here",
                             hint=_shared_hint(cfg, foreign))
        groups = sorted(mine)
        for g in groups:
            locks.enter_context(store.apply_lock(g))  # no sync applies while the cursors move
        start_record = mapped.started(store.root)
        floor = start_record["afterBatch"] if start_record is not None else 0  # the cursor a restart set
        acked = {g: store.cursor(g) for g in groups if store.cursor(g) > floor}
        if acked:
            names = ", ".join(f"{g} (cursor {c})" for g, c in sorted(acked.items()))
            raise UsageError(f"{store.root}: group(s) {names} applied batches of this store: starting it "
                             "elsewhere would apply other history over what their targets hold", hint=reload)
        _refuse_if_applied(cfg, store.store_id, reload)
        if start_record is not None and start_record["by"] == "bootstrap":  # ES and HBase record nothing
            raise UsageError(f"{store.root}: sluice bootstrap loaded the targets at the store's start: starting it "
                             "elsewhere would skip or repeat the changes since that snapshot", hint=reload)
        old = store.last_position()
        conn = connect(cfg.source)
        try:
            info = inspect_server(cfg.source, conn)
            from pipeline.job.covered import check_capture_covers

            check_capture_covers(cfg, conn)
            start, _ = fresh.new_start(cfg, conn, info.flavor, store, start_from)
        finally:
            conn.close()
        newest = store.newest_batch_id()
        next_id = int((old or {}).get("nextId", 1) or 1)
        start = start.with_(next_id=next_id)
        store.set_start_position(start.to_dict(), force=True)
        mapped.record_start(store.root, groups, newest, by="restart")
        cursors = {g: (store.cursor(g), newest) for g in groups}
        for g in groups:
            store.set_cursor(g, newest)
        store.prune(retain=0)  # the old history goes but its newest batch, which carries the numbering on
    log.warning("capture start position set again; every group's cursor moved past the stored batches",
                position=start.text(), batches=newest)
    return {"old": old, "start": start.to_dict(), "cursors": cursors}


def _shared_hint(cfg: Config, foreign: list[str]) -> str:
    """How to restart a store other groups read: with them in the config; on Kafka a group no
    deployment uses any more goes with its consumer group (its cursor)."""
    if cfg.store.kind != "kafka" or cfg.store.kafka is None:
        return ("run it with a config that has every group of the store, or give this deployment a "
                "store.path of its own")
    return ("run it with a config that has every group of the store; a group no deployment uses any more: "
            f"kafka-consumer-groups --bootstrap-server {cfg.store.kafka.bootstrap_servers} --delete --group "
            f"{foreign[0]} (its cursor), then run this again")


def _refuse_if_applied(cfg: Config, store_id: str, reload: str) -> None:
    """Refused when a target holds a record of this store, or cannot be asked."""
    from pipeline.job.positions import read_all

    found, unknown = read_all(cfg)
    if unknown:
        u = unknown[0]
        raise UsageError(f"whether group {u.group}'s targets hold changes of this store cannot be told: {u.why}",
                         hint="fix that and run again")
    mine = [a for a in found if a.store_id == store_id]
    if mine:
        a = mine[0]
        raise UsageError(f"group {a.group}'s target {a.target} holds changes of this store up to {a.position.text()} "
                         f"(recorded {a.at}): starting the store elsewhere would skip or repeat history under them",
                         hint=reload)
