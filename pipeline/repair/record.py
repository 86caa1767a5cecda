"""Which tables were repaired, in which groups, from which source position: ``<store root>/repairs.json``.

A group stops at a change the binlog does not describe exactly (a statement-format write, a row
image without every column: ``pipeline/job/refusals.py``) and names ``sluice repair`` as the way on. A repair makes
one group's targets equal to the source as of reads that all happen after the position it took
before its first chunk, so a statement at or before that position is covered *for that group*.
Only when every group whose mappings cover the table has repaired it (with every such mapping)
is the change covered for all of them: then the repair adds a waiver for the table up to the
oldest of those positions (:func:`pipeline.state.waivers.add_waiver`), and the groups go on past
the change. Repairing only some of the groups waives nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.capture.position import binlog_key
from pipeline.config import Config
from pipeline.fsutil import now_iso, write_atomic
from pipeline.state.waivers import add_waiver
from sluice_common.errors import SluiceError
from sluice_common.logs import get_logger

log = get_logger("repair")
FILE = "repairs.json"


def _store_root(cfg: Config) -> Path | None:
    if cfg.store.kind != "kafka" and not cfg.store_dir().exists():
        return None
    from pipeline.store import open_store

    return open_store(cfg, create=False).root


def read(root: Path) -> dict[str, Any]:
    """``{"db.table": {group: {mapping file: {"position": ..., "at": ...}}}}``."""
    try:
        return json.loads((root / FILE).read_text()).get("tables", {})
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        raise SluiceError(f"{root / FILE}: unreadable repair record: {e}",
                          hint=f"remove {root / FILE}; the next repair of each table writes it again") from None


def covering(cfg: Config, database: str, table: str) -> dict[str, list[str]] | None:
    """``{group: [mapping files]}`` of every group whose mappings cover the table (None: a group's
    mappings could not be loaded, so nothing can be said)."""
    from pipeline.job.group import load_group

    out: dict[str, list[str]] = {}
    for g in cfg.groups:
        try:
            plan = load_group(cfg, g.groupId, others=False)  # which source tables it reads, nothing more
        except SluiceError:
            return None
        files = sorted({str(plan.mappings[i].file) for i in plan.mappings_for(database, table)})
        if files:
            out[g.groupId] = files
    return out


def record_repaired(cfg: Config, group: str, plan_files: dict[tuple[str, str], list[str]],
                    position: dict[str, Any]) -> list[str]:
    """Note that ``group`` repaired these ``(database, table)`` with these mapping files from
    ``position`` on; add a waiver for each table every covering group has repaired. Returns the
    tables waived (``db.table``)."""
    root = _store_root(cfg)
    if root is None or not plan_files:
        return []
    tables = read(root)
    stamp = now_iso()
    for (db, t), files in plan_files.items():
        mine = tables.setdefault(f"{db}.{t}", {}).setdefault(group, {})
        for f in files:
            mine[f] = {"position": position, "at": stamp}
    root.mkdir(parents=True, exist_ok=True)
    write_atomic(root / FILE, (json.dumps({"tables": tables}, indent=1, sort_keys=True) + "\n").encode())
    waived = []
    for (db, t) in plan_files:
        upto = _covered_upto(cfg, tables.get(f"{db}.{t}", {}), db, t)
        if upto is None:
            continue
        if _add_waiver(root, db, t, upto):
            waived.append(f"{db}.{t}")
    return waived


def _covered_upto(cfg: Config, done: dict[str, dict], database: str, table: str) -> dict | None:
    groups = covering(cfg, database, table)
    if not groups:
        return None
    positions = []
    for g, files in groups.items():
        for f in files:
            entry = (done.get(g) or {}).get(f)
            if entry is None:
                log.info("not waived: a covering group has not repaired the table", table=f"{database}.{table}",
                         group=g, mapping=f)
                return None
            positions.append(entry["position"])
    return min(positions, key=lambda p: binlog_key(str(p["logfile"]), int(p["logpos"])))


def _add_waiver(root: Path, database: str, table: str, upto: dict) -> bool:
    add_waiver(root, database, table, upto)
    log.info("waiver added: the groups go on past refused changes of the table up to the repair's position",
             table=f"{database}.{table}", upto=upto)
    return True
