"""HBase throughput: the same cells through the job and through ``HbaseWriter.apply`` vs raw happybase puts.

    .venv/bin/python bench/hbase.py --rows 100000 [--partitions 1] [--mode STRING|NATIVE] [--repeat 3] [--record]

All sides write the same N rows (8 columns) into fresh tables of one definition in the running
HBase service, in chunks of ``commitBatch`` rows:

* raw: pre-built ``{b"CF:COL": bytes}`` dicts with ``table.batch()`` + ``send()`` per chunk (no
  encoding, no folding: the ceiling);
* writer: INSERT :class:`Change` records with Dml strings, as the job hands them over, through
  ``HbaseWriter.apply`` + ``commit``;
* job: the same rows as single-row INSERT Dml lines in a batch store (20000 lines per batch),
  applied by ``run_sync`` on ``local[P]`` Spark with ``--partitions P``: pre-flight checks,
  reading the batch files, routing and partitioning in the JVM, Arrow to the Python workers,
  the writer, the ack. SparkSession start-up is not timed; an untimed warm-up sync of
  ``--warmup`` rows (into the job's table, recreated afterwards) starts the Python workers first.

Prepared inputs of the raw and writer sides are ``gc.freeze()``-ed before each timed run (an
executor streams its changes). The sides alternate ``--repeat`` times, the best of each
counts. The job's table is checked after every round: row count, and a sample of rows equal
to the raw cells. Uses ``mariadb`` (holds the mapped source table) and ``hbase`` of
``$SLUICE_SERVICES_DIR`` (``scripts/services start mariadb hbase``).
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import happybase  # noqa: E402

from adapters.base import Change  # noqa: E402
from adapters.hbase import HbaseTarget, make_writer  # noqa: E402
from adapters.hbase.plan import MappingPlan  # noqa: E402
from bench import common  # noqa: E402
from pipeline.mapping.model import parse_mapping  # noqa: E402

DB, TABLE = "bench_hb", "people"
TYPES = {"id": "bigint(20)", "name": "varchar(40)", "email": "varchar(60)", "score": "int(11)",
         "balance": "decimal(12,2)", "created": "datetime(6)", "ratio": "double", "note": "varchar(100)"}
DDL = f"CREATE TABLE `{DB}`.`{TABLE}` ({', '.join(f'`{c}` {t}' for c, t in TYPES.items())}, PRIMARY KEY (id))"
SECTION = "### Through the job (bench/hbase.py)"
INTRO = """\
| date | command | rows | mode | partitions | raw rows/s | writer rows/s | writer ratio | job rows/s | job ratio |
|---|---|---|---|---|---|---|---|---|---|"""


def _rows(n: int) -> list[dict[str, str]]:
    """N source rows as the capture's Dml strings."""
    return [{"id": str(i), "name": f"name {i}", "email": f"user{i}@example.com", "score": str(i % 1000),
             "balance": f"{i % 100000}.{i % 100:02d}", "created": f"2024-01-{1 + i % 28:02d} 10:11:12.{i % 10**6:06d}",
             "ratio": repr(i / 7), "note": f"note number {i} with some text"} for i in range(1, n + 1)]


def _changes(rows: list[dict[str, str]]) -> list[Change]:
    return [Change("INSERT", DB, TABLE, d, None, ("id",), TYPES, (1, i, 0)) for i, d in enumerate(rows, 1)]


def _spec(mode: str, table: str, commit: int) -> dict[str, Any]:
    return {"dataSourceKey": "defaultDS", "destination": "bench", "groupId": common.GROUP,
            "hbaseMapping": {"mode": mode, "database": DB, "table": TABLE, "hbaseTable": table,
                             "autoCreateTable": True, "commitBatch": commit, "columns": {"id": "ROWKEY"}}}


def _mapping(mode: str, table: str, commit: int):
    return parse_mapping(_spec(mode, table, commit), "bench.yml")


def _raw_cells(m, changes: list[Change]) -> list[tuple[bytes, dict[bytes, bytes]]]:
    """The exact cells the writer produces, built up front (the raw side does no work)."""
    plan = MappingPlan(m)
    return [(plan.rowkey(c), {k: v for k, v in plan.cells(c).items() if v is not None}) for c in changes]


def run_raw(conn: happybase.Connection, table: str, cells, commit: int) -> float:
    """Seconds of batched puts of the prepared cells."""
    t = conn.table(table)
    t0 = time.perf_counter()
    for i in range(0, len(cells), commit):
        b = t.batch()
        for row, data in cells[i:i + commit]:
            b.put(row, data)
        b.send()
    return time.perf_counter() - t0


def run_writer(target: HbaseTarget, m, changes: list[Change], commit: int) -> float:
    """Seconds of ``HbaseWriter.apply`` + ``commit`` per chunk."""
    w = make_writer(target, (m,))
    w.open()
    t0 = time.perf_counter()
    for i in range(0, len(changes), commit):
        w.apply(m, changes[i:i + commit])
        w.commit()
    secs = time.perf_counter() - t0
    w.close()
    return secs


def fresh_table(conn: happybase.Connection, target: HbaseTarget, m) -> None:
    """Drop the mapping's table if present; the writer's check creates it (autoCreateTable)."""
    name = m.spec.hbaseTable
    if name.encode() in conn.tables():
        conn.delete_table(name, disable=True)
    make_writer(target, (m,)).check()


def check_table(conn: happybase.Connection, table: str, cells, sample: int = 500) -> None:
    """The table holds exactly the N rows, and a random sample has exactly the raw cells."""
    t = conn.table(table)
    count = sum(1 for _ in t.scan(filter=b"FirstKeyOnlyFilter() AND KeyOnlyFilter()", batch_size=5000))
    assert count == len(cells), f"{table}: {count} rows, expected {len(cells)}"
    picks = random.Random(len(cells)).sample(cells, min(sample, len(cells)))
    got = dict(t.rows([k for k, _ in picks]))
    bad = [k for k, want in picks if got.get(k) != want]
    assert not bad, f"{table}: {len(bad)} of {len(picks)} sampled rows differ, e.g. {bad[0]!r}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=50000)
    ap.add_argument("--mode", choices=("STRING", "NATIVE"), default="STRING")
    ap.add_argument("--commit-batch", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=1, help="Spark partitions (and local[N] cores) of the job")
    ap.add_argument("--warmup", type=int, default=2000, help="rows of the untimed warm-up sync (0: none)")
    ap.add_argument("--record", action="store_true", help="add the result to docs/benchmarks.md")
    args = ap.parse_args()
    svc = common.services()
    info = svc["hbase"]
    target = HbaseTarget(host=info["host"], port=info["port"])
    conn = happybase.Connection(info["host"], info["port"])
    common.create_source_table(svc["mariadb"], DB, DDL)
    rows = _rows(args.rows)
    changes = _changes(rows)
    job_name = f"BENCH_job_{uuid.uuid4().hex[:6]}"
    job_m = _mapping(args.mode, job_name, args.commit_batch)
    expected = _raw_cells(job_m, changes)
    best = {"raw": float("inf"), "writer": float("inf"), "job": float("inf")}
    made = [job_name]
    adapter = {"name": "hbase", "hosts": f"{info['host']}:{info['port']}"}
    with tempfile.TemporaryDirectory(prefix="sluice-bench-hbase-") as tmpd:
        cfg_path = common.write_deployment(Path(tmpd), svc["mariadb"], adapter,
                                           {"people.yml": _spec(args.mode, job_name, args.commit_batch)},
                                           args.partitions)
        spark, store = common.open_job(cfg_path, "sluice-bench-hbase")
        try:
            fresh_table(conn, target, job_m)
            if args.warmup:
                common.fill_store(store, [common.dml(DB, TABLE, "INSERT", r, TYPES) for r in rows[:args.warmup]])
                common.timed_sync(cfg_path, spark, store, args.partitions)
            base = store.cursor(common.GROUP)
            common.fill_store(store, [common.dml(DB, TABLE, "INSERT", r, TYPES) for r in rows])
            for r in range(args.repeat):
                for side in ("raw", "writer", "job"):
                    if side == "job":
                        fresh_table(conn, target, job_m)
                        if store.cursor(common.GROUP) != base:
                            store.set_cursor(common.GROUP, base)
                        secs, summary = common.timed_sync(cfg_path, spark, store, args.partitions)
                        assert summary.rows == args.rows, summary.as_dict()
                        check_table(conn, job_name, expected)
                    else:
                        name = f"BENCH_{side}_{uuid.uuid4().hex[:6]}"
                        m = _mapping(args.mode, name, args.commit_batch)
                        made.append(name)
                        fresh_table(conn, target, m)
                        cells = _raw_cells(m, changes) if side == "raw" else None
                        gc.collect()
                        gc.freeze()  # the inputs are old objects, as in an executor that streams its changes
                        try:
                            secs = (run_raw(conn, name, cells, args.commit_batch) if side == "raw"
                                    else run_writer(target, m, changes, args.commit_batch))
                        finally:
                            gc.unfreeze()
                        conn.delete_table(name, disable=True)
                    best[side] = min(best[side], secs)
                    print(f"run {r + 1} {side:6s}: {args.rows / secs:10.0f} rows/s ({secs:.2f} s)", flush=True)
        finally:
            spark.stop()
            existing = set(conn.tables())
            for name in made:
                if name.encode() in existing:
                    conn.delete_table(name, disable=True)
    raw, writer, job = best["raw"], best["writer"], best["job"]
    result = {"rows": args.rows, "mode": args.mode, "partitions": args.partitions,
              "raw_rows_per_s": round(args.rows / raw),
              "writer_rows_per_s": round(args.rows / writer), "writer_ratio": round(raw / writer, 2),
              "job_rows_per_s": round(args.rows / job), "job_ratio": round(raw / job, 2)}
    print(json.dumps(result))
    if args.record:
        line = (f"| {datetime.now(UTC):%Y-%m-%d} | `{common.command_line('bench/hbase.py')}` | {args.rows} | "
                f"{args.mode} | {args.partitions} | {result['raw_rows_per_s']} | {result['writer_rows_per_s']} | "
                f"{result['writer_ratio']:.2f} | {result['job_rows_per_s']} | **{result['job_ratio']:.2f}** |")
        common.record_row(REPO / "docs" / "benchmarks.md", SECTION, INTRO, line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
