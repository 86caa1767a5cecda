"""Which mappings passed the pre-flight check against the source, so a sync can go on without it.

``sluice sync`` (and each group of ``sluice run``) checks its ``dbMapping`` files against the
source tables before Spark starts (:func:`pipeline.job.group.check_against_source`). Applying
RDB changes needs nothing else from the source: the batches carry the rows. So when the source
cannot be reached (down for maintenance, a wrong ``source.password``), the stored batches can
still be applied, provided every ``dbMapping`` of the group was checked against the source before
in exactly its present form. Those checks are recorded here, one fingerprint per mapping
(the file name, its parsed content, and the source server), in ``<store>/checked-mappings.json``.
A changed mapping, or one never checked, waits for the source.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from pipeline.fsutil import now_iso, write_atomic
from sluice_common.logs import get_logger

log = get_logger("sync")
CHECKED_FILE = "checked-mappings.json"
KEEP = 500


def fingerprint(cfg: Any, mapping: Any) -> str:
    """A digest of what the source check depended on: the file, its content and the server."""
    text = "\n".join((mapping.file, mapping.model_dump_json(), f"{cfg.source.host}:{cfg.source.port}"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _read(root: Path) -> dict[str, Any]:
    try:
        raw = json.loads((root / CHECKED_FILE).read_bytes())
    except (OSError, ValueError):
        return {}
    entries = raw.get("mappings") if isinstance(raw, dict) else None
    return entries if isinstance(entries, dict) else {}


def remember(root: Path, cfg: Any, mappings: list[Any]) -> None:
    """Record that ``mappings`` passed the check against the source (best effort: a store that
    cannot take the file only loses the ability to sync without the source)."""
    if not mappings:
        return
    entries = _read(root)
    for m in mappings:
        entries[fingerprint(cfg, m)] = {"file": m.file, "checkedAt": now_iso()}
    newest = dict(sorted(entries.items(), key=lambda kv: str(kv[1].get("checkedAt")))[-KEEP:])
    try:
        write_atomic(root / CHECKED_FILE, (json.dumps({"format": 1, "mappings": newest}, indent=1) + "\n").encode())
    except Exception as e:  # noqa: BLE001 - the check passed; only the record of it is lost
        log.warning("could not record the mappings' source check", file=str(root / CHECKED_FILE), error=str(e))


def unchecked(root: Path, cfg: Any, mappings: list[Any]) -> list[str]:
    """The files of ``mappings`` that were not checked against the source in their present form."""
    entries = _read(root)
    return [m.file for m in mappings if fingerprint(cfg, m) not in entries]
