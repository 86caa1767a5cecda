"""Where a relational target stands in its source's binlog, recorded with the rows it holds.

A batch store can be lost (a wrong ``store.path``, a new disk, a cleanup script); a new one would
start capture at the source's current position, and every change made meanwhile would never reach
the targets. So each chunk a sync commits also records, **in the same transaction**, the binlog
position its round started at, in ``_sluice_applied`` beside the tables it wrote (same database or
schema: a backup of the database restores both together):

``source`` (the config's ``source.name``), ``grp`` (the group), ``part`` (the Spark partition:
each partition its own row, so partitions never wait on each other), ``position`` (JSON:
``logfile``, ``logpos``, ``gtid``, ...), ``server`` (the source's ``host:port``), ``store_id`` and
``batch_id`` (the round's first batch), ``updated_at``.

The round's start position is a floor: every change before it was applied and acked by every
partition of the group (the round after an ack), so capture can resume there and replays at most
one round, which is idempotent. A target a round wrote to holds that round's record, committed
with the rows. ``sluice bootstrap`` records its snapshot position (``part`` -1) once the load is done.
A new store reads these records before it would start at "now" (pipeline/capture/fresh.py).
"""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING, Any

from sqlalchemy.exc import DBAPIError

from adapters.base import AppliedFrom

if TYPE_CHECKING:
    from adapters.rdb.writer import RdbWriter

TABLE = "_sluice_applied"
_created: set[tuple] = set()  # (target, schema) whose table this process made sure of


class Applied:
    """One writer's record: the schemas its open transaction wrote, written before it commits."""

    def __init__(self, writer: RdbWriter, mark: AppliedFrom, part: int):
        self.w, self.mark, self.part = writer, mark, part
        self._schemas: set[str | None] = set()

    def wrote(self, schema: str | None) -> None:
        self._schemas.add(schema)

    def write(self) -> None:
        """Upsert this partition's row in each schema written (inside the open transaction)."""
        for schema in sorted(self._schemas, key=lambda s: s or ""):
            ensure_table(self.w, schema)
            upsert(self.w, schema, self.mark, self.part)

    def clear(self) -> None:
        self._schemas.clear()


def _table(w: RdbWriter, schema: str | None) -> str:
    q = w.sql.q
    return f"{q(schema)}.{q(TABLE)}" if schema else q(TABLE)


def _ddl(w: RdbWriter, schema: str | None) -> str:
    text = "VARCHAR(190)" if w.dialect.family == "mysql" else "TEXT"
    big = "VARCHAR(2000)" if w.dialect.family == "mysql" else "TEXT"
    return (f"CREATE TABLE IF NOT EXISTS {_table(w, schema)} (source {text} NOT NULL, grp {text} NOT NULL, "
            f"part INTEGER NOT NULL, position {big} NOT NULL, server {text} NOT NULL, store_id {text} NOT NULL, "
            f"batch_id BIGINT NOT NULL, updated_at {text} NOT NULL, PRIMARY KEY (source, grp, part))")


def forget() -> None:
    """Make sure of the tables again (a schema may have been dropped and made again since)."""
    _created.clear()


def ensure_table(w: RdbWriter, schema: str | None) -> None:
    """Create the table once per process and schema, on a connection of its own (MySQL commits
    around DDL: the chunk's open transaction must stay intact); SQLite in the transaction."""
    key = (w.target, schema)
    if key in _created:
        return
    if w.dialect.family == "sqlite":
        w.exec(_ddl(w, schema), ())
    else:
        with w.engine().connect() as conn:
            try:
                conn.exec_driver_sql(_ddl(w, schema))
                conn.commit()
            except DBAPIError as e:  # created concurrently by another partition: fine if it is there now
                conn.rollback()
                try:
                    conn.exec_driver_sql(f"SELECT 1 FROM {_table(w, schema)} WHERE 1 = 0").fetchall()
                    conn.rollback()
                except DBAPIError:
                    from adapters.rdb.errors import classify

                    raise classify(e, w.target, table=_table(w, schema), action="create",
                                   hint="the target user needs CREATE there for Sluice's record of where the target "
                                   f"stands (docs/rdb.md), or create it: {_ddl(w, schema)}") from None
    _created.add(key)


def upsert(w: RdbWriter, schema: str | None, mark: AppliedFrom, part: int) -> None:
    """This partition's row, in the writer's open transaction."""
    ph = w.sql.ph
    cols = "(source, grp, part, position, server, store_id, batch_id, updated_at)"
    if w.dialect.family == "mysql":
        tail = ("ON DUPLICATE KEY UPDATE position = VALUES(position), server = VALUES(server), "
                "store_id = VALUES(store_id), batch_id = VALUES(batch_id), updated_at = VALUES(updated_at)")
    else:
        tail = ("ON CONFLICT (source, grp, part) DO UPDATE SET position = EXCLUDED.position, server = "
                "EXCLUDED.server, store_id = EXCLUDED.store_id, batch_id = EXCLUDED.batch_id, "
                "updated_at = EXCLUDED.updated_at")
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    w.exec(f"INSERT INTO {_table(w, schema)} {cols} VALUES ({', '.join([ph] * 8)}) {tail}",
           (mark.source, mark.group, part, mark.position, mark.server, mark.store_id, mark.batch, now))


def read(w: RdbWriter, schema: str | None, source: str) -> list[dict[str, Any]]:
    """The records of ``source`` in ``schema`` (none when the table is not there)."""
    sql = (f"SELECT grp, part, position, server, store_id, batch_id, updated_at FROM {_table(w, schema)} "
           f"WHERE source = {w.sql.ph}")
    with w.engine().connect() as conn:
        try:
            rows = conn.exec_driver_sql(sql, (source,)).fetchall()
        except DBAPIError:  # no such table (or schema): nothing was applied there
            return []
        finally:
            conn.rollback()
    out = []
    for grp, part, position, server, store_id, batch, at in rows:
        try:
            pos = json.loads(position)
        except ValueError:
            continue
        out.append({"group": grp, "part": int(part), "position": pos, "server": server, "store_id": store_id,
                    "batch": int(batch), "at": at, "schema": schema})
    return out


def schemas(w: RdbWriter) -> list[str | None]:
    """The schemas the writer's mappings write to (None: the connection's own database)."""
    out: list[str | None] = []
    for m in w.mappings:
        spec = getattr(m, "dbMapping", None) or m
        if getattr(spec, "mirrorDb", False):
            schema = spec.target_schema
        elif hasattr(spec, "target"):
            schema = spec.target()[0]
        else:  # an RdbTable
            schema = getattr(spec, "target_schema", None)
        if schema not in out:
            out.append(schema)
    return out


def records(w: RdbWriter, source: str) -> list[dict[str, Any]]:
    """What ``_sluice_applied`` of the writer's schemas records for ``source`` (TargetError when the
    target cannot be reached)."""
    w._connect(preflight=True).close()  # reachable, and the writer's SQL builder is set up
    return [r for schema in schemas(w) for r in read(w, schema, source)]


def record(w: RdbWriter, mark: AppliedFrom, part: int = -1) -> None:
    """Record ``mark`` in every schema of the writer's mappings, in a transaction of its own
    (``sluice bootstrap``: the snapshot's position, once the load is done)."""
    from adapters.rdb.errors import classify

    w.open()
    try:
        for schema in schemas(w):
            ensure_table(w, schema)
            upsert(w, schema, mark, part)
        w.conn.commit()
    except DBAPIError as e:
        w.rollback()
        raise classify(e, w.target, table=TABLE, action="record the position in") from None
    finally:
        w.close()
