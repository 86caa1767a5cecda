"""Capture throughput against a native decoder, over the same binlog range, in one run.

    nice -n -10 .venv/bin/python bench/capture.py [--workload all|large|oltp_write_only|oltp_read_write|wide]
        [--rows 300000] [--seconds 20] [--threads 4] [--store kafka [--repeat 2]] [--record]

For each workload (bench/capture_workloads.py) a fresh database on the source MariaDB
(``$SLUICE_SERVICES_DIR``, started by ``scripts/services start mariadb``) gets its schema, the
binlog position is marked, the workload writes, and the same binlog range is then read three
ways, each over its own replication connection to the server:

1. native: ``mariadb-binlog --read-from-remote-server -v --base64-output=decode-rows`` (C, the
   text of every value of every row), output to a file, rows counted afterwards (the anchor);
2. raw: python-mysql-replication's ``BinLogStreamReader`` reading every row's values;
3. capture: ``sluice capture --once`` (subprocess) into a new store: decoding, Dml records,
   batching and fsynced batch files, as in production (``elapsed_s`` of its summary).

It prints rows/s of each and the ratios to the native anchor (target for capture: >= 0.5 on
every OLTP workload), and with ``--record`` appends one row per workload to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
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

from bench import capture_workloads as workloads  # noqa: E402
from bench.common import command_line, record_row, services  # noqa: E402
from pipeline.config import load_config  # noqa: E402
from pipeline.store.files import BatchStore  # noqa: E402
from tests.support import sysbench  # noqa: E402
from tests.support.capture_check import mark_start, write_config  # noqa: E402

WORKLOADS = ("oltp_write_only", "oltp_read_write", "wide", "large")
SECTION = "## Capture throughput against mariadb-binlog (bench/capture.py)"
INTRO = """
Rows/s over the same binlog range, same run, each reader on its own replication connection:
`mariadb-binlog --read-from-remote-server -v --base64-output=decode-rows` (the native anchor,
output to a file), raw python-mysql-replication `BinLogStreamReader` reading every value, and
`sluice capture --once` (decode, Dml records, fsynced batch files; its summary's `elapsed_s`).
The anchor is timed as a whole process; since 2026-11-27 the capture ratio is also given with
capture timed so (`processes:`, Python's start, imports and the source checks included), which is
the like-for-like figure. Target (issue 17): capture >= 0.5x the anchor on every OLTP workload.

| date | command | workload | rows | native rows/s | raw rows/s (ratio) | capture rows/s | capture ratio | load before |
|---|---|---|---|---|---|---|---|---|
"""
KAFKA_SECTION = "## Capture to Kafka vs capture to files (bench/capture.py --store kafka)"
KAFKA_INTRO = """
`sluice capture --once` over the same binlog range, same run: into the file store (fsynced batch
files) and into the Kafka store (one Kafka transaction per batch, idempotent producer, acks=all,
rows hashed by primary key over `--partitions` partitions; docs/kafka.md). Rows/s from each
summary's `elapsed_s`; since 2026-11-25 (`--repeat`) each store's best of several passes,
alternating which goes first. Target (issue 18): Kafka >= 0.8x files.

| date | command | workload | rows | files rows/s | Kafka rows/s | Kafka/files | load before |
|---|---|---|---|---|---|---|---|
"""
_ROW_LINE = re.compile(rb"^### (INSERT INTO|UPDATE|DELETE FROM) `([^`]*)`", re.M)


def native_pass(db: dict, start: dict, end: dict, database: str, out: Path) -> tuple[int, float]:
    """Rows of ``database`` decoded by mariadb-binlog over [start, end), and its wall seconds."""
    with sysbench.connect(db) as conn, conn.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        files = [r[0] for r in cur.fetchall()]
    files = files[files.index(start["logfile"]):files.index(end["logfile"]) + 1]
    cmd = ["mariadb-binlog", "--read-from-remote-server", f"--host={db['host']}", f"--port={db['port']}",
           f"--user={db['user']}", "-v", "--base64-output=decode-rows", f"--start-position={start['logpos']}",
           f"--stop-position={end['logpos']}", *files]
    env = {**os.environ, "MYSQL_PWD": db["password"]}
    t0 = time.perf_counter()
    with out.open("wb") as fh:
        subprocess.run(cmd, stdout=fh, stderr=subprocess.PIPE, env=env, check=True)
    secs = time.perf_counter() - t0
    rows = sum(1 for m in _ROW_LINE.finditer(out.read_bytes()) if m.group(2) == database.encode())
    out.unlink()
    return rows, secs


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
            if (stream.log_file, ev.packet.log_pos) > end_key:
                break
            for row in ev.rows:  # read every value
                rows += 1
                for image in row.values():
                    if isinstance(image, dict):
                        for _v in image.values():
                            pass
    finally:
        stream.close()
    return rows, time.perf_counter() - t0


def capture_pass(config: str, native: bool = True) -> tuple[dict, float]:
    sluice = str(Path(sys.executable).parent / "sluice")
    t0 = time.perf_counter()
    env = {**os.environ, "SLUICE_LOG_LEVEL": "WARNING", "SLUICE_CAPTURE_NATIVE": "1" if native else "0"}
    p = subprocess.run([sluice, "capture", "--config", config, "--once"], capture_output=True, text=True,
                       env=env, check=False)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"sluice capture failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1]), wall


def kafka_pass(db: dict, tmp: Path, database: str, start: dict, partitions: int, rep: int = 0) -> float:
    """Capture the same range into a new Kafka topic (``store.kind: kafka``, ``partitions`` partitions
    hashed by primary key); rows/s of its summary."""
    import yaml

    from pipeline.store import open_store

    (tmp / f"kafka{rep}").mkdir()
    config = write_config(db, tmp / f"kafka{rep}", f"{database}\\..*", max_rows=20000, name=f"kbench{rep}")
    raw = yaml.safe_load(Path(config).read_text())
    raw["store"].update({"kind": "kafka", "kafka": {"bootstrap.servers": services()["kafka"]["bootstrap"],
                                                     "topic": f"{database}-k{rep}", "partitionsNum": partitions,
                                                     "partitionHash": f"{database}\\..*:$pk$"}})
    Path(config).write_text(yaml.safe_dump(raw))
    store = open_store(load_config(config))
    with store.capture_lock():
        store.set_start_position(start)
    summary, _ = capture_pass(config)
    return summary["rows"] / summary["elapsed_s"]


def files_pass(db: dict, tmp: Path, database: str, start: dict, rep: int) -> float:
    """Capture the same range once more into a new file store; rows/s of its summary."""
    (tmp / f"files{rep}").mkdir()
    config = write_config(db, tmp / f"files{rep}", f"{database}\\..*", max_rows=20000, name=f"fbench{rep}")
    store = BatchStore(load_config(config).store_dir())
    with store.capture_lock():
        store.set_start_position(start)
    summary, _ = capture_pass(config)
    return summary["rows"] / summary["elapsed_s"]


def one(db: dict, workload: str, args: argparse.Namespace) -> dict:
    """Generate one workload's binlog and read it three ways; the numbers."""
    database = f"bench_cap_{uuid.uuid4().hex[:6]}"
    load = os.getloadavg()[0]
    try:
        workloads.prepare(db, database, workload)
        with tempfile.TemporaryDirectory() as tmp:
            config = write_config(db, Path(tmp), f"{database}\\..*", max_rows=20000, name="bench")
            start = mark_start(config)
            t0 = time.perf_counter()
            workloads.run(db, database, workload, rows=args.rows, seconds=args.seconds, threads=args.threads)
            print(f"[{workload}] wrote the binlog in {time.perf_counter() - t0:.1f}s")
            summary, cap_wall = capture_pass(config)  # also fixes the end of the range
            end = summary["end"]
            nat_rows, nat_s = native_pass(db, start, end, database, Path(tmp) / "native.txt")
            raw_rows, raw_s = raw_pass(db, start, end, database)
            kafka_rate = files_rate = None
            if args.store == "kafka":  # the same range once more, published to Kafka (docs/kafka.md)
                # --repeat: both stores that many times more, alternating which goes first; best of each
                rates: dict[str, list[float]] = {"files": [], "kafka": []}
                for rep in range(args.repeat):
                    for which in (("kafka", "files") if rep % 2 == 0 else ("files", "kafka")):
                        rates[which].append(kafka_pass(db, Path(tmp), database, start, args.partitions, rep)
                                            if which == "kafka" else files_pass(db, Path(tmp), database, start, rep))
                kafka_rate, files_rate = max(rates["kafka"]), max(rates["files"])
                print(f"[{workload}] rows/s, files: {', '.join(f'{r:,.0f}' for r in rates['files'])}; "
                      f"Kafka: {', '.join(f'{r:,.0f}' for r in rates['kafka'])}")
            lib_rate = None
            if args.library:  # the same range once more on the pure-Python path (SLUICE_CAPTURE_NATIVE=0)
                (Path(tmp) / "lib").mkdir()
                lib_config = write_config(db, Path(tmp) / "lib", f"{database}\\..*", max_rows=20000, name="lib")
                lib_store = BatchStore(load_config(lib_config).store_dir())
                with lib_store.capture_lock():
                    lib_store.set_start_position(start)
                lib, _ = capture_pass(lib_config, native=False)
                lib_rate = (lib["rows"] - (1 if workload == "large" else 0)) / lib["elapsed_s"]
    finally:
        sysbench.drop_database(db, database)
    cap_rows = summary["rows"] - (1 if workload == "large" else 0)  # the CREATE TABLE is a record too
    res = {"workload": workload, "rows": nat_rows, "native": nat_rows / nat_s, "raw": raw_rows / raw_s,
           "capture": cap_rows / summary["elapsed_s"], "capture_wall": cap_wall,
           "capture_wall_rate": cap_rows / cap_wall, "load": load, "library": lib_rate,
           "kafka": kafka_rate, "files": files_rate}
    print(f"[{workload}] mariadb-binlog: {nat_rows} rows in {nat_s:.2f}s = {res['native']:,.0f} rows/s")
    print(f"[{workload}] raw BinLogStreamReader: {raw_rows} rows in {raw_s:.2f}s = {res['raw']:,.0f} rows/s "
          f"({res['raw'] / res['native']:.2f}x)")
    print(f"[{workload}] sluice capture --once: {cap_rows} rows in {summary['elapsed_s']:.2f}s = "
          f"{res['capture']:,.0f} rows/s ({res['capture'] / res['native']:.2f}x; as a whole process {cap_wall:.2f}s "
          f"= {res['capture_wall_rate'] / res['native']:.2f}x)")
    if kafka_rate is not None:
        print(f"[{workload}] sluice capture --once to Kafka: {kafka_rate:,.0f} rows/s "
              f"({kafka_rate / files_rate:.2f}x capture to files, best of {args.repeat} each)")
    if lib_rate is not None:
        print(f"[{workload}] sluice capture --once, pure-Python path: {lib_rate:,.0f} rows/s "
              f"({lib_rate / res['native']:.2f}x)")
    if not nat_rows == raw_rows == cap_rows:
        print(f"[{workload}] warning: row counts differ (native {nat_rows}, raw {raw_rows}, capture {cap_rows})")
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="all", choices=("all", *WORKLOADS))
    ap.add_argument("--rows", type=int, default=300_000, help="large: row changes to generate (default 300000)")
    ap.add_argument("--seconds", type=int, default=20, help="OLTP/wide: sysbench run time (default 20)")
    ap.add_argument("--threads", type=int, default=4, help="OLTP/wide: sysbench threads (default 4)")
    ap.add_argument("--library", action="store_true", help="also capture on the pure-Python path (native off)")
    ap.add_argument("--store", choices=["files", "kafka"], default="files",
                    help="kafka: also capture the same range to Kafka (the `kafka` service) and compare")
    ap.add_argument("--partitions", type=int, default=3, help="--store kafka: partitions of the topic")
    ap.add_argument("--repeat", type=int, default=2,
                    help="--store kafka: capture to each store this many times, alternating which goes first; "
                         "each store's best rate counts (a single pass on 2 cores varies by 20-30%%)")
    ap.add_argument("--record", action="store_true", help="append the results to docs/benchmarks.md")
    args = ap.parse_args()
    db = services().get("mariadb") or sys.exit("start the source first: python3 scripts/services start mariadb")
    cmd = command_line("bench/capture.py")
    for workload in WORKLOADS if args.workload == "all" else (args.workload,):
        r = one(db, workload, args)
        if args.record and r["kafka"] is not None:
            record_row(REPO / "docs" / "benchmarks.md", KAFKA_SECTION, KAFKA_INTRO,
                       f"| {dt.date.today()} | `{cmd}` | {workload} | {r['rows']} | {r['files']:,.0f} | "
                       f"{r['kafka']:,.0f} | **{r['kafka'] / r['files']:.2f}** | {r['load']:.2f} |")
        elif args.record:
            record_row(REPO / "docs" / "benchmarks.md", SECTION, INTRO,
                       f"| {dt.date.today()} | `{cmd}` | {workload} | {r['rows']} | {r['native']:,.0f} | "
                       f"{r['raw']:,.0f} ({r['raw'] / r['native']:.2f}) | {r['capture']:,.0f}"
                       + (f" (pure-Python path: {r['library']:,.0f})" if r["library"] else "")
                       + f" | **{r['capture'] / r['native']:.2f}** "
                       f"(processes: {r['capture_wall_rate'] / r['native']:.2f}) | {r['load']:.2f} |")


if __name__ == "__main__":
    main()
