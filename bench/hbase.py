"""HBase adapter throughput: the same cells through ``HbaseWriter.apply`` vs raw happybase puts.

    .venv/bin/python bench/hbase.py --rows 100000 [--mode STRING|NATIVE] [--repeat 3] [--no-append]

Both sides write the same N rows (8 columns) into fresh tables of the running HBase service
(``scripts/services start hbase``), in chunks of ``commitBatch`` rows: the raw side sends
pre-built ``{b"CF:COL": bytes}`` dicts with ``table.batch()`` + ``send()`` per chunk (no
encoding, no folding: the ceiling); the writer side gets INSERT :class:`Change` records with
Dml strings, as the job hands them over. Prepared inputs are ``gc.freeze()``-ed before each
timed run on both sides. Runs alternate raw/writer ``--repeat`` times, the
best of each counts. The result line (and the command) is appended to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import happybase  # noqa: E402

from adapters.base import Change  # noqa: E402
from adapters.hbase import HbaseTarget, make_writer  # noqa: E402
from adapters.hbase.rows import MappingPlan  # noqa: E402
from pipeline.mapping.model import parse_mapping  # noqa: E402

TYPES = {"id": "bigint(20)", "name": "varchar(40)", "email": "varchar(60)", "score": "int(11)",
         "balance": "decimal(12,2)", "created": "datetime(6)", "ratio": "double", "note": "varchar(100)"}


def _changes(n: int) -> list[Change]:
    out = []
    for i in range(1, n + 1):
        d = {"id": str(i), "name": f"name {i}", "email": f"user{i}@example.com", "score": str(i % 1000),
             "balance": f"{i % 100000}.{i % 100:02d}", "created": f"2024-01-{1 + i % 28:02d} 10:11:12.{i % 10**6:06d}",
             "ratio": repr(i / 7), "note": f"note number {i} with some text"}
        out.append(Change("INSERT", "bench", "people", d, None, ("id",), TYPES, (1, i, 0)))
    return out


def _mapping(mode: str, table: str, commit: int):
    return parse_mapping({"hbaseMapping": {"mode": mode, "database": "bench", "table": "people", "hbaseTable": table,
                                           "autoCreateTable": True, "commitBatch": commit,
                                           "columns": {"id": "ROWKEY"}}}, "bench.yml")


def _raw_cells(m, changes: list[Change]) -> list[tuple[bytes, dict[bytes, bytes]]]:
    """The exact cells the writer produces, built up front (the raw side does no work)."""
    plan = MappingPlan(m)
    return [(plan.rowkey(c), {k: v for k, v in plan.cells(c).items() if v is not None}) for c in changes]


def run_raw(conn: happybase.Connection, table: str, cells, commit: int) -> float:
    t = conn.table(table)
    t0 = time.perf_counter()
    for i in range(0, len(cells), commit):
        b = t.batch()
        for row, data in cells[i:i + commit]:
            b.put(row, data)
        b.send()
    return time.perf_counter() - t0


def run_writer(target: HbaseTarget, m, changes: list[Change], commit: int) -> float:
    w = make_writer(target, (m,))
    w.open()
    t0 = time.perf_counter()
    for i in range(0, len(changes), commit):
        w.apply(m, changes[i:i + commit])
        w.commit()
    secs = time.perf_counter() - t0
    w.close()
    return secs


SECTION = """
## HBase writer (bench/hbase.py)

Rows/s of a single-table hbaseMapping (8 columns: bigint ROWKEY, 2 varchar, int, decimal, datetime(6),
double, varchar) through `HbaseWriter.apply` + `commit` in chunks of commitBatch = 3000, starting from the
capture's Dml strings, against raw happybase `table.batch()` puts + `send()` of the same cells prepared in
advance, same run, fresh tables, alternating, best of `--repeat` rounds each; the prepared inputs are
`gc.freeze()`-ed before each timed run (an executor streams its changes, so the collector does not rescan
100k live inputs). Target: ratio >= 0.7. HBase
(master + RegionServer + Thrift JVMs) shares the 2 CPUs with the client, so the ratio moves by about ±0.1.

| date | command | rows | mode | raw rows/s | writer rows/s | ratio |
|---|---|---|---|---|---|---|
"""


def append_result(path: Path, line: str) -> None:
    """Add a result row to this bench's table in docs/benchmarks.md (the section is made once)."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    if "## HBase writer (bench/hbase.py)" not in text:
        path.write_text(text.rstrip("\n") + "\n" + SECTION + line + "\n")
        return
    lines = text.splitlines()
    i = next(n for n, ln in enumerate(lines) if ln.startswith("## HBase writer (bench/hbase.py)"))
    while i < len(lines) and not lines[i].startswith("|---"):
        i += 1
    while i + 1 < len(lines) and lines[i + 1].startswith("|"):
        i += 1
    lines.insert(i + 1, line)
    path.write_text("\n".join(lines) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=50000)
    ap.add_argument("--mode", choices=("STRING", "NATIVE"), default="STRING")
    ap.add_argument("--commit-batch", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-append", action="store_true", help="do not append to docs/benchmarks.md")
    args = ap.parse_args()
    info = json.loads((REPO / ".sluice" / "services" / "services.json").read_text())["hbase"]
    target = HbaseTarget(host=info["host"], port=info["port"])
    conn = happybase.Connection(info["host"], info["port"])
    changes = _changes(args.rows)
    raw_best = writer_best = float("inf")
    made = []
    try:
        for r in range(args.repeat):
            for side in ("raw", "writer"):
                name = f"BENCH_{side}_{uuid.uuid4().hex[:6]}"
                m = _mapping(args.mode, name, args.commit_batch)
                make_writer(target, (m,)).check()  # creates the table
                made.append(name)
                cells = _raw_cells(m, changes) if side == "raw" else None
                gc.collect()
                gc.freeze()  # the inputs are old objects, as in an executor that streams its changes
                if side == "raw":
                    secs = run_raw(conn, name, cells, args.commit_batch)
                    raw_best = min(raw_best, secs)
                else:
                    secs = run_writer(target, m, changes, args.commit_batch)
                    writer_best = min(writer_best, secs)
                gc.unfreeze()
                print(f"run {r + 1} {side:6s}: {args.rows / secs:10.0f} rows/s ({secs:.2f} s)", flush=True)
    finally:
        for name in made:
            conn.delete_table(name, disable=True)
    ratio = raw_best / writer_best
    cmd = " ".join([".venv/bin/python bench/hbase.py", *sys.argv[1:]])
    line = (f"| {datetime.now(UTC):%Y-%m-%d} | `{cmd}` | {args.rows} | {args.mode} | {args.rows / raw_best:.0f} | "
            f"{args.rows / writer_best:.0f} | **{ratio:.2f}** |")
    print(line)
    if not args.no_append:
        append_result(REPO / "docs" / "benchmarks.md", line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
