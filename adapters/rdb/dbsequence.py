"""MariaDB sequences (``CREATE SEQUENCE``) on the targets -- not to be confused with
:mod:`adapters.rdb.sequence`, the order in which a chunk's changes run.

What the binlog carries for a sequence ``s`` (MariaDB 10.3+):

* ``CREATE/ALTER/DROP SEQUENCE`` as statements (capture stores them as ``QUERY`` DDL with no
  table: :func:`statement` finds the verb and the sequence); ``DROP TABLE``/``RENAME TABLE`` of a
  sequence as the table DDL they are;
* every change of its state -- a ``NEXTVAL`` that refills the cache, ``SETVAL`` -- as a row
  INSERT into ``s`` holding the whole row: ``next_not_cached_value, minimum_value, maximum_value,
  start_value, increment, cache_size, cycle_option, cycle_count`` (:data:`COLUMNS`). The values
  handed out from the cache in between are not logged; the row is the sequence's state.

A MySQL/MariaDB mirror replays the statements (:mod:`adapters.rdb.ddl`), and a row INSERT into a
sequence replaces its one row there, so the target's row ends equal to the source's: the
ordinary INSERT path does it (a sequence has no key: its changes stay in one partition, in
order). PostgreSQL (which never replays MySQL DDL, :mod:`adapters.rdb.ddl`): a row whose target has no
table of that name sets the target *sequence* of that name with ``setval(s, next, false)`` (the
next ``nextval`` returns ``next_not_cached_value``, as MariaDB's would); its increment, bounds,
start, cache and cycle option are its definition, which the user creates as for a table, and
``cycle_count`` has no PostgreSQL counterpart. SQLite has no sequences: refused.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from sqlalchemy.exc import DBAPIError

from adapters.base import Change
from adapters.rdb.config import RdbTable
from adapters.rdb.errors import classify
from sluice_common.errors import TargetError
from sluice_common.logs import get_logger
from sluice_common.mysqlddl import IDENT, statement_start, unquote

if TYPE_CHECKING:
    from adapters.rdb.writer import RdbWriter

log = get_logger("rdb")
COLUMNS = ("next_not_cached_value", "minimum_value", "maximum_value", "start_value", "increment", "cache_size",
           "cycle_option", "cycle_count")
_SEQUENCE = re.compile(rf"(CREATE|ALTER|DROP)\s+(?:OR\s+REPLACE\s+)?(?:TEMPORARY\s+)?SEQUENCE\s+"
                       rf"(?:IF\s+(?:NOT\s+)?EXISTS\s+)?({IDENT})(?:\s*\.\s*({IDENT}))?", re.I)
#: the DdlChange kind a sequence statement is replayed as (its "already applied" errors: dialects.py)
KINDS = {"CREATE": "CSEQUENCE", "ALTER": "ASEQUENCE", "DROP": "DSEQUENCE"}


def statement(sql: str) -> tuple[str, str | None, str] | None:
    """``(kind, database or None, sequence)`` of a CREATE/ALTER/DROP SEQUENCE statement (the first
    sequence it names), else None."""
    m = _SEQUENCE.match(sql, statement_start(sql))
    if m is None:
        return None
    first, second = unquote(m.group(2)), m.group(3)
    if second is not None:
        return KINDS[m.group(1).upper()], first, unquote(second)
    return KINDS[m.group(1).upper()], None, first


def is_state(change: Change) -> bool:
    """Whether a row change has exactly a MariaDB sequence's columns (the row of its state)."""
    return change.kind == "INSERT" and len(change.data) == len(COLUMNS) and all(c in change.data for c in COLUMNS)


def apply_states(w: RdbWriter, route: RdbTable, run: list[Change]) -> None:
    """PostgreSQL/SQLite: set the target sequence to the last state of ``run`` (see the module docstring)."""
    source = f"{run[0].database}.{run[0].table}"
    if w.dialect.family != "postgresql":
        raise TargetError(f"{route.origin + ': ' if route.origin else ''}{source} is a MariaDB sequence: "
                          f"{w.dialect.label} has no sequences to mirror its state into",
                          hint="leave the sequence out of the mapping (mirror into MySQL/MariaDB or PostgreSQL)")
    schema = route.target_schema or w.conn.exec_driver_sql("SELECT current_schema()").scalar()
    row = w.conn.exec_driver_sql("SELECT 1 FROM pg_sequences WHERE schemaname = %s AND sequencename = %s",
                                 (schema, route.target_table)).fetchone()
    label = f"{schema}.{route.target_table}"
    if row is None:
        err = TargetError(f"{route.origin + ': ' if route.origin else ''}target table or sequence {label} does not "
                          f"exist on {w.target.label} ({source} has a MariaDB sequence's columns: its state is "
                          "mirrored into a sequence)",
                          hint=f"CREATE SEQUENCE {label} {_options(run[-1].data)} (then sync again)")
        err.missing_table = True
        raise err
    state = run[-1].data
    name = ".".join('"' + n.replace('"', '""') + '"' for n in (schema, route.target_table))
    try:
        w.exec("SELECT setval(CAST(%s AS regclass), %s, false)", (name, int(state["next_not_cached_value"])))
    except DBAPIError as e:
        raise classify(e, w.target, table=label, action="set the sequence") from None
    w.stats.inserted[source] += len(run)
    log.debug("sequence set", sequence=label, next=state["next_not_cached_value"])


def _options(state: dict) -> str:
    cycle = "CYCLE" if state["cycle_option"] not in ("0", None) else "NO CYCLE"
    return (f"INCREMENT BY {state['increment']} MINVALUE {state['minimum_value']} MAXVALUE {state['maximum_value']} "
            f"START WITH {state['start_value']} {cycle}")
