"""``CREATE TABLE t LIKE other.s`` on a mirror, where ``other`` is a database no mapping of the
target mirrors.

A mirror replays DDL with the source database renamed to the target's (:mod:`adapters.rdb.ddl`),
and a LIKE that names another mirrored database of the same target is rewritten to that one's
target database. A LIKE naming any other database names a table the target does not have, and
the statement, replayed verbatim, failed on every run (``1146: Table 'other.s' doesn't exist``).
Its effect -- a table defined as ``other.s`` was at that moment -- is replayed exactly when the job
read that definition from the source and could prove it unchanged since the statement
(``DdlChange.like``, :mod:`pipeline.job.definitions`): the definition is created under a
scratch name in the target database (its foreign keys left out: ``LIKE`` copies none) and the
statement runs against it, so the server's own ``LIKE`` rules apply (indexes, defaults, CHECK
constraints, partitioning copied; no AUTO_INCREMENT counter), then the scratch table is dropped.
Otherwise the sync stops, naming the statement, its position and the table -- unless the target
table exists already (made by hand as the refusal's fix says), which counts as applied.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from adapters.base import DdlChange
from sluice_common.errors import TargetError
from sluice_common.logs import get_logger
from sluice_common.mysqlddl import like_source
from sluice_common.mysqltypes import quote_ident

if TYPE_CHECKING:
    from adapters.rdb.writer import RdbWriter

log = get_logger("rdb.ddl")
_HEAD = re.compile(r"\ACREATE TABLE (`(?:[^`]|``)+`)")


def foreign(ddl: DdlChange, mirrored: set[str]) -> tuple[str, str, int, int] | None:
    """The LIKE source of ``ddl`` when it is in a database outside ``mirrored`` (and not the
    statement's own), else None."""
    found = like_source(ddl.sql) if ddl.kind == "CREATE" else None
    if found is None or found[0] is None or found[0] == ddl.database or found[0] in mirrored:
        return None
    return found[0], found[1], found[2], found[3]


def without_foreign_keys(definition: str) -> str:
    """A ``SHOW CREATE TABLE`` text without its FOREIGN KEY constraints (one per line there)."""
    lines = definition.split("\n")
    kept = [line for line in lines if not re.match(r"\s+CONSTRAINT .* FOREIGN KEY \(", line)]
    if len(kept) == len(lines):
        return definition
    for i, line in enumerate(kept):  # the last item before the closing line loses its comma
        if line.startswith(")") and i and kept[i - 1].endswith(","):
            kept[i - 1] = kept[i - 1][:-1]
    return "\n".join(kept)


def replay(w: RdbWriter, cur, ddl: DdlChange, sql: str, target_db: str, source: tuple[str, str, int, int],
           collate: Callable[[str], str] | None = None) -> None:
    """Run ``sql`` (the rewritten statement, LIKE source at ``source[2:4]`` of ``ddl.sql``) on the open
    target cursor (current database: ``target_db``) as described in the module docstring; ``collate``
    gives the scratch definition the collations the target knows (:func:`adapters.rdb.charsets.rewrite`)."""
    db, table = source[0], source[1]
    definition, problem = ddl.like or ("", "the job did not read its definition from the source")
    if definition:
        scratch = "_sluice_like_" + hashlib.sha1(f"{ddl.sql}{ddl.seq}".encode()).hexdigest()[:12]
        head = _HEAD.match(definition)
        if head is None:
            raise TargetError(f"unexpected SHOW CREATE TABLE text for {db}.{table}: {definition[:200]}")
        body = without_foreign_keys(f"CREATE TABLE {quote_ident(scratch)}{definition[head.end():]}")
        if collate is not None:
            body = collate(body)
        # the statement's own text is ddl.sql; ``sql`` is it rewritten, which leaves the foreign name alone
        ref = ddl.sql[source[2]:source[3]]
        at = sql.rfind(ref)
        run = sql[:at] + quote_ident(scratch) + sql[at + len(ref):]
        cur.execute(f"DROP TABLE IF EXISTS {quote_ident(scratch)}")
        _in_utc(cur, body)
        try:
            cur.execute(run)
        finally:
            cur.execute(f"DROP TABLE IF EXISTS {quote_ident(scratch)}")
        log.info("ddl replayed", database=target_db, table=ddl.table, kind=ddl.kind,
                 like=f"{db}.{table} (its definition as the source has it, unchanged since the statement)")
        return
    cur.execute("SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                (target_db, ddl.table))
    if cur.fetchone() is not None:
        log.info("ddl already applied", database=target_db, table=ddl.table, kind=ddl.kind,
                 reason="the table exists (made by hand for a CREATE ... LIKE the job could not replay)")
        return
    where = f"batch {ddl.seq[0]} seq {ddl.seq[1]}" if ddl.seq != (0, 0, 0) else "position unknown"
    err = TargetError(
        f"cannot replay `{ddl.sql[:300]}` ({ddl.database}, {where}) on {w.target.label}: it copies {db}.{table}, "
        f"a table of a database no mapping of this target mirrors, and its definition at that moment is not "
        f"known ({problem})",
        hint=f"create {target_db}.{ddl.table} on the target as the source created it (e.g. from SHOW CREATE TABLE "
             f"{ddl.database}.{ddl.table} on the source, if no later DDL changed it), then sync again: a table that "
             "exists counts as this statement applied")
    err.table = f"{ddl.database}.{ddl.table}"
    raise err


def _in_utc(cur, body: str) -> None:
    """Run the scratch definition in UTC, the zone its text was read in (pipeline/job/definitions.py
    reads ``SHOW CREATE TABLE`` in a UTC session, which prints TIMESTAMP defaults in UTC), not in the
    statement's zone (adapters/rdb/ddl.py set it for the LIKE): in that zone the defaults would be
    other instants."""
    cur.execute("SELECT @@session.time_zone")
    zone = cur.fetchone()[0]
    cur.execute("SET SESSION time_zone = '+00:00'")
    try:
        cur.execute(body)
    finally:
        cur.execute("SET SESSION time_zone = %s", (zone,))
