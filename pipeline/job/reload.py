"""How to bring a mirror's missing target tables over: their definitions copied from the source,
then their rows, with the pending batches applied after that.

A mirror (``dbMapping.mirrorDb``) creates its tables by replaying the source's DDL. A table whose
``CREATE TABLE`` came before the store's first batch (or whose database on the target is new or
was dropped) is never created that way: replaying cannot make it, and every change of it fails.
These hints name the commands that make it, on the driver, where the source and the target are
known: the target database gone (the pre-flight, :func:`database_hint`) or some of its tables
(the pre-flight of :mod:`pipeline.job.mirrorcheck`, a failed segment and a repair,
:func:`tables_hint`). MySQL/MariaDB targets only: the only ones a mirror replays DDL into."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

from pipeline.job.collations import connect_source
from pipeline.mapping import DbMapping
from pipeline.source import catalog
from sluice_common.mysqltypes import quote_ident

if TYPE_CHECKING:
    from pipeline.job.group import GroupPlan


def _dump(plan: GroupPlan, target: Any, schema: str, source_db: str, tables: tuple[str, ...] = ()) -> str:
    """The ``mysqldump --no-data`` of the tables' definitions into the target database (never a
    ``DROP TABLE``: a table the target has keeps its rows)."""
    src, q = plan.config.source, shlex.quote
    names = "".join(f" {q(t)}" for t in tables)
    return (f"mysqldump --no-data --skip-triggers --skip-add-drop-table -h {q(src.host)} -P {src.port} -u "
            f"{q(src.user)} {q(source_db)}{names} | mysql -h {q(target.host or 'localhost')} -P "
            f"{target.port or 3306} -u {q(target.username or '')} {q(schema)} (give each server's password: -p or "
            "MYSQL_PWD)")


def database_hint(plan: GroupPlan, target: Any, schema: str, file: str, source_db: str) -> str:
    """How to bring back a mirror's target database that is gone (dropped, a new server): create it
    with the source tables' definitions (their DDL is history in acked batches: replaying cannot
    create them), then load their rows; the pending batches are applied after that."""
    q = shlex.quote
    return (f"CREATE DATABASE {quote_ident(schema)} on {target.label}; copy the tables' definitions from the "
            f"source: {_dump(plan, target, schema, source_db)}; then load their rows: sluice etl --config "
            f"{q(plan.config.file)} --group {q(plan.group_id)} --mapping {q(file)}")


def tables_hint(plan: GroupPlan, target: Any, schema: str, source_db: str, tables: tuple[str, ...],
                keyless: tuple[str, ...] = ()) -> str:
    """How to bring over tables a mirror's target database lacks: their definitions copied from the
    source, then their rows by ``sluice repair`` of just those tables; sync again after that (the
    pending changes then apply over rows at least as new, and converge). ``keyless``: those of
    ``tables`` without a primary key, which a repair cannot load (a reload of the group can)."""
    q = shlex.quote
    keyed = [t for t in tables if t not in keyless]
    only = " ".join(f"--table {q(f'{source_db}.{t}')}" for t in keyed)
    rows = (f"then load the rows: sluice repair --config {q(plan.config.file)} --group {q(plan.group_id)} {only}; "
            "then sync again") if keyed else "then sync"
    if keyless:
        rows += (f"; {', '.join(keyless)} {'have' if len(keyless) > 1 else 'has'} no primary key, so a repair "
                 f"cannot load {'them' if len(keyless) > 1 else 'it'}: load the group again with `sluice bootstrap "
                 f"--config {q(plan.config.file)} --force` while nothing writes to the source")
    return (f"copy the definition{'s' if len(tables) > 1 else ''} from the source: "
            f"{_dump(plan, target, schema, source_db, tables)}; {rows}")


def keyless_tables(plan: GroupPlan, database: str, tables: tuple[str, ...]) -> tuple[str, ...]:
    """Those of ``tables`` without a primary key on the source (asked of it now)."""
    conn = connect_source(plan.config)
    try:
        with conn.cursor() as cur:
            return tuple(t for t in tables if not any(c.key == "PRI" for c in catalog.columns(cur, database, t)))
    finally:
        conn.close()


def mirror_of(plan: GroupPlan, database: str, table: str) -> tuple[Any, str] | None:
    """``(target, target database)`` of the mirror mapping of ``plan`` that holds source table
    ``database.table`` in a MySQL/MariaDB target; None when no mirror does (a table mapping, or a
    target a mirror replays no DDL into: their own hints stand)."""
    for i, m in enumerate(plan.mappings):
        spec = m.spec
        if isinstance(spec, DbMapping) and spec.mirrorDb and m.matches(database, table):
            target = plan.targets[plan.mapping_target[i]][1]
            if getattr(target, "dialect", None) not in ("mysql", "mariadb"):
                return None
            return target, spec.target_schema or database
    return None


def missing_table_error(plan: GroupPlan, error: str, source_table: str | None) -> str:
    """A failed partition's ``error`` (message and fix) for a change whose target table does not
    exist: a mirrored table gets :func:`tables_hint` as its fix; any other keeps its own."""
    if not source_table or "." not in source_table:
        return error
    database, table = source_table.split(".", 1)
    found = mirror_of(plan, database, table)
    if found is None:
        return error
    target, schema = found
    try:
        keyless = keyless_tables(plan, database, (table,))
    except Exception:  # noqa: BLE001 - the source unreachable: the fix as for a keyed table
        keyless = ()
    hint = tables_hint(plan, target, schema, database, (table,), keyless)
    return error.split("\n  fix:", 1)[0] + "\n  fix: " + hint
