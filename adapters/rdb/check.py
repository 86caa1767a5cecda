"""Pre-flight: the target answers, and every mapping's table, columns and key exist there.

A mapping that does not fit the target is a :class:`TargetMismatchError` naming the mapping
file and key (a config problem: exit 2); failing to reach the target stays a TargetError."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import inspect
from sqlalchemy.exc import DBAPIError

from adapters.rdb.config import RdbTable
from adapters.rdb.errors import classify
from sluice_common.errors import TargetError, TargetMismatchError

if TYPE_CHECKING:
    from adapters.rdb.writer import RdbWriter


def _fail(route: RdbTable, key: str, problem: str, hint: str) -> TargetMismatchError:
    origin = f"{route.origin}: dbMapping.{key}: " if route.origin else ""
    return TargetMismatchError(f"{origin}{problem}", hint=hint)


def check_mapping(w: RdbWriter, mapping: Any) -> None:
    """Raise TargetError naming the table/column when ``mapping`` does not fit the target."""
    if isinstance(mapping, RdbTable):
        return check_route(w, mapping)
    spec = getattr(mapping, "dbMapping", None) or mapping
    if getattr(spec, "mirrorDb", False):
        return check_schema(w, spec.target_schema, getattr(mapping, "file", ""), spec.database)
    return check_route(w, RdbTable.from_mapping(mapping, spec.table))


def check_schema(w: RdbWriter, schema: str | None, origin: str, source_db: str | None = None) -> None:
    """A mirror's target database exists. When it does not, the error carries ``missing_schema``
    (schema, mapping file, source database): the group's check names how to recreate and load it
    (:func:`pipeline.job.reload.database_hint`); its DDL is history, replaying it cannot."""
    if schema is None:
        return
    try:
        names = inspect(w.conn).get_schema_names()
    except DBAPIError as e:
        raise classify(e, w.target, table=schema, action="list the schemas of") from None
    if schema not in names:
        where = f"{origin}: dbMapping.targetDb: " if origin else ""
        err = TargetMismatchError(f"{where}target database {schema} does not exist on {w.target.label}",
                                  hint=f"create it (CREATE DATABASE {schema}) with the tables of "
                                  f"{source_db or 'the source'}, and load their rows (sluice etl)")
        err.missing_schema = (schema, origin, source_db or schema)  # type: ignore[attr-defined]
        raise err
    check_triggers(w, schema, None, f"{origin}: dbMapping.targetDb: " if origin else "")


def check_route(w: RdbWriter, route: RdbTable) -> None:
    try:
        info = w.info(route)
    except TargetError as e:
        if not getattr(e, "missing_table", False):
            raise
        raise _fail(route, "targetTable", e.message, e.hint or "create it") from None
    check_triggers(w, info.schema, info.name, f"{route.origin}: dbMapping.targetTable: " if route.origin else "")
    ci = route.case_insensitive
    wanted = [t for _, t in route.columns or ()] + [t for _, t in route.renames]
    for t in wanted:
        if info.find(t, ci) is None:
            raise _fail(route, "targetColumns",
                        f"target table {info.label} has no column {t} (columns: {', '.join(info.columns)})",
                        "add the column to the target table or fix targetColumns")
    if route.pk is None:
        return
    pk = []
    for t, _ in route.pk:
        found = info.find(t, ci)
        if found is None:
            raise _fail(route, "targetPk", f"target table {info.label} has no primary key column {t}", "fix targetPk")
        pk.append(found)
    if not any(set(u) == set(pk) for u in info.unique):
        raise _fail(route, "targetPk", f"target table {info.label} has no primary key or unique index on "
                    f"({', '.join(pk)}); replays could not skip rows that exist",
                    f"add PRIMARY KEY ({', '.join(pk)}) to the target")


def check_triggers(w: RdbWriter, schema: str | None, table: str | None, where: str) -> None:
    """Refuse target tables with triggers that fire for Sluice's writes (``table`` None: every table
    of ``schema``, a mirror's). Sluice writes the rows the binlog describes, as a replica applying
    row events does, which fires no trigger: a target trigger would change those rows, or write
    rows the binlog carries already (the source's own triggers' effects are rows in it)."""
    found = target_triggers(w.conn, w.dialect.family, schema, table)
    if not found:
        return
    listed = "; ".join(f"{t} ({', '.join(names)})" for t, names in found.items())
    if w.dialect.family == "postgresql":
        fix = "; ".join(f"ALTER TABLE {t} DISABLE TRIGGER {n}" for t, names in found.items() for n in names)
    elif w.dialect.family == "mysql":
        fix = "; ".join(f"DROP TRIGGER {t.rsplit('.', 1)[0] + '.' if '.' in t else ''}{n}"
                        for t, names in found.items() for n in names)
    else:
        fix = "; ".join(f"DROP TRIGGER {n}" for names in found.values() for n in names)
    raise TargetMismatchError(
        f"{where}target table(s) with triggers on {w.target.label}: {listed}; Sluice writes exactly the rows the "
        "binlog carries (as a replica applying row events, which fires no trigger), and a trigger would change "
        "them or write rows the binlog already holds", hint=f"{fix} (then run again)")


def target_triggers(conn: Any, family: str, schema: str | None, table: str | None) -> dict[str, list[str]]:
    """``{schema.table: [trigger, ...]}`` of the triggers that would fire for this connection's
    INSERT/UPDATE/DELETE/TRUNCATE (PostgreSQL: enabled for the session's replication role;
    foreign key triggers are internal and not listed)."""
    if family == "mysql":
        db = "%s" if schema is not None else "DATABASE()"
        sql = ("SELECT EVENT_OBJECT_SCHEMA, EVENT_OBJECT_TABLE, TRIGGER_NAME FROM information_schema.TRIGGERS "
               f"WHERE EVENT_OBJECT_SCHEMA = {db}" + (" AND EVENT_OBJECT_TABLE = %s" if table else "")
               + " ORDER BY 2, ACTION_ORDER, 3")
        params = (*((schema,) if schema is not None else ()), *((table,) if table else ()))
    elif family == "postgresql":
        sql = ("SELECT n.nspname, c.relname, t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
               "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE NOT t.tgisinternal AND t.tgenabled IN "
               "('A', CASE WHEN current_setting('session_replication_role') = 'replica' THEN 'R' ELSE 'O' END) "
               "AND n.nspname = " + ("%s" if schema is not None else "current_schema()")
               + (" AND c.relname = %s" if table else "") + " ORDER BY 2, 3")
        params = (*((schema,) if schema is not None else ()), *((table,) if table else ()))
    else:
        sql = "SELECT NULL, tbl_name, name FROM sqlite_master WHERE type = 'trigger'" + \
              (" AND tbl_name = ?" if table else "") + " ORDER BY 2, 3"
        params = (table,) if table else ()
    out: dict[str, list[str]] = {}
    for db, name, trigger in conn.exec_driver_sql(sql, params).fetchall():
        out.setdefault(f"{db}.{name}" if db else name, []).append(trigger)
    return out


def _rule(rule: str) -> str:
    rule = (rule or "NO ACTION").upper()
    return "NO ACTION" if rule == "RESTRICT" else rule


def check_cascades(w: RdbWriter, expected: list[Any]) -> None:
    """Every cascading source foreign key (``pipeline.job.cascades.ExpectedFk``: its child and parent
    as (mapping, source table), resolved here to target tables) exists between
    the mapped tables with the same actions, and no foreign key between mapped tables cascades
    where the source's does not (either way the target would change rows the source did not).
    Mirrors into MySQL/MariaDB replay the source's DDL, foreign keys included: not checked."""
    from adapters.rdb.keys import current_schema, list_tables

    here = current_schema(w.conn, w.dialect.family)
    wanted: dict[tuple, Any] = {}
    for e in expected:
        child, ref = RdbTable.from_mapping(*e.child), RdbTable.from_mapping(*e.parent)
        if child.mirror_ddl and w.dialect.family == "mysql":
            continue
        info = w.info(child)
        parent = (ref.target_schema or here, ref.target_table)
        found = [fk for fk in info.fks if fk.columns == e.columns and fk.ref_columns == e.ref_columns
                 and (fk.ref_schema or info.schema or here, fk.ref_table) == parent]
        want = (_rule(e.source.on_delete), _rule(e.source.on_update))
        wanted[(info.schema or here, info.name, e.columns)] = want
        if not any((_rule(fk.on_delete), _rule(fk.on_update)) == want for fk in found):
            have = "; ".join(f"{fk.name}: ON DELETE {fk.on_delete} ON UPDATE {fk.on_update}" for fk in found) or "none"
            raise TargetMismatchError(
                f"{e.origin}: source {e.source.describe()}: target table {info.label} has no foreign key "
                f"({', '.join(e.columns)}) -> {parent[0]}.{parent[1]} ({', '.join(e.ref_columns)}) with these actions "
                f"(found: {have}); the binlog does not carry the rows a cascade changes, the target must do it",
                hint=f"ALTER TABLE {info.label} ADD FOREIGN KEY ({', '.join(e.columns)}) REFERENCES "
                     f"{parent[0]}.{parent[1]} ({', '.join(e.ref_columns)}) ON DELETE {want[0]} ON UPDATE {want[1]}")
    mapped = set()
    for m in w.mappings:
        spec = getattr(m, "spec", None)
        if spec is None or (spec.mirrorDb and w.dialect.family == "mysql"):
            continue
        for t in list_tables(w.conn, w.dialect.family, spec.target_schema) if spec.mirrorDb else [spec.table]:
            mapped.add(RdbTable.from_mapping(m, t))
    names = {(r.target_schema or here, r.target_table) for r in mapped}
    for route in mapped:
        info = w.info(route)
        for fk in info.fks:
            rules = (_rule(fk.on_delete), _rule(fk.on_update))
            if (fk.ref_schema or info.schema or here, fk.ref_table) not in names or \
                    not {"CASCADE", "SET NULL", "SET DEFAULT"} & set(rules):
                continue
            if wanted.get((info.schema or here, info.name, fk.columns)) != rules:
                raise TargetMismatchError(
                    f"{route.origin}: target foreign key {fk.name} of {info.label} ({', '.join(fk.columns)}) -> "
                    f"{fk.ref_table} ON DELETE {fk.on_delete} ON UPDATE {fk.on_update} cascades where the source's "
                    "does not: the target would change rows the source keeps",
                    hint="give the target the source's foreign key actions (or drop this foreign key)")
