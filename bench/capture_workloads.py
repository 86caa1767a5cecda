"""Binlog workloads for bench/capture.py, written into a fresh database on the source MariaDB.

* ``large``: the original workload: multi-row INSERTs of 1000 sysbench-like rows, then one
  UPDATE and one DELETE statement touching part of them (few, large rows events).
* ``oltp_write_only`` / ``oltp_read_write``: sysbench's own OLTP scripts on its default schema
  (4 tables), ``--threads`` clients for ``--seconds``: small transactions of 4 row changes
  (UPDATE by key, UPDATE non-key, DELETE, INSERT), with 14 reads each in read_write.
* ``wide``: a 40-column table (integers, decimals, doubles, dates and times, varchars, text, an
  enum) written by ``bench/wide.lua`` under sysbench: per transaction one UPDATE of 6 columns,
  one DELETE and one INSERT of a whole row.

Each returns nothing; the caller marks the binlog position before and reads it after.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from tests.support import sysbench

WIDE_LUA = Path(__file__).with_name("wide.lua")
OLTP_TABLES, OLTP_SIZE, WIDE_SIZE = 4, 10000, 10000

WIDE_DDL = ("CREATE TABLE wide (id INT PRIMARY KEY, "
            + ", ".join(f"i{n} INT NOT NULL" for n in range(1, 9)) + ", "
            + ", ".join(f"b{n} BIGINT UNSIGNED" for n in range(1, 5)) + ", "
            + ", ".join(f"d{n} DECIMAL(12,2)" for n in range(1, 5)) + ", "
            + ", ".join(f"f{n} DOUBLE" for n in range(1, 4)) + ", "
            + ", ".join(f"t{n} DATETIME(6)" for n in range(1, 4)) + ", "
            + "dt DATE, tm TIME, ts TIMESTAMP(3) NULL, "
            + ", ".join(f"v{n} VARCHAR(64)" for n in range(1, 9)) + ", "
            + "c1 CHAR(16), tx TEXT, en ENUM('new','paid','sent','done'), fl TINYINT(1), sm SMALLINT) "
            "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4")


def wide_values(i: int) -> str:
    """One row of the wide table as SQL values (40 columns)."""
    ints = ", ".join(str(i * 7 + n) for n in range(8))
    bigs = ", ".join(str(i * 1_000_003 + n) for n in range(4))
    decs = ", ".join(f"{i % 100000}.{n}5" for n in range(4))
    dbls = ", ".join(f"{i / 7 + n}" for n in range(3))
    dts = ", ".join(f"'2024-0{n + 1}-1{n} 10:11:12.{i % 1000000:06d}'" for n in range(3))
    vcs = ", ".join(f"'value-{n}-{i:08d}-abcdefghij'" for n in range(8))
    return (f"({i}, {ints}, {bigs}, {decs}, {dbls}, {dts}, '2024-05-06', '12:34:56', "
            f"'2024-05-06 07:08:09.123', {vcs}, 'c{i:015d}', 'text of row {i} with some words in it', "
            f"'{('new', 'paid', 'sent', 'done')[i % 4]}', {i % 2}, {i % 30000})")


def prepare(db: dict[str, Any], database: str, workload: str) -> None:
    """Schema and initial rows (before the measured range)."""
    sysbench.create_database(db, database)
    if workload.startswith("oltp"):
        sysbench.prepare(db, database, tables=OLTP_TABLES, table_size=OLTP_SIZE, create=False)
    elif workload == "wide":
        with sysbench.connect(db, database) as conn, conn.cursor() as cur:
            cur.execute(WIDE_DDL)
            for start in range(1, WIDE_SIZE + 1, 500):
                cur.execute("INSERT INTO wide VALUES " + ",".join(
                    wide_values(i) for i in range(start, min(start + 500, WIDE_SIZE + 1))))


def run(db: dict[str, Any], database: str, workload: str, *, rows: int, seconds: int, threads: int) -> None:
    """Write the measured binlog range."""
    if workload == "large":
        large(db, database, rows)
        return
    if workload.startswith("oltp"):
        cmd = sysbench.command(db, database, "run", workload=workload, tables=OLTP_TABLES, table_size=OLTP_SIZE,
                               threads=threads, seconds=seconds)
    else:
        cmd = [sysbench.SYSBENCH, str(WIDE_LUA), f"--mysql-host={db['host']}", f"--mysql-port={db['port']}",
               f"--mysql-user={db['user']}", f"--mysql-password={db['password']}", f"--mysql-db={database}",
               f"--table-size={WIDE_SIZE}", f"--threads={threads}", f"--time={seconds}", "--db-driver=mysql",
               "--mysql-ignore-errors=all", "run"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=seconds + 300)


def large(db: dict[str, Any], database: str, rows: int) -> None:
    """About ``rows`` row changes: 60% inserts (1000-row statements), 25% updates, 15% deletes."""
    inserts = int(rows * 0.6)
    with sysbench.connect(db, database) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE sbtest1 (id INT PRIMARY KEY, k INT NOT NULL, c CHAR(120) NOT NULL, "
                    "pad CHAR(60) NOT NULL, amount DECIMAL(12,2), created DATETIME(6), flag TINYINT(1))")
        for start in range(0, inserts, 1000):
            values = ",".join(
                f"({i}, {i * 7 % 10007}, '{('%011d-' % i) * 10}', '{('%010d-' % i) * 5}', {i}.25, "
                f"'2024-01-01 00:00:00.{i % 1000000:06d}', {i % 2})"
                for i in range(start, min(start + 1000, inserts)))
            cur.execute(f"INSERT INTO sbtest1 VALUES {values}")
        step = max(1, inserts // max(1, int(rows * 0.25)))
        cur.execute(f"UPDATE sbtest1 SET k = k + 1, amount = amount * 2 WHERE id % {step} = 0")
        cur.execute(f"DELETE FROM sbtest1 WHERE id % 7 = 1 AND id < {int(rows * 0.15) * 7}")
