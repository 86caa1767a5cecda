"""What a group's mappings may not do, refused by name before anything runs (docs/operations.md,
"What Sluice refuses to guess"):

* map a source table that ``source.filter`` leaves out: capture never stores its changes, and
  putting the table back into the filter later does not bring back what was missed;
* carry a ``groupId`` of another group than the one the config lists the file under (canal's
  adapter would skip such a file; applying it anyway, or not, would be a guess);
* name a ``dataSourceKey`` the config does not have (only ``defaultDS`` falls back to ``source``);
* write one target table twice: two mappings of one source table into one target table in a
  group (their changes land in different partitions, so neither order nor columns hold), or two
  groups writing the same target table (each applies in its own order, with its own cursor).

Every refusal is a ConfigError naming the file(s) and the key, with what to change.
"""

from __future__ import annotations

import re
from typing import Any

from pipeline.config import Config
from pipeline.mapping import DbMapping, EsMapping, HbaseMapping, Mapping
from sluice_common.errors import ConfigError, SluiceError

DEFAULT_DS = "defaultDS"


def check_mappings(cfg: Config, group_id: str, gi: int, mappings: tuple[Mapping, ...]) -> None:
    """The refusals that need only the files (see the module docstring)."""
    group = cfg.groups[gi]
    for m in mappings:
        if group.destination is None and m.groupId and m.groupId != group_id:
            raise ConfigError(m.file, "groupId", f"is {m.groupId!r}, but {cfg.file} lists this file under group "
                              f"{group_id!r} (groups[{gi}].mappings)",
                              hint=f"remove groupId from {m.file}, or list the file under group {m.groupId!r}")
        key = m.dataSourceKey
        if key and key not in cfg.srcDataSources and key != DEFAULT_DS:
            known = ", ".join(cfg.srcDataSources) or "none"
            raise ConfigError(m.file, "dataSourceKey", f"data source {key!r} is not in srcDataSources of {cfg.file} "
                              f"(known: {known})", hint=f"add srcDataSources.{key} to {cfg.file}, or remove "
                              "dataSourceKey to use the config's source section")
        check_captured(cfg, m, group_id)


def _captured_by_us(cfg: Config) -> bool:
    kafka = cfg.store.kafka
    return not (cfg.store.kind == "kafka" and kafka is not None and kafka.writtenBy == "canal")


def not_captured(cfg: Config, m: Mapping, group: str | None, database: str, table: str, key: str,
                 more: str = "", pattern: str | None = None) -> ConfigError:
    """The refusal of a mapped ``database.table`` that ``source.filter`` leaves out (``pattern``: the
    include entry that captures what the mapping reads, else the table's own)."""
    name = f"{database}.{table}"
    pattern = pattern or f"{re.escape(database)}\\.{re.escape(table)}"
    return ConfigError(m.file, key, f"source table {name} is not captured: source.filter in {cfg.file} leaves it out "
                       f"({cfg.source.filter.text()}){more}, so none of its changes would reach the target",
                       hint=f"add {pattern} to source.filter.include in {cfg.file} (and take it out of exclude), or "
                       "remove the mapping; rows written to a table the filter never captured are not in the store: "
                       f"load them with `sluice etl --config {cfg.file} --group {group or '<group>'} --mapping "
                       f"{m.file}` after the next capture")


def check_captured(cfg: Config, m: Mapping, group: str | None = None) -> None:
    """Every source table ``m`` reads is one capture stores (a mirrorDb's tables: against the source,
    :func:`check_mirror_captured`). Not checked when canal-server writes the change log."""
    if not _captured_by_us(cfg):
        return
    spec = m.spec
    if isinstance(spec, DbMapping) and not spec.mirrorDb:
        tables = [(spec.database, spec.table, "dbMapping.table")]
    elif isinstance(spec, HbaseMapping):
        tables = [(spec.database, spec.table, "hbaseMapping.table")]
    elif isinstance(spec, EsMapping):
        tables = [(t.schema, t.name, "esMapping.sql") for t in spec.query.tables if t.schema]
    else:
        return
    for database, table, key in tables:
        if not cfg.source.filter.matches(database, table):
            raise not_captured(cfg, m, group, database, table, key)


def check_mirror_captured(cfg: Config, m: Mapping, tables: list[str], group: str | None = None) -> None:
    """A mirrorDb mapping mirrors every table of its database: each must be captured."""
    spec = m.spec
    if not _captured_by_us(cfg) or not isinstance(spec, DbMapping):
        return
    left = [t for t in tables if not cfg.source.filter.matches(spec.database, t)]
    if left:
        more = f" (and {len(left) - 1} more: {', '.join(left[1:6])})" if len(left) > 1 else ""
        raise not_captured(cfg, m, group, spec.database, left[0], "dbMapping.database",
                           f"; mirrorDb mirrors every table of {spec.database}{more}",
                           pattern=f"{re.escape(spec.database)}\\..*")


def written_tables(plan: Any) -> dict[tuple, list[tuple[str, str]]]:
    """``{target table: [(mapping file, source table)]}`` of a group's mappings, each target table as
    its target config names it (``written_table``: RDB ``(kind, dialect, host, port, schema, table)``,
    a mirrorDb's target database counts as ``schema.*``; HBase its table). Elasticsearch names none:
    several mappings writing one index is how canal's parent/child joins work."""
    out: dict[tuple, list[tuple[str, str]]] = {}
    for i, m in enumerate(plan.mappings):
        where = plan.targets[plan.mapping_target[i]][1].written_table(m.spec)
        if where is not None:
            out.setdefault(where, []).append((m.file, m.source_key))
    return out


def _shown(where: tuple) -> str:
    return (f"target table {where[4]}.{where[5]}" if where[0] == "rdb" else f"HBase table {where[5]}") + \
        f" on {where[2]}:{where[3]}"


def _overlap(where: tuple, other: tuple) -> bool:
    return where == other or (where[:5] == other[:5] and "*" in (where[5], other[5]))


def check_overlaps(cfg: Config, plan: Any, load: Any) -> None:
    """Two mappings of one source table into one target table in this group, or another group of the
    config writing a target table this group writes: a ConfigError naming both files. ``load(cfg, g)``
    loads another group (one that does not load is left to its own error)."""
    mine = written_tables(plan)
    for where, files in mine.items():
        by_source: dict[str, str] = {}
        for file, source in files:
            if source in by_source:
                raise ConfigError(file, None, f"maps source table {source} into {_shown(where)}, as "
                                  f"{by_source[source]} of the same group does: their changes would race "
                                  "(different partitions), and columns one maps the other would overwrite",
                                  hint="keep one mapping per source and target table (merge the columns into one "
                                  "file)")
            by_source[source] = file
    for other in cfg.groups:
        if other.groupId == plan.group_id:
            continue
        try:
            theirs = written_tables(load(cfg, other.groupId))
        except SluiceError:
            continue
        for where, files in mine.items():
            for there, their_files in theirs.items():
                if _overlap(where, there):
                    raise ConfigError(files[0][0], None, f"writes {_shown(where)}, which group {other.groupId!r} "
                                      f"writes too ({their_files[0][0]}): two groups apply in their own order with "
                                      "their own cursors, so the table would end up as neither source says",
                                      hint=f"let one group write it: remove the mapping from group {plan.group_id!r} "
                                      f"or from group {other.groupId!r} in {cfg.file}")
