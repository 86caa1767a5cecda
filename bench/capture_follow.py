"""Lag of ``sluice capture --follow`` while sysbench writes at full speed on the same machine.

    nice -n -10 .venv/bin/python bench/capture_follow.py [--seconds 180] [--threads 4] [--record]

A fresh database on the source MariaDB gets sysbench's default schema (4 tables of 10000
rows); capture is started with ``--follow`` from the current position; then sysbench
``oltp_write_only`` runs with ``--threads`` clients for ``--seconds``. Capture's own progress
lines (every 5 s: rows/s, ``lag_s`` = now - timestamp of the last event read, in whole binlog
seconds) are collected; after sysbench ends, the bench waits until capture has stored
everything (its position reaches the server's end) and reports the lag over the run and the
time to drain. With ``--record`` the result is appended to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.common import command_line, record_row, services  # noqa: E402
from pipeline.capture.server_check import connect, current_position  # noqa: E402
from pipeline.config import load_config  # noqa: E402
from pipeline.store.files import BatchStore  # noqa: E402
from tests.support import sysbench  # noqa: E402
from tests.support.capture_check import mark_start, write_config  # noqa: E402

SECTION = "## Capture --follow lag under sysbench (bench/capture_follow.py)"
INTRO = """
`sluice capture --follow` while sysbench `oltp_write_only` (4 tables of 10000 rows) writes at full
speed on the same 2-core machine; `lag_s` from capture's progress line every 5 s (now - timestamp of
the last event read; binlog timestamps have whole seconds). Drain: seconds from the end of sysbench
until capture had stored everything.

| date | command | rows | written rows/s | capture rows/s | lag_s median | lag_s max | drain s | load |
|---|---|---|---|---|---|---|---|---|
"""


def progress(log: Path) -> list[dict]:
    out = []
    for line in log.read_text(errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("event") == "capture progress":
            out.append(rec)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=180)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--record", action="store_true")
    args = ap.parse_args()
    db = services()["mariadb"]
    database = f"bench_follow_{uuid.uuid4().hex[:6]}"
    load = os.getloadavg()[0]
    sysbench.create_database(db, database)
    sysbench.prepare(db, database, tables=4, table_size=10000, create=False)
    with tempfile.TemporaryDirectory() as tmp:
        config = write_config(db, Path(tmp), f"{database}\\..*", name="bench")
        mark_start(config)
        log = Path(tmp) / "capture.log"
        env = {**os.environ, "SLUICE_LOG_JSON": "1", "SLUICE_LOG_LEVEL": "INFO"}
        cap = subprocess.Popen([str(Path(sys.executable).parent / "sluice"), "capture", "--config", config,
                                "--follow"], stdout=subprocess.DEVNULL, stderr=log.open("wb"), env=env)
        try:
            time.sleep(3)
            t0 = time.monotonic()
            out = sysbench.run(db, database, seconds=args.seconds, threads=args.threads, tables=4, table_size=10000)
            t_end = time.monotonic()
            during = [p for p in progress(log) if p.get("lag_s") is not None]  # lines while sysbench wrote
            cfg = load_config(config)
            with connect(cfg.source) as conn:
                end = current_position(conn, "mariadb")
            store = BatchStore(cfg.store_dir(), create=False)
            while True:  # the GTID state, not the offset: the server may log a checkpoint event after the last commit
                pos = store.last_position() or {}
                if pos.get("gtid") == end.gtid or time.monotonic() - t_end > 300:
                    break
                time.sleep(0.2)
            drain = time.monotonic() - t_end
            rows = sum(m.rows for m in store.batches())
        finally:
            cap.send_signal(signal.SIGTERM)  # the CLI stops on SIGTERM (SIGINT may be ignored in a background job)
            cap.wait(timeout=120)
    sysbench.drop_database(db, database)
    lags = [p["lag_s"] for p in during]
    rates = [p["rows_per_s"] for p in during if p.get("rows_per_s")]
    written = rows / (t_end - t0)
    tps = next((ln.strip() for ln in out.splitlines() if "transactions:" in ln), "?")
    print(f"sysbench: {tps}; {rows} rows stored, {written:,.0f} rows/s while it ran")
    print(f"lag_s over {len(lags)} progress lines: median {statistics.median(lags):.1f}, max {max(lags):.1f}; "
          f"capture rows/s mean {statistics.mean(rates):,.0f}; drained {drain:.1f}s after sysbench ended")
    print("lag_s series:", " ".join(f"{x:g}" for x in lags))
    if args.record:
        record_row(REPO / "docs" / "benchmarks.md", SECTION, INTRO,
                   f"| {dt.date.today()} | `{command_line('bench/capture_follow.py')}` | {rows} | {written:,.0f} | "
                   f"{statistics.mean(rates):,.0f} | {statistics.median(lags):.1f} | **{max(lags):.1f}** | "
                   f"{drain:.1f} | {load:.2f} |")


if __name__ == "__main__":
    main()
