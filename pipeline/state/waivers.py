"""Waivers: a table whose refused changes a repair has made good, up to a source position.

A group stops at a change the binlog does not describe exactly (a statement-format write, a row
image without every column: ``pipeline/job/refusals.py``). ``sluice repair`` brings the table back
to the source's state; when it has done so in every group whose mappings cover the table, it adds
a waiver: "refused changes of ``database.table`` at source positions up to ``upto`` are covered".
The groups then go past those changes (the repair read the source after them, and the changes that
follow replay over it exactly). Waivers live in ``<store root>/waivers.json`` (the driver state
beside locks and run logs, for the file and the Kafka store alike), written atomically.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from pipeline.source.binlog import binlog_key

FILE = "waivers.json"
#: the sql of the refusal records capture writes for a transaction the binlog keeps with a ROLLBACK
#: (it wrote non-transactional tables); the job names that case apart from statement-format writes
ROLLED_BACK = "ROLLBACK"


def waivers(root: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """``{(database, table): upto position}`` of the store at ``root`` (empty when none)."""
    path = Path(root) / FILE
    try:
        entries = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    return {(e["database"], e["table"]): e["upto"] for e in entries}


def add_waiver(root: Path, database: str, table: str, upto: dict[str, Any]) -> None:
    """Record that ``database.table`` was repaired with the source at ``upto`` (a capture position
    dict: ``logfile``, ``logpos``, ...); a later waiver of the same table replaces an earlier one."""
    root = Path(root)
    have = waivers(root)
    old = have.get((database, table))
    if old is not None and binlog_key(old["logfile"], int(old["logpos"])) > \
            binlog_key(upto["logfile"], int(upto["logpos"])):
        return
    have[(database, table)] = {"logfile": upto["logfile"], "logpos": int(upto["logpos"]), "gtid": upto.get("gtid")}
    entries = [{"database": d, "table": t, "upto": u} for (d, t), u in sorted(have.items())]
    root.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=root, prefix=".waivers-")
    with os.fdopen(fd, "w") as f:
        json.dump(entries, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, root / FILE)


def covered(found: dict[tuple[str, str], dict[str, Any]], database: str, table: str, logfile: str,
            logpos: int) -> bool:
    """True if a waiver of ``database.table`` reaches the change at ``logfile:logpos``."""
    upto = found.get((database, table))
    return upto is not None and binlog_key(logfile, logpos) <= binlog_key(upto["logfile"], int(upto["logpos"]))
