"""Benchmark the full load (``sluice etl``) against a raw multi-row insert of the same rows.

    .venv/bin/python bench/etl.py --rows 1000000 [--partitions 1,2,4] [--no-append]

1. Source: ``bench_etl_<id>.t`` on the source MariaDB (sysbench-like row: BIGINT id, INT k,
   CHAR(120) c, CHAR(60) pad), filled with ``INSERT ... SELECT`` from MariaDB's sequence
   engine (``seq_1_to_N``): seconds, not minutes.
2. Raw baseline: the rows are read into memory first (not timed), then timed: pymysql
   ``executemany`` of ``INSERT ... VALUES (%s, %s, %s, %s)`` (pymysql rewrites it into
   multi-row INSERTs) in chunks of 3000 rows, one commit per chunk, into an empty copy of
   the table on the target MariaDB. One connection: the usual "load script".
3. The ETL job: ``run_etl`` of a dbMapping (mapAll) into an empty copy, through Spark
   (``local[4]``, session started before timing), for each ``--partitions`` value: key-range
   split, per-range SELECT pages, UPSERT through the RDB writer (DELETE by key + multi-row
   INSERT), commitBatch 3000. Timed from the call to the end of the job (planning included).
Every loaded target is compared with the source (row count and a checksum).
Prints the results and appends them, with the command, to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import pymysql  # noqa: E402
import yaml  # noqa: E402

from pipeline.config import load_config  # noqa: E402
from pipeline.etl.driver import run_etl  # noqa: E402
from pipeline.job.group import load_group  # noqa: E402
from pipeline.job.session import get_spark  # noqa: E402
from sluice_common.logs import configure  # noqa: E402
from tests.conftest import ensure_service  # noqa: E402

DDL = ("CREATE TABLE {t} (id BIGINT PRIMARY KEY, k INT NOT NULL, c CHAR(120) NOT NULL, pad CHAR(60) NOT NULL,"
       " KEY k_1 (k)) ENGINE=InnoDB")


def connect(info: dict, db: str | None = None, **kw) -> pymysql.connections.Connection:
    kw.setdefault("autocommit", True)
    return pymysql.connect(host=info["host"], port=int(info["port"]), user=info["user"], password=info["password"],
                           database=db, charset="utf8mb4", **kw)


def run(conn, *sql: str) -> list[tuple]:
    with conn.cursor() as cur:
        for s in sql:
            cur.execute(s)
        return list(cur.fetchall())


def checksum(info: dict, db: str) -> tuple:
    with connect(info, db) as c:
        return run(c, "SELECT COUNT(*), SUM(CRC32(CONCAT_WS('|', id, k, c, pad))) FROM t")[0]


def fresh_target(tgt: dict, tdb: str) -> None:
    with connect(tgt) as c:
        run(c, f"DROP DATABASE IF EXISTS `{tdb}`", f"CREATE DATABASE `{tdb}`", DDL.format(t=f"`{tdb}`.t"))


def raw_insert(tgt: dict, tdb: str, rows: list[tuple], chunk: int) -> float:
    fresh_target(tgt, tdb)
    conn = connect(tgt, tdb, autocommit=False)
    t0 = time.perf_counter()
    with conn.cursor() as cur:
        for a in range(0, len(rows), chunk):
            cur.executemany("INSERT INTO t (id, k, c, pad) VALUES (%s, %s, %s, %s)", rows[a:a + chunk])
            conn.commit()
    secs = time.perf_counter() - t0
    conn.close()
    return secs


def _warm(batches):
    import adapters.rdb  # noqa: F401 - what the load imports on an executor
    import pipeline.etl.partition  # noqa: F401
    yield from batches


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--partitions", default="1,2,4")
    ap.add_argument("--master", default="local[4]")
    ap.add_argument("--chunk", type=int, default=3000)
    ap.add_argument("--no-append", action="store_true")
    args = ap.parse_args()
    configure("WARNING")
    src, tgt = ensure_service("mariadb"), ensure_service("mariadb-target")
    db = f"bench_etl_{uuid.uuid4().hex[:6]}"
    tdb = f"{db}_t"
    parts = [int(p) for p in args.partitions.split(",")]
    with connect(src) as c:
        t0 = time.perf_counter()
        run(c, "SET SESSION sql_log_bin = 0", f"CREATE DATABASE `{db}`", f"USE `{db}`", DDL.format(t=f"`{db}`.t"),
            f"INSERT INTO `{db}`.t SELECT seq, seq * 7919 % 1000003, "
            "CONCAT(LPAD(seq, 11, '0'), '-', REPEAT(SUBSTR(MD5(seq), 1, 10), 10)), "
            f"CONCAT('pad-', REPEAT(SUBSTR(MD5(seq + 1), 1, 11), 5)) FROM seq_1_to_{args.rows}",
            f"ANALYZE TABLE `{db}`.t")
        gen = time.perf_counter() - t0
    print(f"generated {args.rows} rows in {gen:.1f} s")
    want = checksum(src, db)
    results: dict[str, float] = {}
    try:
        with connect(src, db) as c:
            rows = run(c, "SELECT id, k, c, pad FROM t ORDER BY id")
        secs = raw_insert(tgt, tdb, rows, args.chunk)
        assert checksum(tgt, tdb) == want, "raw load differs from the source"
        results["raw"] = secs
        print(f"raw executemany: {args.rows / secs:,.0f} rows/s ({secs:.1f} s)")
        del rows
        with tempfile.TemporaryDirectory() as tmp:
            cfg_path = Path(tmp) / "sluice.yml"
            mapping = {"groupId": "g1", "dbMapping": {"database": db, "table": "t", "targetTable": f"{tdb}.t",
                                                      "targetPk": {"id": "id"}, "mapAll": True,
                                                      "commitBatch": args.chunk}}
            (Path(tmp) / "t.yml").write_text(yaml.safe_dump(mapping))
            cfg = {"source": {"name": db, "host": src["host"], "port": int(src["port"]), "user": src["user"],
                              "password": src["password"]},
                   "store": {"path": str(Path(tmp) / "store")},
                   "groups": [{"groupId": "g1", "mappings": ["t.yml"], "outerAdapters": [{
                       "name": "rdb", "key": "t", "properties": {
                           "jdbc.url": f"jdbc:mysql://{tgt['host']}:{tgt['port']}/{tdb}",
                           "jdbc.username": tgt["user"], "jdbc.password": tgt["password"]}}]}],
                   "spark": {"master": args.master, "partitions": 4}}
            cfg_path.write_text(yaml.safe_dump(cfg))
            config = load_config(cfg_path)
            spark = get_spark(config.spark, "bench-etl", args.master)
            spark.range(0, 4, 1, 4).mapInArrow(_warm, "id long").collect()  # start and warm the Python workers
            plan = load_group(config, "g1")
            for p in parts:
                fresh_target(tgt, tdb)
                t0 = time.perf_counter()
                summary = run_etl(config, plan, spark, partitions=p, progress_every=1e9)
                secs = time.perf_counter() - t0
                assert summary.rows == args.rows and checksum(tgt, tdb) == want, "ETL load differs from the source"
                results[f"etl_p{p}"] = secs
                print(f"etl partitions={p}: {args.rows / secs:,.0f} rows/s ({secs:.1f} s), "
                      f"ratio to raw {results['raw'] / secs:.2f}")
            spark.stop()
    finally:
        with connect(src) as c:
            run(c, "SET SESSION sql_log_bin = 0", f"DROP DATABASE IF EXISTS `{db}`")
        with connect(tgt) as c:
            run(c, f"DROP DATABASE IF EXISTS `{tdb}`")
    if not args.no_append:
        append(args, results)


def append(args, results: dict[str, float]) -> None:
    n = args.rows
    raw = results["raw"]
    lines = [f"\n## ETL full load (bench/etl.py, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs)\n",
             f"`.venv/bin/python bench/etl.py --rows {n} --partitions {args.partitions}` "
             f"(Spark `{args.master}`)\n",
             "| load | rows/s | seconds | ratio to raw |", "|---|---|---|---|",
             f"| raw executemany (chunks of {args.chunk}, 1 connection) | {n / raw:,.0f} | {raw:.1f} | 1.00 |"]
    for k, secs in results.items():
        if k.startswith("etl_p"):
            lines.append(f"| `run_etl` partitions={k[5:]} | {n / secs:,.0f} | {secs:.1f} | **{raw / secs:.2f}** |")
    with open(REPO / "docs" / "benchmarks.md", "a", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
