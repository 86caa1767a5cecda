"""Print what a slice of the binlog holds: rows events per table and kind (demo helper)."""

from __future__ import annotations

import argparse
import collections
import json
import os
import time

from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

KIND = {WriteRowsEvent: "insert", UpdateRowsEvent: "update", DeleteRowsEvent: "delete"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--start", required=True, help="file:pos")
    ap.add_argument("--schema", required=True)
    args = ap.parse_args()
    logfile, pos = args.start.split(":")
    stream = BinLogStreamReader(
        connection_settings={"host": "127.0.0.1", "port": args.port, "user": "root",
                             "password": os.environ["MYSQL_PWD"]},
        server_id=4243, log_file=logfile, log_pos=int(pos), resume_stream=True, blocking=False,
        only_events=list(KIND), only_schemas=[args.schema])
    counts: collections.Counter = collections.Counter()
    t0 = time.monotonic()
    try:
        for ev in stream:
            counts[(ev.table, KIND[type(ev)])] += len(ev.rows)
    finally:
        stream.close()
    secs = time.monotonic() - t0
    total = sum(counts.values())
    for (table, kind), n in sorted(counts.items()):
        print(f"{args.schema}.{table:10} {kind:7} {n:8} rows")
    print(json.dumps({"rows": total, "seconds": round(secs, 2), "rows_per_s": round(total / max(secs, 1e-9))}))


if __name__ == "__main__":
    main()
