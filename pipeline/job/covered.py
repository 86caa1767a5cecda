"""Before capture reads anything: ``source.filter`` captures every table the config's groups map.

A group refuses a mapped table the filter leaves out when it loads (:mod:`pipeline.job.conflicts`),
but that is at sync time: a capture that ran first with such a filter (a narrowed ``include``, a new
``exclude``) stored none of the table's changes and moved the stored position past them, and putting
the table back into the filter does not bring them back (docs/operations.md, "What Sluice refuses to
guess"). :func:`check_capture_covers` refuses that capture instead, naming the mapping, the table and
the filter, before the position moves. A group whose files do not load is left to its own refusal.
"""

from __future__ import annotations

from typing import Any

from pipeline.config import Config
from pipeline.job import conflicts
from pipeline.job.group import group_mappings
from pipeline.mapping import DbMapping
from pipeline.source import catalog
from sluice_common.errors import ConfigError


def check_capture_covers(cfg: Config, conn: Any) -> None:
    """ConfigError when ``source.filter`` leaves out a table some group of ``cfg`` maps (a mirrorDb's
    tables as ``conn``, a source connection, lists them)."""
    for group in cfg.groups:
        try:
            mappings = group_mappings(cfg, group.groupId)
        except ConfigError:
            continue  # its sync says what is wrong with its files
        for m in mappings:
            conflicts.check_captured(cfg, m, group.groupId)
            spec = m.spec
            if isinstance(spec, DbMapping) and spec.mirrorDb:
                with conn.cursor() as cur:
                    tables = catalog.tables(cur, spec.database)
                conflicts.check_mirror_captured(cfg, m, tables, group.groupId)
