"""``sluice store restart --from FILE:POS|now``: start a store again at another position.

A store started at the wrong place (a ``--from`` past the changes the targets need, ``--from now``
where they needed earlier ones) had no way back but deleting it by hand: ``capture --from`` refuses a
store that has a position, and ``store recapture`` reads again from the store's own start. While no
group has acked a batch of the store, none of it is counted as applied anywhere: its batches are
dropped and the new start is recorded, checked as ``capture --from`` checks a new store's
(:func:`pipeline.capture.fresh.new_start`: on the server, a transaction's start, MySQL's GTID set).
Once a group acked, it is refused: that group's targets hold what the batches carried, and a start
elsewhere would apply other history over it (``sluice bootstrap --force`` loads the targets afresh).
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any

from pipeline.capture import fresh
from pipeline.capture.server_check import inspect_server
from pipeline.config import Config
from pipeline.source.connect import connect
from pipeline.store import open_store
from sluice_common.errors import UsageError
from sluice_common.logs import get_logger, register_secret

log = get_logger("capture")


def restart(cfg: Config, start_from: str) -> dict[str, Any]:
    """Drop every batch of a store no group has acked from and record ``start_from`` as its start;
    returns what was done (the old and new start, the batches dropped)."""
    register_secret(cfg.source.password.reveal())
    store = open_store(cfg, create=False)
    store.check_writable()
    with store.capture_lock(), ExitStack() as locks:
        for g in sorted({*store.groups(), *(g.groupId for g in cfg.groups)}):
            locks.enter_context(store.apply_lock(g))  # no sync may apply a batch that is being dropped
        acked = {g: store.cursor(g) for g in store.groups() if store.cursor(g) > 0}
        if acked:
            names = ", ".join(f"{g} (cursor {c})" for g, c in sorted(acked.items()))
            raise UsageError(f"{store.root}: group(s) {names} applied batches of this store: starting it "
                             "elsewhere would apply other history over what their targets hold",
                             hint=f"to load the targets afresh from a new snapshot: sluice bootstrap --config "
                                  f"{cfg.file} --force")
        ids = store.batch_ids()
        if ids and cfg.store.kind == "kafka":
            raise UsageError(f"{store.root}: restart drops the store's batches, and the Kafka store's topic keeps "
                             f"them ({len(ids)} batches)", hint="give the deployment a new topic (store.kafka.topic) "
                             f"and start it with sluice capture --config {cfg.file} --once --from ...")
        old = store.last_position()
        conn = connect(cfg.source)
        try:
            info = inspect_server(cfg.source, conn)
            from pipeline.job.covered import check_capture_covers

            check_capture_covers(cfg, conn)
            start, _ = fresh.new_start(cfg, conn, info.flavor, store, start_from)
        finally:
            conn.close()
        if ids:
            store.drop_from(ids[0])
        store.set_start_position(start.to_dict(), force=True)
    log.warning("capture start position set again: the store's batches were dropped", position=start.text(),
                dropped=len(ids))
    return {"old": old, "start": start.to_dict(), "dropped": [ids[0], ids[-1]] if ids else None}
