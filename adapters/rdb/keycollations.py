"""Pre-flight (``Capabilities.key_collations``): no key of a MySQL/MariaDB target table compares more
coarsely than the source column it holds.

For every column of every unique key (and primary key) of a mapped table, the target column's
collation is compared with the source column's, each on its own server, over
:data:`sluice_common.collations.PROBES` (strings that differ in case, accents, trailing spaces,
expansions, width, ...): if the target calls two of them equal that the source does not, two source
rows could be one target row, and the mapping is refused naming both columns and collations, with
the ``ALTER TABLE`` that gives the target column a collation comparing like the source's. A finer
target (NO PAD under a PAD SPACE source, a ``_bin`` under a ``_ci``) is accepted. The source's side
(its tables, its columns' collations, what its collations equate) is asked of the
:class:`adapters.base.SourceCollations` the job passes (pipeline/job/collations.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from adapters.base import SourceCollations
from adapters.rdb.charsets import target_collations, translate
from adapters.rdb.client import engine_for
from adapters.rdb.config import RdbTable
from adapters.rdb.keys import list_tables
from adapters.rdb.schema import table_info
from sluice_common.collations import cached_equal_pairs, coarser_example
from sluice_common.errors import ConfigError
from sluice_common.mysqltypes import quote_ident

if TYPE_CHECKING:
    from adapters.rdb.writer import RdbWriter


def check_key_collations(w: RdbWriter, source: SourceCollations) -> None:
    """ConfigError naming the mapping, the table, the column and both collations when a column of a
    unique key of one of ``w``'s mapped tables compares more coarsely than its source column (a
    MySQL/MariaDB target; other targets are not checked)."""
    target = w.target
    if target.dialect not in ("mysql", "mariadb") or not w.mappings:
        return
    with engine_for(target).connect() as tconn:
        tcur = tconn.connection.dbapi_connection.cursor()
        for m in w.mappings:
            for table in _tables(source, tconn, m):
                _check_table(source, tcur, tconn, target, m, table)


def _spec(m: Any) -> Any:
    return getattr(m, "dbMapping", None) or m


def _tables(source: SourceCollations, tconn, m) -> list[str]:
    spec = _spec(m)
    if not spec.mirrorDb:
        return [spec.table]
    there = set(list_tables(tconn, "mysql", spec.target_schema))
    return sorted(t for t in source.tables(spec.database) if t in there)


def _source_column(route: RdbTable, column: str) -> str | None:
    fold = str.casefold if route.case_insensitive else (lambda x: x)
    if route.columns is not None:
        return next((s for s, t in route.columns if fold(t) == fold(column)), None)
    renamed = next((s for s, t in route.renames if fold(t) == fold(column)), None)
    return renamed or (None if column in route.exclude else column)


def _check_table(source: SourceCollations, tcur, tconn, target, m, table: str) -> None:
    route = RdbTable.from_mapping(m, table)
    info = table_info(tconn, target, "mysql", route.target_schema, route.target_table)
    if info is None:
        return
    database = _spec(m).database
    columns = {r[0].casefold() if route.case_insensitive else r[0]: r
               for r in source.column_collations(database, table)}
    for key, key_name in zip(info.unique, info.unique_names or info.unique, strict=False):
        for col in key:
            c = info.columns.get(col)
            name = _source_column(route, col) if c is not None else None
            if name is None or not c.collation or not c.charset or c.collation == "binary":
                continue
            scol, s_cs, s_coll = columns.get(name.casefold() if route.case_insensitive else name) or (None,) * 3
            if not s_coll or s_cs == "binary":
                continue
            example = coarser_example(source.equal_pairs(s_cs, s_coll),
                                      cached_equal_pairs((target, c.charset, c.collation), tcur, c.charset,
                                                         c.collation))
            if example is None:
                continue
            x, y = example
            where = f"{info.schema}.{info.name}" if info.schema else info.name
            raise ConfigError(
                m.file, "dbMapping",
                f"target column {where}.{col} ({c.collation}) of key {key_name} compares more coarsely than the "
                f"source column {database}.{table}.{scol} ({s_coll}): it equates {x!r} and {y!r}, which the "
                "source keeps apart, so rows the source holds apart would be one row in the target",
                hint=_fix(tcur, target, info, col, s_coll))


def _fix(tcur, target, info, col: str, source_coll: str) -> str:
    """The statement that gives the target column a collation comparing like the source's."""
    same = translate(source_coll, target_collations(tcur, target))
    if same is None:
        return (f"the target server has no collation that compares like {source_coll}: map the table to a target "
                "that has one (for MySQL's *_0900_* collations, MariaDB 10.10 or later)")
    tcur.execute("SELECT COLUMN_TYPE, IS_NULLABLE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = "
                 + ("%s" if info.schema else "DATABASE()") + " AND TABLE_NAME = %s AND COLUMN_NAME = %s",
                 (*([info.schema] if info.schema else []), info.name, col))
    ctype, nullable = tcur.fetchone()
    where = ".".join(quote_ident(p) for p in (info.schema, info.name) if p)
    return (f"ALTER TABLE {where} MODIFY {quote_ident(col)} {ctype}{'' if nullable == 'YES' else ' NOT NULL'} "
            f"COLLATE {same} (restate its DEFAULT and COMMENT, if it has them), then run again")
