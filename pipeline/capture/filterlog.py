"""The ``source.filter`` a store was captured with, so that one config cannot narrow it for another.

Two deployments that share a store (the same ``store.path`` and ``source.name``) share its stored
position: a capture by one with a filter that leaves out the other's tables moves that position past
their changes, and the other captures nothing of them again (a new user's probe: exit 0 both times;
only ``status`` listing a group "not in the config" hinted at it). A deployment's own mapped tables
are checked by :mod:`pipeline.job.covered`; the tables other configs need are not in this config, so
the store keeps the filter of its last capture (``capture-filter.json`` in its folder) and a capture
whose filter leaves out a table the recorded one captured -- among the tables the source has now --
is refused, naming them, the recorded filter and the config that recorded it. A filter that only
captures more is recorded silently. When the narrower filter is meant (no deployment needs those
tables any more), ``sluice store set-filter`` records it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.config import Config, TableFilter
from pipeline.fsutil import now_iso, write_atomic
from sluice_common.errors import ConfigError

FILE = "capture-filter.json"
_SYSTEM = ("mysql", "information_schema", "performance_schema", "sys")


def recorded(root: Path) -> dict[str, Any] | None:
    """The store's recorded filter (``include``, ``exclude``, ``config``, ``at``), or None."""
    try:
        return json.loads((Path(root) / FILE).read_text())
    except FileNotFoundError:
        return None


def as_filter(was: dict[str, Any]) -> TableFilter:
    """A :func:`recorded` filter as the config's kind."""
    return TableFilter(include=tuple(was["include"]), exclude=tuple(was["exclude"]))


def record(root: Path, cfg: Config) -> None:
    """Record ``cfg``'s filter as the store's."""
    f = cfg.source.filter
    text = json.dumps({"include": list(f.include), "exclude": list(f.exclude), "config": str(Path(cfg.file).absolute()),
                       "at": now_iso()}, indent=1)
    write_atomic(Path(root) / FILE, text.encode())


def check(root: Path, cfg: Config, conn: Any) -> None:
    """ConfigError when ``cfg``'s filter leaves out a table (of the source's, now) that the store's
    recorded filter captured; else record ``cfg``'s filter if it differs (see the module docstring)."""
    was = recorded(root)
    f = cfg.source.filter
    if was is not None and (tuple(was["include"]), tuple(was["exclude"])) == (f.include, f.exclude):
        return
    if was is not None:
        old = as_filter(was)
        with conn.cursor() as cur:
            cur.execute("SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA NOT IN "
                        f"({', '.join(['%s'] * len(_SYSTEM))}) ORDER BY 1, 2", _SYSTEM)
            tables = [(_s(d), _s(t)) for d, t in cur.fetchall()]
        lost = [f"{d}.{t}" for d, t in tables if old.matches(d, t) and not f.matches(d, t)]
        if lost:
            more = f" (and {len(lost) - 5} more)" if len(lost) > 5 else ""
            raise ConfigError(cfg.file, "source.filter",
                              f"leaves out {', '.join(lost[:5])}{more}, which this store's captures so far took "
                              f"(filter {old.text()}, recorded by {was.get('config')}): capturing with it would move "
                              "the store's position past their changes for every deployment that uses this store; "
                              "nothing was captured",
                              hint="if another deployment shares this store (the same store.path and source.name), "
                                   f"give this one its own store.path in {cfg.file}; if no deployment needs those "
                                   f"tables any more: sluice store set-filter --config {cfg.file}")
    record(root, cfg)


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, bytes | bytearray) else str(v)
