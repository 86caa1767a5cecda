"""A source table's definition as a DDL statement copied it, when that can be proved.

``CREATE TABLE t LIKE other.s`` copies ``other.s`` as it was at that moment; a mirror that does not
cover ``other`` has no copy of it (adapters/rdb/like.py; the statement is parsed by
sluice_common/mysqlddl.py). The source's ``SHOW CREATE TABLE other.s`` gives its definition *now*,
which is the one the statement copied when nothing changed it since: MariaDB and MySQL set a
table's ``information_schema.TABLES.CREATE_TIME`` anew on every statement that changes its
definition (CREATE, ALTER of any kind, RENAME into the name), so a CREATE_TIME before the second
the statement ran (the binlog event's timestamp) proves it. A CREATE_TIME in
that second or later -- the table was created, altered or renamed around or after the statement
-- proves nothing, and the mirror refuses the statement by name instead of guessing.
"""

from __future__ import annotations

from dataclasses import replace

import pymysql

from adapters.base import DdlChange
from pipeline.config import SourceConfig
from pipeline.source.connect import connect
from sluice_common.logs import get_logger
from sluice_common.mysqlconn import UTC_SESSION
from sluice_common.mysqlddl import like_source
from sluice_common.mysqltypes import quote_ident

log = get_logger("sync")


def with_like_definition(source: SourceConfig, ddl: DdlChange) -> DdlChange:
    """``ddl`` with ``like`` set when it is a ``CREATE TABLE ... LIKE`` of another database's table
    (see the module docstring); any other statement as it is."""
    found = like_source(ddl.sql) if ddl.kind == "CREATE" else None
    if found is None or found[0] is None or found[0] == ddl.database:
        return ddl
    db, table = found[0], found[1]
    try:
        conn = connect(source, session=(UTC_SESSION,), hint="the source is needed to read the definition of "
                       f"{db}.{table}, which a CREATE TABLE ... LIKE copies")
    except Exception as e:  # noqa: BLE001 - a SourceError: the statement is refused with the reason
        return replace(ddl, like=("", f"the source could not be reached to read it: {str(e).splitlines()[0]}"))
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT UNIX_TIMESTAMP(CREATE_TIME) FROM information_schema.TABLES "
                        "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s", (db, table))
            row = cur.fetchone()
            if row is None:
                return replace(ddl, like=("", f"{db}.{table} no longer exists on the source"))
            changed = None if row[0] is None else int(row[0])
            if not ddl.es or changed is None or changed >= ddl.es // 1000:
                when = "unknown" if changed is None else f"at {changed} (Unix time)"
                return replace(ddl, like=("", f"{db}.{table} was last created, altered or renamed {when}, not before "
                                              f"the statement ran at {ddl.es // 1000}"))
            cur.execute(f"SHOW CREATE TABLE {quote_ident(db)}.{quote_ident(table)}")
            definition = cur.fetchone()[1]
    except pymysql.MySQLError as e:
        return replace(ddl, like=("", f"reading it from the source failed: {e}"))
    finally:
        conn.close()
    log.info("like source read", database=ddl.database, table=ddl.table, like=f"{db}.{table}")
    return replace(ddl, like=(definition, ""))
