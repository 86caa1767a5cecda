"""Capture throughput: ``sluice capture --once`` against raw BinLogStreamReader iteration.

    .venv/bin/python bench/capture.py [--rows 300000] [--no-record]

Generates a binlog in a fresh database on the test MariaDB (``scripts/services``):
multi-row INSERTs of sysbench-like rows, then UPDATEs and DELETEs of part of them, about
``--rows`` row changes in all. Then, over exactly that binlog range, it measures

1. raw: python-mysql-replication's BinLogStreamReader, reading every row's values
   (``event.rows``), rows events of the bench database only;
2. capture: ``sluice capture --once`` (subprocess) into a new store: decoding, Dml
   records, batching and durable batch files, as in production.

and prints rows/s of both and the ratio, and appends the result to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pymysqlreplication import BinLogStreamReader  # noqa: E402
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent  # noqa: E402

from tests.support import sysbench  # noqa: E402
from tests.support.capture_check import mark_start, write_config  # noqa: E402


def server() -> dict:
    state = json.loads((REPO / ".sluice" / "services" / "services.json").read_text())
    if "mariadb" not in state:
        sys.exit("start the test MariaDB first: python3 scripts/services start mariadb")
    return state["mariadb"]


def generate(db: dict, database: str, rows: int) -> None:
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


def raw_pass(db: dict, start: dict, end: dict, database: str) -> tuple[int, float]:
    """Rows read by plain BinLogStreamReader iteration over [start, end), and seconds."""
    t0 = time.perf_counter()
    stream = BinLogStreamReader(
        connection_settings={"host": db["host"], "port": int(db["port"]), "user": db["user"],
                             "passwd": db["password"]},
        server_id=6998, blocking=False, resume_stream=True, log_file=start["logfile"], log_pos=start["logpos"],
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent], only_schemas=[database],
        enable_logging=False)
    rows = 0
    end_key = (end["logfile"], end["logpos"])
    try:
        for ev in stream:
            for row in ev.rows:  # read every value
                rows += 1
                for image in row.values():
                    if isinstance(image, dict):
                        for _v in image.values():
                            pass
            if (stream.log_file, ev.packet.log_pos) >= end_key:
                break
    finally:
        stream.close()
    return rows, time.perf_counter() - t0


def capture_pass(config: str) -> tuple[dict, float]:
    sluice = str(Path(sys.executable).parent / "sluice")
    t0 = time.perf_counter()
    p = subprocess.run([sluice, "capture", "--config", config, "--once"], capture_output=True, text=True,
                       env={**os.environ, "SLUICE_LOG_LEVEL": "WARNING"}, check=False)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"sluice capture failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1]), wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=300_000, help="row changes to generate (default 300000)")
    ap.add_argument("--no-record", action="store_true", help="do not append to docs/benchmarks.md")
    args = ap.parse_args()
    db = server()
    database = f"bench_cap_{uuid.uuid4().hex[:6]}"
    sysbench.create_database(db, database)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            config = write_config(db, Path(tmp), f"{database}\\..*", max_rows=20000, name="bench")
            start = mark_start(config)
            t0 = time.perf_counter()
            generate(db, database, args.rows)
            print(f"generated the binlog in {time.perf_counter() - t0:.1f}s")
            capture_first, cap_wall = capture_pass(config)  # also fixes the end of the range
            end = capture_first["end"]
            raw_rows, raw_s = raw_pass(db, start, end, database)
            cap_rows, cap_s = capture_first["rows"], capture_first["elapsed_s"]
    finally:
        sysbench.drop_database(db, database)
    raw_rate, cap_rate = raw_rows / raw_s, cap_rows / cap_s
    ratio = cap_rate / raw_rate
    print(f"raw BinLogStreamReader: {raw_rows} rows in {raw_s:.2f}s = {raw_rate:,.0f} rows/s")
    print(f"sluice capture --once:  {cap_rows} rows in {cap_s:.2f}s = {cap_rate:,.0f} rows/s "
          f"(process wall {cap_wall:.2f}s)")
    print(f"ratio capture/raw: {ratio:.2f}")
    if raw_rows != cap_rows - 1:  # capture also stores the CREATE TABLE (counted as one row)
        print(f"warning: row counts differ (raw {raw_rows}, capture {cap_rows})")
    if not args.no_record:
        line = (f"| {dt.date.today()} | `.venv/bin/python bench/capture.py --rows {args.rows}` | {raw_rows} | "
                f"{raw_rate:,.0f} | {cap_rate:,.0f} | **{ratio:.2f}** | {os.cpu_count()} CPUs, "
                f"MariaDB {db.get('version', '')} |\n")
        bench_md = REPO / "docs" / "benchmarks.md"
        text = bench_md.read_text() if bench_md.exists() else "# Benchmarks\n"
        header = "## Capture throughput (bench/capture.py)"
        if header not in text:
            text += (f"\n{header}\n\nRows/s of `sluice capture --once` (decode, Dml, batch files with fsync) "
                     "against raw `BinLogStreamReader` iteration reading every value, same binlog range, "
                     "same run. Target: ratio >= 0.8.\n\n"
                     "| date | command | rows | raw rows/s | capture rows/s | ratio | machine |\n"
                     "|---|---|---|---|---|---|---|\n")
        bench_md.write_text(text + line)
        print(f"recorded in {bench_md}")


if __name__ == "__main__":
    main()
