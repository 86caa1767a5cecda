"""Run sysbench OLTP workloads against the test MariaDB (the `mariadb` fixture's dict).

    prepare(db, "sb_x", tables=2, table_size=500)
    run(db, "sb_x", seconds=5, threads=2)               # blocking
    proc = start(db, "sb_x", seconds=20)                # background Popen; proc.wait()
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pymysql

SYSBENCH = shutil.which("sysbench") or "sysbench"


def connect(db: dict[str, Any], database: str | None = None, **kw: Any) -> pymysql.connections.Connection:
    """A pymysql connection to the fixture's server (autocommit)."""
    return pymysql.connect(host=db["host"], port=int(db["port"]), user=db["user"], password=db["password"],
                           database=database, autocommit=True, charset="utf8mb4", **kw)


def create_database(db: dict[str, Any], database: str) -> None:
    with connect(db) as c, c.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{database}`")
        cur.execute(f"CREATE DATABASE `{database}`")


def drop_database(db: dict[str, Any], database: str) -> None:
    with connect(db) as c, c.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{database}`")


def command(db: dict[str, Any], database: str, action: str, *, workload: str = "oltp_write_only",
            tables: int = 2, table_size: int = 500, threads: int = 2, seconds: int = 5,
            extra: tuple[str, ...] = ()) -> list[str]:
    """The sysbench command line (``action``: prepare | run | cleanup)."""
    return [SYSBENCH, workload, f"--mysql-host={db['host']}", f"--mysql-port={db['port']}",
            f"--mysql-user={db['user']}", f"--mysql-password={db['password']}", f"--mysql-db={database}",
            f"--tables={tables}", f"--table-size={table_size}", f"--threads={threads}", f"--time={seconds}",
            "--report-interval=0", "--db-driver=mysql", "--mysql-ignore-errors=all", *extra, action]


def prepare(db: dict[str, Any], database: str, *, tables: int = 2, table_size: int = 500,
            create: bool = True) -> None:
    """(Re)create ``database`` and load the sysbench tables."""
    if create:
        create_database(db, database)
    subprocess.run(command(db, database, "prepare", tables=tables, table_size=table_size, threads=1),
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=300)


def run(db: dict[str, Any], database: str, *, seconds: int = 5, threads: int = 2, tables: int = 2,
        table_size: int = 500, workload: str = "oltp_write_only") -> str:
    """Run a workload to completion; returns sysbench's output."""
    p = subprocess.run(command(db, database, "run", workload=workload, tables=tables, table_size=table_size,
                               threads=threads, seconds=seconds),
                       check=True, capture_output=True, text=True, timeout=seconds + 120)
    return p.stdout


def start(db: dict[str, Any], database: str, *, seconds: int = 10, threads: int = 2, tables: int = 2,
          table_size: int = 500, workload: str = "oltp_write_only") -> subprocess.Popen:
    """Start a workload in the background."""
    return subprocess.Popen(command(db, database, "run", workload=workload, tables=tables,
                                    table_size=table_size, threads=threads, seconds=seconds),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@contextlib.contextmanager
def log_bin_compress(db: dict[str, Any]) -> Iterator[None]:
    """MariaDB writes compressed query and rows events (``log_bin_compress``, over 10 bytes) while
    the block runs, and its settings as they were after it (a global setting: keep the block short)."""
    with connect(db) as conn, conn.cursor() as cur:
        cur.execute("SELECT @@GLOBAL.log_bin_compress, @@GLOBAL.log_bin_compress_min_len")
        saved = cur.fetchone()
        cur.execute("SET GLOBAL log_bin_compress_min_len = 10")
        cur.execute("SET GLOBAL log_bin_compress = ON")
        try:
            yield
        finally:
            cur.execute("SET GLOBAL log_bin_compress = %s", (saved[0],))
            cur.execute("SET GLOBAL log_bin_compress_min_len = %s", (saved[1],))
