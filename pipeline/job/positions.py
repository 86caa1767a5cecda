"""The source positions the targets record with their rows, read and written for a whole
deployment through the writers of the adapters whose capabilities say ``positions``
(``recorded_positions``, ``record_position``; the RDB adapter's ``_sluice_applied``): a new store
asks them before capture would start at "now" (:mod:`pipeline.capture.fresh`), and ``sluice
bootstrap`` records its snapshot position in them.
Capture imports this module, never the other way: what both need of the source (:class:`Position`,
the account name) is :mod:`pipeline.source`'s, below both."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from adapters.base import AppliedFrom
from adapters.registry import capabilities, make_writer
from pipeline.config import Config
from pipeline.job.group import GroupPlan, load_group
from pipeline.source.binlog import Position, binlog_key
from sluice_common.errors import SluiceError


@dataclass(frozen=True)
class Applied:
    """The newest record of one group in one target schema."""

    group: str
    target: str  # the target's label (URL without password) and schema
    position: Position
    store_id: str
    at: str


@dataclass(frozen=True)
class Unknown:
    """A group whose targets could not be asked (its mappings do not load, a target is down)."""

    group: str
    why: str


def _rdb_writers(plan: GroupPlan) -> list[tuple[Any, Any]]:
    out = []
    for tid, (kind, target) in plan.targets.items():
        used = tuple(m for i, m in enumerate(plan.mappings) if plan.mapping_target[i] == tid)
        if used and capabilities(kind).positions:  # the others record no position
            out.append((target, make_writer(kind, target, used)))
    return out


def read_all(cfg: Config) -> tuple[list[Applied], list[Unknown]]:
    """Every group's newest record of this source in each of its RDB targets' schemas, and the
    groups that could not be asked (Elasticsearch and HBase targets record nothing yet)."""
    found: list[Applied] = []
    unknown: list[Unknown] = []
    for g in cfg.groups:
        try:
            plan = load_group(cfg, g.groupId, others=False)
            for target, writer in _rdb_writers(plan):
                for r in writer.recorded_positions(cfg.source.name):
                    where = f"{target.label}" + (f", schema {r['schema']}" if r["schema"] else "")
                    found.append(Applied(r["group"], where, Position.from_dict(r["position"]), r["store_id"],
                                         r["at"]))
        except SluiceError as e:
            unknown.append(Unknown(g.groupId, e.message))
    return found, unknown


def resume_point(found: list[Applied]) -> Applied | None:
    """Where capture can resume so that no target misses a change: per group the newest record (its
    latest round started there, everything before it was acked), then the oldest of those."""
    newest: dict[str, Applied] = {}
    for a in found:
        cur = newest.get(a.group)
        if cur is None or _key(a.position) > _key(cur.position):
            newest[a.group] = a
    return min(newest.values(), key=lambda a: _key(a.position), default=None)


def _key(p: Position) -> tuple:
    return binlog_key(p.logfile, p.logpos)


def record(cfg: Config, plans: list[GroupPlan], position: dict[str, Any], store_id: str, batch: int) -> None:
    """Record ``position`` in every RDB target schema of ``plans`` (``sluice bootstrap``: the
    snapshot the load is consistent with)."""
    for plan in plans:
        mark = AppliedFrom(cfg.source.name, f"{cfg.source.host}:{cfg.source.port}", plan.group_id,
                           json.dumps(position, sort_keys=True), store_id, batch)
        for _target, writer in _rdb_writers(plan):
            writer.record_position(mark)
