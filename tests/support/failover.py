"""Helpers for the tests of a source that changes under Sluice (tests/e2e/test_source_replaced.py,
tests/e2e/test_failover.py): a ``mirrorDb`` deployment from a private server
(tests/support/replicas.py) into a suite target, the seeded key-conflicts workload
(tests/support/workloads.py), the stored position, and a binlog grown to an exact offset.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import yaml

from pipeline.config import load_config
from pipeline.store.files import BatchStore
from tests.support import sysbench, workloads
from tests.support.capture_check import mark_start
from tests.support.compare import diff_databases
from tests.support.deploy import rdb_adapter, write_deployment
from tests.support.replicas import Server

TABLES = {"b", "s", "u", "uk", "nk", "pad"}
PAD_DDL = "CREATE TABLE pad (id INT NOT NULL PRIMARY KEY, v LONGBLOB)"


def mirror(tmp: Path, source: dict[str, Any], target: dict[str, Any], prefix: str) -> tuple[Path, str]:
    """A deployment mirroring a new database of ``source`` into ``target`` (group ``m``); its store
    starts at the source's current position (set in-process: one CLI start less). Returns (config
    path, database)."""
    db = f"{prefix}_{uuid.uuid4().hex[:6]}"
    sysbench.create_database(target, f"{db}_m")
    cfg = write_deployment(tmp, source, name=db, include=rf"{db}\..*", batch_rows=300, partitions=2, groups=[
        {"groupId": "m", "outerAdapters": [rdb_adapter(target, "m", f"{db}_m")], "mappings": ["mappings/m.yml"]}],
        mappings={"m.yml": {"groupId": "m", "outerAdapterKey": "m",
                            "dbMapping": {"mirrorDb": True, "database": db, "targetDb": f"{db}_m"}}})
    mark_start(str(cfg))
    return cfg, db


def create(server: Server, db: str) -> None:
    """The workload's tables (and ``pad``) with their first rows."""
    with server.connect() as c, c.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{db}`")
        cur.execute(f"USE `{db}`")
        for stmt in [*workloads.KEYS_DDL, PAD_DDL]:
            cur.execute(stmt)
        workloads.keys_seed(cur)


def write(server: Server, db: str, seed: int, steps: int) -> None:
    """``steps`` seeded random transactions of the key-conflicts workload."""
    with server.connect(db) as c, c.cursor() as cur:
        workloads.run(cur, workloads.keys_step, seed=seed, steps=steps)


def differing(source: dict[str, Any], db: str, target: dict[str, Any]) -> dict[str, int]:
    """{table: rows that differ} between the source database and its mirror."""
    return diff_databases(source, db, target, f"{db}_m")


def stored(cfg: Path) -> tuple[dict[str, Any] | None, list[int]]:
    """The store's position and its batch ids."""
    st = BatchStore(str(load_config(str(cfg)).store_dir()), create=False)
    return st.last_position(), [m.batch_id for m in st.batches()]


def binlog_end(server: Server) -> tuple[str, int]:
    """The server's current binlog file and size."""
    with server.connect() as c, c.cursor() as cur:
        try:
            cur.execute("SHOW BINARY LOG STATUS")
        except Exception:  # noqa: BLE001 - MariaDB and older MySQL
            cur.execute("SHOW MASTER STATUS")
        row = cur.fetchone()
    return str(row[0]), int(row[1])


def _pad(server: Server, db: str, row: int, n: int) -> int:
    """One transaction of fixed shape whose size grows by one byte per ``n``; the binlog's new size.
    (``REPEAT`` with a fixed-width count: MariaDB's annotate event carries the statement.)"""
    server.sql(f"INSERT INTO `{db}`.pad VALUES ({row:08d}, REPEAT('a', {n:08d}))")
    return binlog_end(server)[1]


def grow_to(server: Server, db: str, logfile: str, offset: int) -> None:
    """Write transactions until ``logfile`` ends exactly at ``offset`` (an event boundary there)."""
    file, size = binlog_end(server)
    assert file == logfile, (file, logfile)
    after = _pad(server, db, 1, 100)
    base = after - size - 100  # the transaction's bytes besides the value
    row = 2
    while True:
        gap = offset - after - base
        assert gap >= 0, f"the binlog is past {offset} already ({after})"
        n = min(gap, 20000) if gap > 40000 else gap  # transactions of one length-field width
        after = _pad(server, db, row, n)
        row += 1
        if n == gap:
            break
    assert binlog_end(server) == (logfile, offset)


def event_starts(server: Server, logfile: str) -> set[int]:
    """The offsets where ``logfile``'s events start."""
    return {int(e[1]) for e in server.sql(f"SHOW BINLOG EVENTS IN '{logfile}'")}


def point(cfg: Path, server: dict[str, Any]) -> None:
    """Point the deployment's ``source`` at another server (what the operator does at a failover)."""
    doc = yaml.safe_load(cfg.read_text())
    doc["source"].update(host=server["host"], port=server["port"])
    cfg.write_text(yaml.safe_dump(doc, sort_keys=False))
