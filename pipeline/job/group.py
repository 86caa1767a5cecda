"""A consumer group resolved for a run: its mappings, the target each one writes to,
the routes that pick their changes, and the pre-flight checks done on the driver."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pymysql

from adapters.registry import capabilities, key_rules, kind_of, make_writer, target_from_adapter
from pipeline.config import Config
from pipeline.job import checked, conflicts
from pipeline.job.cascades import SourceFk, expected_cascades, read_source_fks
from pipeline.job.collations import check_key_collations
from pipeline.job.keyfold import KeyPlan
from pipeline.job.mirrorcheck import check_mirrored_tables
from pipeline.job.reload import database_hint
from pipeline.job.routing import Route, routes_for
from pipeline.job.zones import warn_of_system_zone
from pipeline.mapping import DbMapping, Mapping, load_mappings
from pipeline.source import catalog
from sluice_common.errors import ConfigError, GrantError, SourceError, TargetMismatchError
from sluice_common.logs import get_logger
from sluice_common.mysqltypes import quote_ident

log = get_logger("sync")


@dataclass(frozen=True)
class GroupPlan:
    """Everything about a group the driver and (pickled) the executors need."""

    config: Config
    group_id: str
    mappings: tuple[Mapping, ...]
    mapping_target: tuple[str, ...]
    targets: dict
    routes: list[Route]

    def mappings_for(self, database: str, table: str) -> list[int]:
        """Indices of the mappings that a change of ``database.table`` concerns."""
        return [i for i, m in enumerate(self.mappings) if m.matches(database, table)]

    def default_schemas(self) -> dict[str, str]:
        """Each mapping file's default target schema where a table named without one lands in the
        URL's database (MySQL and MariaDB targets), for :func:`pipeline.job.mapped.compare`."""
        out = {}
        for i, m in enumerate(self.mappings):
            _, target = self.targets[self.mapping_target[i]]
            if getattr(target, "dialect", None) in ("mysql", "mariadb") and getattr(target, "database", None):
                out[m.file] = target.database
        return out

    def key_plan(self) -> KeyPlan:
        """Ordered groups and key folds from the targets' current schemas (after each DDL)."""
        ordered, folds, folders = {}, {}, {}
        for tid, (kind, target) in self.targets.items():
            used = [(i, m) for i, m in enumerate(self.mappings) if self.mapping_target[i] == tid]
            rules = key_rules(kind, target, tid, used) if used else None
            if rules is not None:
                ordered.update(rules.ordered)
                folds.update(rules.folds)
                if rules.folds:
                    folder = rules.folder(target)  # one per target
                    folders.update((m, folder) for m, _ in rules.folds)
        by_key = frozenset(i for i in range(len(self.mappings))
                           if capabilities(self.targets[self.mapping_target[i]][0]).folds)
        return KeyPlan(ordered, folds, folders, by_key)

    def check(self, store: Any = None) -> None:
        """Pre-flight: mappings fit the source tables, and every target answers and fits (RDB
        targets: with the foreign keys whose cascades the binlog does not carry). Runs on the
        driver before Spark starts.

        ``store``: the group's BatchStore. With it, a source that cannot be reached does not stop
        the sync when every dbMapping passed this check before unchanged (:mod:`pipeline.job.checked`):
        applying RDB changes needs only the stored batches. (The cascade check, which reads the
        source's foreign keys, is skipped then; it passed with the recorded check.)"""
        db = [m for m in self.mappings if isinstance(m.spec, DbMapping)]
        cascades: dict | None = None
        try:
            fks = check_against_source(self.config, self.mappings, group=self.group_id)
        except SourceError as e:
            if store is None or isinstance(e, GrantError):  # a missing grant is no outage: fix it first
                raise
            missing = checked.unchecked(store.root, self.config, db)
            if missing:
                raise SourceError(f"{e.message}; the mappings {', '.join(missing)} were not checked against the "
                                  "source in their present form, so the stored batches cannot be applied without it",
                                  hint=e.hint) from None
            log.warning("the source is unreachable: applying the stored batches with mappings that passed the "
                        "source check before, unchanged", group=self.group_id, error=e.message)
        else:
            cascades = expected_cascades(fks, self.mappings, self.mapping_target)
            for fk in fks:  # Elasticsearch and HBase have no foreign keys to cascade with
                for m in self.mappings:
                    if fk.cascades and not capabilities(m.kind).foreign_keys and m.matches(fk.database, fk.table):
                        log.warning("the source cascades into a mapped table; the binlog does not carry those "
                                    "changes, so its documents/rows stay until the row itself changes",
                                    mapping=m.file, foreign_key=fk.describe())
        for tid, (kind, target) in self.targets.items():
            used = tuple(m for i, m in enumerate(self.mappings) if self.mapping_target[i] == tid)
            try:
                if used and capabilities(kind).foreign_keys:
                    make_writer(kind, target, used).check(None if cascades is None else cascades.get(tid, []))
                elif used:
                    make_writer(kind, target, used).check()
            except TargetMismatchError as e:
                missing = getattr(e, "missing_schema", None)
                if missing is None:
                    raise
                raise TargetMismatchError(e.message, hint=database_hint(self, target, *missing)) from None
        if cascades is not None:  # the source answered, and every target did just now
            check_key_collations(self)
            if store is not None:  # a sync: the tables its mirrors will write exist, or pending DDL makes them
                check_mirrored_tables(self, store)
            if any(getattr(m.spec, "mirrorDb", False) for m in self.mappings):
                warn_of_system_zone(self.config)
        if cascades is not None and store is not None:  # every check passed with the source
            checked.remember(store.root, self.config, db)


def load_group(cfg: Config, group_id: str, others: bool = True) -> GroupPlan:
    """Resolve a group of the config: load its mappings and pair each with its target, refusing
    what :mod:`pipeline.job.conflicts` names (``others``: also against the config's other groups)."""
    group = cfg.group(group_id)
    gi = cfg.groups.index(group)
    mappings = group_mappings(cfg, group_id)
    conflicts.check_mappings(cfg, group_id, gi, mappings)
    targets: dict[str, tuple[str, object]] = {}
    by_kind: dict[str, list[tuple[str, str | None]]] = {}
    for ai, adapter in enumerate(group.outerAdapters):
        key = f"groups[{gi}].outerAdapters[{ai}]"
        if adapter.name == "logger":
            continue
        kind = kind_of(adapter.name)
        tid = f"{kind}:{adapter.key or ai}"
        targets[tid] = (kind, target_from_adapter(adapter, cfg.file, key, cfg=cfg))
        by_kind.setdefault(kind, []).append((tid, adapter.key))
    chosen = []
    for m in mappings:
        candidates = by_kind.get(m.kind, [])
        if m.outerAdapterKey:
            hit = [tid for tid, k in candidates if k == m.outerAdapterKey]
            if not hit:
                keys = ", ".join(str(k) for _, k in candidates) or "none"
                raise ConfigError(m.file, "outerAdapterKey", f"no {m.kind} adapter with key "
                                  f"{m.outerAdapterKey!r} in group {group_id} of {cfg.file} (keys: {keys})")
        else:
            hit = [tid for tid, _ in candidates]
            if len(hit) > 1:
                raise ConfigError(m.file, "outerAdapterKey", f"group {group_id} has {len(hit)} {m.kind} "
                                  "adapters: name one with outerAdapterKey")
            if not hit:
                raise ConfigError(cfg.file, f"groups[{gi}].outerAdapters",
                                  f"no {m.kind} adapter for mapping {m.file}")
        chosen.append(hit[0])
    routes = [r for i, m in enumerate(mappings) for r in routes_for(i, m, _source_database(cfg, m))]
    plan = GroupPlan(cfg, group_id, tuple(mappings), tuple(chosen), targets, routes)
    if others:
        conflicts.check_overlaps(cfg, plan, lambda c, g: load_group(c, g, others=False))
    return plan


def group_mappings(cfg: Config, group_id: str) -> list[Mapping]:
    """The mapping files of a group, loaded (ConfigError: none listed, none matching, one broken)."""
    group = cfg.group(group_id)
    gi = cfg.groups.index(group)
    base = Path(cfg.file).resolve().parent if cfg.file not in ("", "<config>") else Path.cwd()
    if not group.mappings:
        raise ConfigError(cfg.file, f"groups[{gi}].mappings", "lists no mapping files")
    mappings = load_mappings(group.mappings, base_dir=base)
    if group.destination is not None:  # a canal config: the files of this destination and group, as canal picks
        mappings = [m for m in mappings if (m.destination or group.destination) == group.destination
                    and (m.groupId or group.groupId) == group.groupId]
    if not mappings:
        raise ConfigError(cfg.file, f"groups[{gi}].mappings",
                          f"no mapping file matches {', '.join(group.mappings)} (relative to {base})")
    return mappings


def _source_database(cfg: Config, m: Mapping) -> str | None:
    """The database of a mapping's data source (``jdbc:mysql://h:3306/db?..`` -> ``db``), if any."""
    ds = cfg.srcDataSources.get(m.dataSourceKey) if m.dataSourceKey else None
    if ds is None:
        return None
    rest = ds.url.strip().removeprefix("jdbc:").partition("://")[2]
    return unquote(urlsplit("//" + rest).path.lstrip("/")) or None if rest else None


def connect_source(cfg: Config) -> pymysql.connections.Connection:
    """A connection to the source for the pre-flight checks (SourceError naming the keys to fix)."""
    from pipeline.source.connect import connect

    return connect(cfg.source, hint="check source.host/port/user/password in " + cfg.file
                   + " and that the server is running")


def check_against_source(cfg: Config, mappings: tuple[Mapping, ...], conn: Any = None,
                         group: str | None = None) -> list[SourceFk]:
    """Every mapped source table exists and has the columns the mapping names, and each
    ``targetPk`` is a unique NOT NULL key there (unless ``allowDuplicateKeys``); returns the
    foreign keys of the mapped databases.

    ``conn``: an open source connection to use (else one is opened and closed here)."""
    specs = [m for m in mappings if isinstance(m.spec, DbMapping)]  # ES/HBase: checked by their adapters
    if not specs:
        return []
    own = conn is None
    if own:
        conn = connect_source(cfg)
    s = cfg.source
    try:
        with conn.cursor() as cur:
            for m in specs:
                spec = m.spec
                tables = [spec.table] if not spec.mirrorDb else catalog.tables(cur, spec.database)
                if spec.mirrorDb and not tables and not catalog.schema_exists(cur, spec.database):
                    _readable(cur, m, spec.database, None)
                    raise ConfigError(m.file, "dbMapping.database",
                                      f"source database {spec.database!r} does not exist on {s.host}:{s.port}",
                                      hint="fix dbMapping.database, or create the database on the source (a "
                                           "mirror of a database without tables is fine: they arrive with their DDL)")
                if spec.mirrorDb:
                    conflicts.check_mirror_captured(cfg, m, tables, group)
                # one query, not one a table
                every = catalog.columns_by_table(cur, spec.database) if spec.mirrorDb else {}
                for t in tables:
                    cols, pk = _names_and_key(every[t] if t in every else catalog.columns(cur, spec.database, t))
                    if not cols:
                        _readable(cur, m, spec.database, t)
                        raise ConfigError(m.file, "dbMapping.table",
                                          f"source table {spec.database}.{t} does not exist on "
                                          f"{s.host}:{s.port}",
                                          hint="if it was renamed, set dbMapping.table to its new name, then "
                                               f"`sluice repair --config {cfg.file} --group {group or '<group>'} "
                                               f"--mapping {m.file}` brings over what changed under the old one; if "
                                               "it was dropped, remove the mapping")
                    m.validate_against_source(cols, pk, t)
                    if not spec.mirrorDb:
                        spec.validate_key(catalog.unique_keys(cur, spec.database, t), t)
            return read_source_fks(cur, {m.spec.database for m in specs})
    finally:
        if own:
            conn.close()


#: the server would not show this user a table (SELECT command denied, 1142) or a database
#: (access denied, 1044); it may well exist: information_schema hides what a user may not read
NOT_GRANTED = frozenset({1142, 1044})


def _readable(cur, m: Mapping, database: str, table: str | None) -> None:
    """A table (or database) information_schema does not show: GrantError naming the grant when the
    server says the user may not read it; back (it is missing) when it says it does not exist."""
    from pipeline.source.connect import current_user, error_code

    name = f"{database}.{table}" if table else database
    probe = (f"SELECT 1 FROM {quote_ident(database)}.{quote_ident(table)} LIMIT 0" if table
             else f"SHOW TABLES FROM {quote_ident(database)}")
    try:
        cur.execute(probe)
        cur.fetchall()
        return
    except pymysql.MySQLError as e:
        if error_code(e) not in NOT_GRANTED:
            return  # no such table (1146) or database (1049)
        server = e.args[-1]
    who = current_user(cur)
    key = "dbMapping.table" if table else "dbMapping.database"
    raise GrantError(f"{m.file}: {key}: the source user {who} may not read {'table' if table else 'database'} "
                     f"{name}, so the mapping cannot be checked against it (server: {server})",
                     hint=f"GRANT SELECT ON {quote_ident(database)}.* TO {who};")


def _names_and_key(cols: list[catalog.Column]) -> tuple[list[str], list[str]]:
    """The column names and the columns the server marks ``PRI`` (in table order)."""
    return [c.name for c in cols], [c.name for c in cols if c.key == "PRI"]
