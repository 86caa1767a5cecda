"""What a repair compares: one :class:`RepairTable` per (mapping, source table), split into key
ranges (one Spark task each). Built on the driver from the group's mappings; plain picklable data.

* a ``dbMapping``: every table of the database (``mirrorDb``) or its table, with the compared
  columns and key as ``sluice verify`` pairs them (:func:`pipeline.ops.verify_source.pairs_for`);
* an ``esMapping``: its main table (documents by ``_id``, built by the adapter from the mapping SQL);
* an ``hbaseMapping``: its table (rows by row key).

Which, and the target's name in the report, the adapter's verifier says (``make_verifier`` through
adapters/registry.py: ``source_table``, ``describe``).

Key ranges come from the full load's splitter (:func:`pipeline.etl.ranges.split`) on a connection
that returns typed values, so the same bounds can be used on the source and on any RDB target.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from adapters.base import TablePair
from pipeline.etl import ranges as R
from pipeline.etl.source import TableMeta, table_meta
from pipeline.ops.verify_source import pairs_for
from pipeline.source import catalog
from pipeline.source.catalog import tables_of
from sluice_common.errors import ConfigError, UsageError
from sluice_common.mysqltypes import INTEGER_TYPES


@dataclass(frozen=True)
class RepairTable:
    """One source table of one mapping of the group."""

    midx: int
    kind: str                          # rdb | es | hbase
    mapping_file: str
    meta: TableMeta                    # the source table: every column, its key
    pair: TablePair | None = None      # rdb: compared columns, target schema/table
    target_label: str = ""
    ranges: tuple[R.KeyRange, ...] = field(default=(R.KeyRange(),))
    #: why this table cannot be repaired (reported as its failure; the others are repaired)
    problem: str | None = None

    @property
    def label(self) -> str:
        return self.meta.label


def _wanted(tables: list[str] | None, database: str, table: str) -> bool:
    if not tables:
        return True
    return f"{database}.{table}".lower() in {t.lower() for t in tables}


def plan_tables(conn: Any, plan: Any, midxs: list[int], tables: list[str] | None, parts: int) -> list[RepairTable]:
    """The tables of the chosen mappings (``tables``: only these ``db.table``), each split into
    about ``parts`` key ranges. ``conn``: a typed source connection (:func:`guard.typed_connection`)."""
    out: list[RepairTable] = []
    for midx in midxs:
        mapping = plan.mappings[midx]
        kind, target = plan.targets[plan.mapping_target[midx]]
        for database, table, pair, label, absent in _tables_of_mapping(conn, plan, midx, mapping, kind, target):
            if not _wanted(tables, database, table):
                continue
            meta = table_meta(conn, database, table)
            if meta is None:
                raise ConfigError(mapping.file, None, f"source table {database}.{table} does not exist")
            if absent:  # a repair fills a table; it cannot make one
                out.append(RepairTable(midx, kind, mapping.file, meta, pair, label, (),
                                       problem=_absent_problem(plan, target, mapping, pair, not meta.pk)))
                continue
            if not meta.pk:  # a replayed INSERT of a keyless row would be applied twice
                out.append(RepairTable(midx, kind, mapping.file, meta, pair, label, (), problem=(
                    f"{mapping.file}: source table {database}.{table} has no primary key: a repair writes by key "
                    "and cannot repair it\n  fix: give it a primary key, or load the group again with "
                    "`sluice bootstrap --force` while nothing writes to it")))
                continue
            rows = R.estimate_rows(conn, meta)
            meta = TableMeta(meta.database, meta.table, meta.columns, meta.pk, rows)
            out.append(RepairTable(midx, kind, mapping.file, meta, pair, label, tuple(_typed(meta, r) for r in
                                                                                     R.split(conn, meta, parts, rows))))
    if tables:
        found = {t.label.lower() for t in out}
        missing = [t for t in tables if t.lower() not in found]
        if missing:
            raise UsageError(f"--table {', '.join(missing)}: no chosen mapping of group {plan.group_id} "
                             "covers it (give db.table as the source names it)")
    return out


def _tables_of_mapping(conn: Any, plan: Any, midx: int, mapping: Any, kind: str, target: Any
                       ) -> list[tuple[str, str, TablePair | None, str, bool]]:
    """``(database, table, pair, target label, absent)`` of each source table of ``mapping``;
    ``absent``: the target has no table for it (RDB targets)."""
    from adapters.registry import capabilities, make_verifier

    compare = capabilities(kind).compare
    if compare == "checksums":
        with conn.cursor() as cur:
            pairs = pairs_for(cur, mapping)
        gone = {id(p) for p in make_verifier(kind, target, (mapping,)).absent(pairs)}
        out = []
        for p in pairs:
            tname = f"{p.target_schema}.{p.target_table}" if p.target_schema else p.target_table
            out.append((p.source_db, p.source_table, p, f"{tname} on {target.label}", id(p) in gone))
        return out
    verifier = make_verifier(kind, target, (mapping,))
    if compare == "documents":  # keyed by the mapping SQL's main table, in the database the sync meets
        schema, main = verifier.source_table(mapping)
        database = (schema or _route_database(plan, midx) or _es_source_database(target, mapping)
                    or _captured_database(conn, plan.config, main))
        if not database:
            raise ConfigError(mapping.file, "esMapping.sql", f"the main table {main} names no database, "
                              "and no single captured database has it",
                              hint="write schema.table in the SQL, or give dataSourceKey a jdbc url with a database")
        return [(database, main, None, verifier.describe(mapping)[1], False)]
    spec = mapping.spec
    if getattr(spec, "mirrorDb", False):
        return [(spec.database, t, None, f"{kind} {t}", False) for t in tables_of(conn, spec.database)]
    database, table = verifier.source_table(mapping)  # rows by row key: the mapping's own table
    return [(database, table, None, verifier.describe(mapping)[1], False)]


def _absent_problem(plan: Any, target: Any, mapping: Any, pair: TablePair, keyless: bool) -> str:
    """Why a pair whose target table does not exist is not repaired, and how to make the table (a
    mirror's: copied from the source, :mod:`pipeline.job.reload`)."""
    from pipeline.job.reload import mirror_of, tables_hint

    tname = f"{pair.target_schema}.{pair.target_table}" if pair.target_schema else pair.target_table
    found = mirror_of(plan, pair.source_db, pair.source_table)
    hint = (tables_hint(plan, target, found[1], pair.source_db, (pair.source_table,),
                        (pair.source_table,) if keyless else ()) if found is not None
            else "create it (docs/rdb.md lists the suggested column types), then run the repair again")
    return (f"{mapping.file}: target table {tname} does not exist on {target.label}: a repair fills a "
            f"table, it cannot make one\n  fix: {hint}")


def _route_database(plan: Any, midx: int) -> str | None:
    for r in plan.routes:
        if r.midx == midx:
            return r.database
    return None


def _es_source_database(target: Any, mapping: Any) -> str | None:
    """The database of the mapping's data source (``dataSourceKey``'s jdbc url), as the adapter uses it."""
    try:
        return target.source_for(mapping).database
    except Exception:  # noqa: BLE001 - no such data source: the error below names the mapping
        return None


def _captured_database(conn: Any, cfg: Any, table: str) -> str | None:
    """The one database holding ``table`` whose changes capture stores (its filter), as the sync meets
    them; None when none or several do."""
    with conn.cursor() as cur:
        found = catalog.databases_with(cur, table)
    flt = getattr(cfg.source, "filter", None)
    hits = [d for d in found if flt is None or flt.matches(d, table)]
    return hits[0] if len(hits) == 1 else None


def _typed(meta: TableMeta, r: R.KeyRange) -> R.KeyRange:
    """The splitter's integer bounds are text; the comparison binds them on a target too."""
    if len(meta.pk) == 1 and meta.column(meta.pk[0]).data_type in INTEGER_TYPES:
        def conv(b):
            return None if b is None else (int(b[0]),)
        return R.KeyRange(conv(r.lo), conv(r.hi))
    return r
