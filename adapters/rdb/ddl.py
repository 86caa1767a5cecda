"""mirrorDb DDL replay on MySQL/MariaDB targets (PostgreSQL/SQLite: never replayed).

The source statement runs on the target with the source database name replaced by the
target one wherever it qualifies a name (``src.t`` / ```src`.`t```), on a connection whose
current database is the target's (unqualified names). Replays are idempotent: an error
code that means "this was applied already" for that kind of statement (table exists,
unknown table, duplicate column/key, can't drop a missing column/key, ...) is logged and
treated as done. Character columns get the collations the source gave them, named as the target
knows them (:mod:`adapters.rdb.charsets`). With a ``seq`` the statement is also recorded in the target database's
``_sluice_ddl_applied`` table and never run twice (so a replayed CREATE of a table that a
later RENAME moved away is not re-created). The record is written *before* the statement runs
(``done = 0``) and marked done after it: MySQL DDL is not transactional, and a statement can
complete on the server after its client died (a long ALTER outlives a killed driver). The DML
before a barrier committed before its DDL started, so a replay skips it as soon as the record
exists, and runs a statement that is not marked done again (its "already applied" errors count
as done). Quoted strings and comments are never rewritten.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING

from sqlalchemy.exc import SQLAlchemyError

from adapters.base import DdlChange
from adapters.rdb import charsets, dbsequence, like
from adapters.rdb.config import RdbTable
from adapters.rdb.errors import classify, db_text
from sluice_common.errors import SluiceError, TargetError
from sluice_common.logs import get_logger
from sluice_common.mysqltypes import quote_ident

if TYPE_CHECKING:
    from adapters.rdb.writer import RdbWriter

log = get_logger("rdb.ddl")
LOG_TABLE = "`_sluice_ddl_applied`"  # per target database: which DdlChange (by seq) ran already
REPLAYED = frozenset({"CREATE", "ALTER", "ERASE", "RENAME", "TRUNCATE", "CINDEX", "DINDEX",
                      *dbsequence.KINDS.values()})

_TOKEN = re.compile(r"""
    (?P<bq>`(?:[^`]|``)*`)
  | (?P<sq>'(?:[^'\\]|\\.|'')*')
  | (?P<dq>"(?:[^"\\]|\\.|"")*")
  | (?P<comment>/\*.*?\*/|--[ \t][^\n]*|\#[^\n]*)
  | (?P<word>[A-Za-z0-9_$\u0080-\U0010FFFF]+)
  | (?P<other>\s+|.)
""", re.S | re.X)


def rewrite_schema(sql: str, source_db: str, target_db: str, others: dict[str, str] | None = None) -> str:
    """Replace the database qualifier ``source_db`` by ``target_db`` (always backtick-quoted), and
    each of ``others`` (the group's other mirrored databases, e.g. a foreign key's parent) by its
    target."""
    names = {k: v for k, v in {**(others or {}), source_db: target_db}.items() if k != v}
    if not names:
        return sql
    tokens = [(m.lastgroup, m.group()) for m in _TOKEN.finditer(sql)]
    out = []
    for i, (kind, text) in enumerate(tokens):
        name = text[1:-1].replace("``", "`") if kind == "bq" else text if kind == "word" else None
        if name in names and _next_is_dot(tokens, i) and not _prev_is_dot(tokens, i):
            out.append(quote_ident(names[name]))
        else:
            out.append(text)
    return "".join(out)


def _next_is_dot(tokens: list, i: int) -> bool:
    for kind, text in tokens[i + 1:]:
        if kind == "other" and text.isspace():
            continue
        return text == "."
    return False


def _prev_is_dot(tokens: list, i: int) -> bool:
    for kind, text in reversed(tokens[:i]):
        if kind == "other" and text.isspace():
            continue
        return text == "."
    return False


def resolve(ddl: DdlChange) -> DdlChange:
    """A statement capture stores as ``QUERY`` that a mirror replays (CREATE/ALTER/DROP SEQUENCE,
    :mod:`adapters.rdb.dbsequence`) with its kind, database and object; any other as it is."""
    if ddl.kind != "QUERY" or ddl.table:
        return ddl
    found = dbsequence.statement(ddl.sql)
    if found is None:
        return ddl
    kind, database, name = found
    return replace(ddl, kind=kind, database=database or ddl.database, table=name)


#: statement kinds that change only the one table they name (``DdlChange.table``)
ONE_TABLE = frozenset({"CREATE", "ALTER", "TRUNCATE", "CINDEX", "DINDEX"})


def changed_tables(route: RdbTable | None, ddl: DdlChange) -> set[str] | None:
    """The target tables ``ddl`` can change when replayed on ``route`` (reflections of them are
    stale after it), or None for every table: a statement that may name several (RENAME, DROP),
    one without a table, or a route that does not replay DDL (the target may have been changed
    by hand alongside). ``ALTER TABLE t RENAME TO u``: ``t``; ``u`` was not there to be cached."""
    if route is None or not route.mirror_ddl or ddl.kind not in ONE_TABLE or not ddl.table:
        return None
    return {ddl.table, route.target_table}


def apply_ddl(w: RdbWriter, route: RdbTable | None, ddl: DdlChange) -> None:
    """Replay ``ddl`` when the route mirrors a database onto a MySQL/MariaDB target."""
    if w.dialect.family != "mysql":
        log.info("ddl not replayed", reason=f"{w.dialect.label} targets do not replay MySQL DDL",
                 database=ddl.database, table=ddl.table, kind=ddl.kind)
        return
    if route is None or not route.mirror_ddl:
        log.info("ddl not replayed", reason="only mirrorDb mappings replay DDL", table=ddl.table, kind=ddl.kind)
        return
    if ddl.kind not in REPLAYED:
        log.info("ddl not replayed", reason=f"statement kind {ddl.kind}", sql=ddl.sql[:200])
        return
    target_db = route.target_schema or ddl.database
    mirrors, mirrored = {}, {ddl.database}
    for m in w.mappings:
        spec = getattr(m, "spec", None)
        if spec is not None and getattr(spec, "mirrorDb", False):
            mirrored.add(spec.database)
            if spec.target_schema:
                mirrors[spec.database] = spec.target_schema
    sql = rewrite_schema(ddl.sql, ddl.database, target_db, mirrors)
    outside = like.foreign(ddl, mirrored)  # CREATE TABLE ... LIKE a table no mirror of this target has
    qdb = quote_ident(target_db)
    mark = (ddl.database, "%d.%d.%d" % ddl.seq, hashlib.sha1(ddl.sql.encode()).hexdigest())
    engine = w.engine()
    home = engine.url.database  # the connection's own database, set again after the statement
    conn = engine.connect().execution_options(isolation_level="AUTOCOMMIT")
    restored = done = False
    try:
        cur = conn.connection.dbapi_connection.cursor()  # no parameter interpolation: '%' stays '%'
        try:
            if ddl.seq != (0, 0, 0):
                _ledger(cur, engine, target_db)
                cur.execute(f"SELECT done FROM {qdb}.{LOG_TABLE} WHERE source_db = %s AND seq = %s AND sql_sha1 = %s",
                            mark)
                found = cur.fetchone()
                if found and found[0]:
                    log.info("ddl already applied", database=target_db, table=ddl.table, kind=ddl.kind, seq=mark[1])
                    done, restored = True, bool(home)  # still in its own database: nothing was USEd
                    return
                if found:
                    log.warning("ddl replayed again: an earlier replay of it was interrupted", database=target_db,
                                table=ddl.table, kind=ddl.kind, seq=mark[1])
                else:  # recorded before it runs: the DML before this barrier has committed
                    cur.execute(f"INSERT INTO {qdb}.{LOG_TABLE} (source_db, seq, sql_sha1, scope, done) "
                                "VALUES (%s, %s, %s, %s, 0)", (*mark, _scope(w)))
            cur.execute("USE " + qdb)
            if getattr(conn.dialect, "is_mariadb", False):  # the source ran it, so it allowed it: an
                cur.execute("SET SESSION system_versioning_alter_history = KEEP")  # ALTER of a versioned table
            collate = None
            if ddl.kind in ("CREATE", "ALTER", "CINDEX"):  # collations as the source understood them
                source = w.source_charsets() if w.source_charsets is not None and ddl.kind != "CINDEX" else None
                have = charsets.target_collations(cur, w.target)
                sql = charsets.rewrite(sql, ddl.kind, ddl.database, source, have, ddl.table)
                collate = partial(charsets.rewrite, kind="CREATE", database=ddl.database, source=source, have=have,
                                  table=ddl.table)  # for a LIKE's scratch definition (adapters/rdb/like.py)
            zone = w.ddl_time_zone(ddl) if w.ddl_time_zone is not None else ddl.time_zone
            if zone:  # TIMESTAMP literals mean an instant in the source's zone
                _time_zone(w, cur, ddl, zone)
            if ddl.es:  # the source's clock: CURRENT_TIMESTAMP in the statement is its start time
                cur.execute(f"SET SESSION timestamp = {statement_time(ddl)}")
            try:
                if outside is not None:
                    like.replay(w, cur, ddl, sql, target_db, outside, collate)
                else:
                    cur.execute(sql)
                    log.info("ddl replayed", database=target_db, table=ddl.table, kind=ddl.kind)
            except Exception as e:  # noqa: BLE001 - a raw DBAPI error: classified below
                if not w.dialect.is_ddl_applied(ddl.kind, e):
                    raise
                log.info("ddl already applied", database=target_db, table=ddl.table, kind=ddl.kind,
                         error=db_text(e, w.dialect))
            if ddl.es:  # the ledger's applied_at is this machine's time
                cur.execute("SET SESSION timestamp = DEFAULT")
            if ddl.seq != (0, 0, 0):
                cur.execute(f"UPDATE {qdb}.{LOG_TABLE} SET done = 1, applied_at = CURRENT_TIMESTAMP(6) "
                            "WHERE source_db = %s AND seq = %s AND sql_sha1 = %s", mark)
            done = True
            restored = _home(cur, home, w)
        finally:
            cur.close()
    except SluiceError:  # a refused collation, an unreachable source: said already
        raise
    except Exception as e:  # noqa: BLE001 - a raw DBAPI error: classified below
        err = classify(e, w.target, table=f"{target_db}.{ddl.table}", action=f"replay {ddl.kind} DDL on",
                       hint=f"the statement was: {sql[:300]}")
        err.table = f"{ddl.database}.{ddl.table}"
        raise err from None
    finally:
        if not restored:
            try:
                conn.invalidate()  # its current database changed: never hand it back to the pool
            except SQLAlchemyError:
                pass
        _forget_ledger_on_error(engine, target_db, done)
        conn.close()


def _time_zone(w: RdbWriter, cur, ddl: DdlChange, zone: str) -> None:
    """The session zone ``zone`` for the statement. A statement that used no zone (``ddl.time_zone``
    empty, and the event's status variables were read whole: the binlog named none) gives the same
    result in any zone: a zone the target does not know (no time zone tables) leaves its session in
    UTC then. One the statement used, or may have used (a block not read whole, a store written
    before that was recorded), is refused."""
    try:
        cur.execute("SET SESSION time_zone = %s", (zone,))
    except Exception as e:  # noqa: BLE001 - a raw DBAPI error: the zone is unknown to the target
        if w.dialect.error_code(e) != 1298:  # ER_UNKNOWN_TIME_ZONE
            raise
        if not ddl.time_zone and ddl.zone_read:
            log.info("replaying ddl in UTC: the target does not know the source's zone, which the statement "
                     "did not use", zone=zone, database=ddl.database, table=ddl.table)
            return
        err = TargetError(f"replaying `{ddl.sql[:200]}` needs the source's time zone {zone}, which "
                          f"{w.target.label} does not know (its time zone tables are not loaded)",
                          hint="load them on the target: mariadb-tzinfo-to-sql /usr/share/zoneinfo | mariadb mysql "
                               "(MySQL: mysql_tzinfo_to_sql), then sync again")
        err.table = f"{ddl.database}.{ddl.table}"
        raise err from None


def _scope(w: RdbWriter) -> str:
    return w.progress.scope if w.progress is not None else ""


#: (engine, target database) whose DDL ledger this process created or brought up to date
_LEDGERS: set[tuple[int, str]] = set()


def _ledger(cur, engine, target_db: str) -> None:
    """The target database's DDL ledger, made or brought up to date once per process (a run of a
    thousand CREATE TABLEs would ask for it a thousand times)."""
    key = (id(engine), target_db)
    if key in _LEDGERS:
        return
    qdb = quote_ident(target_db)
    cur.execute(f"CREATE TABLE IF NOT EXISTS {qdb}.{LOG_TABLE} (source_db VARCHAR(64) NOT NULL, "
                "seq VARCHAR(64) NOT NULL, sql_sha1 CHAR(40) NOT NULL, applied_at TIMESTAMP(6) NOT NULL "
                "DEFAULT CURRENT_TIMESTAMP(6), scope VARCHAR(190) NOT NULL DEFAULT '', "
                "done TINYINT NOT NULL DEFAULT 1, PRIMARY KEY (source_db, seq, sql_sha1)) ENGINE=InnoDB")
    _add_columns(cur, target_db)
    _LEDGERS.add(key)


def _home(cur, home: str | None, w: RdbWriter) -> bool:
    """Back to the connection's own database and session (the replay's time zone undone),
    so the pool may hand it out again (a new connection costs a login and a TLS context); False when
    it cannot be (no database in the URL, or the statement dropped it): the connection is then
    discarded."""
    if not home:
        return False
    try:
        cur.execute("USE " + quote_ident(home))
        for stmt in w.dialect.session_sql:  # the time zone (the clock was reset before the ledger's update)
            cur.execute(stmt)
    except Exception:  # noqa: BLE001 - discarded instead
        return False
    return True


def statement_time(ddl: DdlChange) -> str:
    """The statement's start on the source's clock as ``SET timestamp`` takes it: the event's
    seconds and, when the binlog recorded them, its microseconds (else ``es``'s milliseconds)."""
    usec = ddl.usec if ddl.usec is not None else ddl.es % 1000 * 1000
    return f"{ddl.es // 1000}.{usec:06d}"


def _forget_ledger_on_error(engine, target_db: str, ok: bool) -> None:
    """A statement that failed may have been the ledger's own (dropped by someone, its database
    gone): the next DDL makes sure of it again."""
    if not ok:
        _LEDGERS.discard((id(engine), target_db))


def _add_columns(cur, target_db: str) -> None:
    """Ledgers made before the scope and the done mark were recorded get the columns (their rows
    keep scope '' and count as done: they were written after their statement)."""
    cur.execute("SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = "
                "'_sluice_ddl_applied'", (target_db,))
    have = {r[0] for r in cur.fetchall()}
    qdb = quote_ident(target_db)
    if "scope" not in have:
        cur.execute(f"ALTER TABLE {qdb}.{LOG_TABLE} ADD COLUMN scope VARCHAR(190) NOT NULL DEFAULT ''")
    if "done" not in have:
        cur.execute(f"ALTER TABLE {qdb}.{LOG_TABLE} ADD COLUMN done TINYINT NOT NULL DEFAULT 1")


def last_applied(w: RdbWriter, route: RdbTable, database: str, scoped: bool = False) -> tuple[int, ...] | None:
    """The position of the newest statement of source ``database`` the target database's DDL
    ledger records (None: no ledger, nothing replayed there). ``scoped``: only statements this
    writer's scope (store and group) replayed -- positions of another store mean nothing here."""
    target_db = route.target_schema or database
    qdb = quote_ident(target_db)
    if scoped and not _scope(w):
        return None
    conn = w.engine().connect()
    try:
        cur = conn.connection.dbapi_connection.cursor()
        try:
            if scoped:
                cur.execute(f"SELECT seq FROM {qdb}.{LOG_TABLE} WHERE source_db = %s AND scope = %s",
                            (database, _scope(w)))
            else:
                cur.execute(f"SELECT seq FROM {qdb}.{LOG_TABLE} WHERE source_db = %s", (database,))
            seqs = [tuple(int(x) for x in r[0].split(".")) for r in cur.fetchall()]
        except Exception:  # noqa: BLE001 - no ledger table: nothing was replayed here
            return None
        finally:
            cur.close()
    finally:
        conn.close()
    return max(seqs) if seqs else None


def applied_after(w: RdbWriter, route: RdbTable, change) -> bool:
    """True if the DDL ledger of the target database records a statement of the change's
    source database that came after the change (so the change is a replay of history)."""
    last = last_applied(w, route, change.database)
    return last is not None and last > tuple(change.seq)
