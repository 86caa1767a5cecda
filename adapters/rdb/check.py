"""Pre-flight: the target answers, and every mapping's table, columns and key exist there."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import inspect
from sqlalchemy.exc import DBAPIError

from adapters.rdb.config import RdbTable
from adapters.rdb.errors import classify
from pipeline.errors import TargetError

if TYPE_CHECKING:
    from adapters.rdb.writer import RdbWriter


def _fail(route: RdbTable, problem: str, hint: str) -> TargetError:
    origin = f"{route.origin}: " if route.origin else ""
    return TargetError(f"{origin}{problem}", hint=hint)


def check_mapping(w: RdbWriter, mapping: Any) -> None:
    """Raise TargetError naming the table/column when ``mapping`` does not fit the target."""
    if isinstance(mapping, RdbTable):
        return check_route(w, mapping)
    spec = getattr(mapping, "dbMapping", None) or mapping
    if getattr(spec, "mirrorDb", False):
        return check_schema(w, spec.target_schema, getattr(mapping, "file", ""))
    return check_route(w, RdbTable.from_mapping(mapping, spec.table))


def check_schema(w: RdbWriter, schema: str | None, origin: str) -> None:
    if schema is None:
        return
    try:
        names = inspect(w.conn).get_schema_names()
    except DBAPIError as e:
        raise classify(e, w.target, table=schema, action="list the schemas of") from None
    if schema not in names:
        where = f"{origin}: " if origin else ""
        raise TargetError(f"{where}target database {schema} does not exist on {w.target.label}",
                          hint=f"create it (CREATE DATABASE {schema}); mirrorDb then replays the tables' DDL")


def check_route(w: RdbWriter, route: RdbTable) -> None:
    info = w.info(route)
    ci = route.case_insensitive
    wanted = [t for _, t in route.columns or ()] + [t for _, t in route.renames]
    for t in wanted:
        if info.find(t, ci) is None:
            raise _fail(route, f"target table {info.label} has no column {t} (columns: {', '.join(info.columns)})",
                        "add the column to the target table or fix targetColumns")
    if route.pk is None:
        return
    pk = []
    for t, _ in route.pk:
        found = info.find(t, ci)
        if found is None:
            raise _fail(route, f"target table {info.label} has no primary key column {t}", "fix targetPk")
        pk.append(found)
    if not any(set(u) == set(pk) for u in info.unique):
        raise _fail(route, f"target table {info.label} has no primary key or unique index on ({', '.join(pk)}); "
                    "replays could not skip rows that exist", f"add PRIMARY KEY ({', '.join(pk)}) to the target")
