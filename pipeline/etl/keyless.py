"""A mirror's tables without a primary key in a bootstrap: loaded whole, and exact only if the source was quiet.

A full load upserts by key, and the stream replays from the snapshot position P: a row the load read
after a later change is simply overwritten by the replay of that change (docs/etl.md, "Why replaying
from P converges"). A table without a key has no key to upsert by: a mirror's such table
(:attr:`pipeline.etl.plan.TableLoad.replace`) is emptied (``TRUNCATE``) and every row inserted. That
is exact only if its rows are the rows at P: the replay of an INSERT after P that the load already
copied would insert it twice (a key-less INSERT is a plain INSERT). So:

* only ``sluice bootstrap`` loads such tables (``sluice etl`` leaves the group's cursor where it is:
  its pending INSERTs of the table would come on top), and only if the source's binlog did not move
  from P until the load ended (:func:`check_quiet`); else the bootstrap fails naming the tables and
  the fix: run it again while nothing writes to the source;
* two loads of one bootstrap that would each empty the same target table (two ``mirrorDb`` mappings
  of different databases into one ``targetDb``) are refused before anything is written
  (:func:`check_targets`): each would delete the other's rows.
"""

from __future__ import annotations

from typing import Any

from pipeline.capture.position import binlog_key
from pipeline.capture.server_check import current_position, inspect_server
from pipeline.source.connect import connect
from sluice_common.errors import ConfigError, SluiceError


class NotQuiet(SluiceError):
    """The source wrote while a key-less table was loaded: its rows may not be the snapshot's."""

    exit_code = 1


def check_targets(loads: list, plans: list, units: list) -> None:
    """Refuse two key-less loads into one target table (see the module docstring)."""
    group_of = {u.load: u.group for u in units}
    seen: dict[tuple, Any] = {}
    for i, ld in enumerate(loads):
        if not ld.replace:
            continue
        plan = plans[group_of[i]]
        spec = plan.mappings[ld.midx].spec
        target = (plan.group_id, plan.mapping_target[ld.midx], getattr(spec, "target_schema", None) or spec.database,
                  ld.meta.table)
        other = seen.setdefault(target, ld)
        if other is not ld:
            raise ConfigError(ld.mapping_file, "dbMapping.targetDb",
                              f"{ld.meta.label} and {other.meta.label} ({other.mapping_file}) have no primary key "
                              f"and both mirror into {target[2]}.{target[3]}: a full load empties that table for "
                              "each, deleting the other's rows",
                              hint="mirror the databases into target databases of their own, or give the tables a "
                                   "primary key at the source")


def check_quiet(cfg: Any, since: Any, loads: list) -> None:
    """Fail the bootstrap if the source's binlog moved past ``since`` while key-less tables loaded."""
    tables = sorted({ld.meta.label for ld in loads if ld.replace})
    if not tables:
        return
    conn = connect(cfg.source)
    try:
        now = current_position(conn, inspect_server(cfg.source, conn).flavor)
    finally:
        conn.close()
    if binlog_key(now.logfile, now.logpos) == binlog_key(since.logfile, since.logpos):
        return
    many = len(tables) > 1
    raise NotQuiet(f"{', '.join(tables)} {'have' if many else 'has'} no primary key and {'were' if many else 'was'} "
                   f"loaded whole, but the source wrote while {'they were' if many else 'it was'} read "
                   f"(its binlog moved from {since.text()} to {now.text()}): rows written after the snapshot would "
                   "be applied again from the stream, twice; the bootstrap recorded nothing",
                   hint="run `sluice bootstrap --force` again while nothing writes to the source")
