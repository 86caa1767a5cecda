"""Apply throughput through the whole Spark job vs raw baselines, same table, same run.

1. INSERT: N single-row INSERT Dmls (one row per Dml, as a busy OLTP binlog has them)
   through ``run_sync`` (read batch files, split, partition, apply on executors, ack) vs raw
   pymysql multi-row ``executemany`` of the same rows into an identical table.
2. UPDATE-heavy: N/4 UPDATE Dmls (two changed columns each) through the job vs a canal-style
   baseline: one UPDATE statement per row, committed every ``commitBatch`` rows.

    .venv/bin/python bench/apply.py [--rows 1000000] [--partitions 2] [--store kafka [--repeat 2]] [--record]

With ``--store kafka`` every pass (one store: warm-up sync, INSERT, UPDATE) runs in a process,
so a JVM, of its own (:func:`fresh_job_phases`), and the printed file-store rates are those of
such cold passes; without it, as before, in this process.

Uses the running ``mariadb`` (source schema) and ``mariadb-target`` services
(``scripts/services start mariadb mariadb-target spark``). Ratios > 1 mean the job is faster.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import multiprocessing
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench import common  # noqa: E402
from bench.common import connect, fill_store, open_job, quiesce, services, timed_sync  # noqa: E402

DDL = ("CREATE TABLE {t} (id INT NOT NULL PRIMARY KEY, k INT NOT NULL, c CHAR(120) NOT NULL, "
       "pad CHAR(60) NOT NULL) ENGINE=InnoDB")
TYPES = {"id": "int", "k": "int", "c": "char(120)", "pad": "char(60)"}


def rows(n: int) -> list[tuple]:
    rnd = random.Random(42)
    return [(i, rnd.randint(1, n), f"{rnd.getrandbits(64):020d}-" * 5 + "x" * 15, "p" * 59) for i in range(1, n + 1)]


def dml(kind: str, row: tuple, old: dict | None = None) -> dict:
    """One single-row Dml of ``bench_src.t``."""
    data = {"id": str(row[0]), "k": str(row[1]), "c": row[2], "pad": row[3]}
    return common.dml("bench_src", "t", kind, data, TYPES, old=old)


def deployment(tmp: Path, src: dict, dst: dict, partitions: int, table: str = "t_job",
               kafka: dict | None = None, round_rows: int | None = None) -> Path:
    """A config whose group writes ``bench_src.t`` into ``bench_dst.<table>`` through the rdb adapter
    (``kafka``: a ``store.kafka`` section: the Kafka store instead of files; ``round_rows``:
    ``spark.roundRows``)."""
    mapping = {"dataSourceKey": "defaultDS", "destination": "bench", "groupId": "g", "concurrent": True,
               "dbMapping": {"database": "bench_src", "table": "t", "targetTable": f"bench_dst.{table}",
                             "targetPk": {"id": "id"}, "mapAll": True, "commitBatch": 3000}}
    adapter = {"name": "rdb", "properties": {"jdbc.url": f"jdbc:mysql://{dst['host']}:{dst['port']}/bench_dst",
                                             "jdbc.username": "root", "jdbc.password": dst["password"]}}
    return common.write_deployment(tmp, src, adapter, {"t.yml": mapping}, partitions, kafka=kafka,
                                   spark=None if round_rows is None else {"roundRows": round_rows})


def job_phases(cfg_path: Path, dst: dict, table: str, data: list[tuple], upd_rows: list[tuple], partitions: int,
               warmup: int) -> tuple[float, float]:
    """Seconds of the job's INSERT and UPDATE phases (``run_sync`` over every pending batch)."""
    spark, store = open_job(cfg_path, "sluice-bench-apply")
    with connect(dst, "bench_dst") as c, c.cursor() as cur:  # empty, also when --repeat ran it before
        cur.execute(f"TRUNCATE TABLE {table}")
    if warmup:  # as bench/es.py and bench/hbase.py: the session's first sync is not timed
        fill_store(store, [dml("INSERT", r) for r in data[:warmup]])
        timed_sync(cfg_path, spark, store, partitions)
        with connect(dst, "bench_dst") as c, c.cursor() as cur:
            cur.execute(f"TRUNCATE TABLE {table}")
    fill_store(store, [dml("INSERT", r) for r in data])
    quiesce(dst)
    job_insert, _ = timed_sync(cfg_path, spark, store, partitions)
    fill_store(store, [dml("UPDATE", r, {"k": "0", "c": "old"}) for r in upd_rows])
    quiesce(dst)
    job_update, _ = timed_sync(cfg_path, spark, store, partitions)
    spark.stop()
    return job_insert, job_update


def fresh_job_phases(*args) -> tuple[float, float]:
    """:func:`job_phases` in a process of its own, so in a JVM of its own (``--store kafka``).

    Sessions started one after another in one process share its JVM, whose JIT keeps warming:
    a store measured later ran faster for that alone (passes of 9.1, 8.2, 6.8 and 5.1 s, whichever
    store ran them). Every ``sluice run`` starts a JVM of its own, so each pass does too."""
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
        return pool.submit(job_phases, *args).result()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=2000,
                    help="rows of an untimed first sync (starts the Python worker, warms the JIT; 0: none)")
    ap.add_argument("--store", choices=["files", "kafka"], default="files",
                    help="kafka: also run the job with the Kafka store (the `kafka` service), same data, and compare")
    ap.add_argument("--repeat", type=int, default=1,
                    help="with --store kafka: run both stores this many times, alternating which goes first; "
                    "each store's best time of each phase counts")
    ap.add_argument("--round-rows", type=int, default=None,
                    help="spark.roundRows (default: the config's, 100000; 0 or the row count: one round, "
                    "as before rounds were bounded)")
    ap.add_argument("--record", action="store_true", help="append the result to docs/benchmarks.md")
    args = ap.parse_args()
    if args.store == "kafka":
        from pipeline.store.kafka.sparkjars import kafka_jars

        common.SESSION_JARS = kafka_jars()
    svc = services()
    src, dst = svc["mariadb"], svc["mariadb-target"]
    common.create_source_table(src, "bench_src", DDL.format(t="bench_src.t"))
    with connect(dst) as c, c.cursor() as cur:
        cur.execute("DROP DATABASE IF EXISTS bench_dst")
        cur.execute("CREATE DATABASE bench_dst")
        for t in ("t_raw", "t_job", "t_canal", "t_kafka"):
            cur.execute(DDL.format(t=f"bench_dst.{t}"))
    data = rows(args.rows)
    n_upd = args.rows // 4
    rnd = random.Random(7)
    upd_rows = [(i, rnd.randint(1, args.rows), "u" * 120, data[i - 1][3]) for i in
                rnd.sample(range(1, args.rows + 1), n_upd)]

    # raw multi-row executemany (pymysql rewrites INSERT ... VALUES into multi-row statements)
    quiesce(dst)  # every timed phase starts with the target's dirty pages written (bench/common.py)
    with connect(dst, "bench_dst") as c, c.cursor() as cur:
        t0 = time.perf_counter()
        for i in range(0, len(data), 3000):
            cur.executemany("INSERT INTO t_raw VALUES (%s,%s,%s,%s)", data[i:i + 3000])
            c.commit()
        raw_insert = time.perf_counter() - t0
    # canal-style: one UPDATE per row, commit every 3000
    with connect(dst, "bench_dst") as c, c.cursor() as cur:
        cur.execute("INSERT INTO t_canal SELECT * FROM t_raw")
        c.commit()
        quiesce(dst)
        t0 = time.perf_counter()
        for i, (pk, k, cc, _pad) in enumerate(upd_rows, 1):
            cur.execute("UPDATE t_canal SET k=%s, c=%s WHERE id=%s", (k, cc, pk))
            if i % 3000 == 0:
                c.commit()
        c.commit()
        canal_update = time.perf_counter() - t0

    with tempfile.TemporaryDirectory(prefix="sluice-bench-apply-") as tmpd:
        tmp = Path(tmpd)
        times: dict[str, list[tuple[float, float]]] = {"files": [], "kafka": []}
        for rep in range(args.repeat if args.store == "kafka" else 1):
            # alternate which store goes first: a drift of the machine's load hits both alike
            for which in ("files", "kafka") if rep % 2 == 0 else ("kafka", "files"):
                if which == "files":
                    cfg_path, table = deployment(tmp / f"files{rep}", src, dst, args.partitions,
                                                         round_rows=args.round_rows), "t_job"
                elif args.store == "kafka":
                    kafka = {"bootstrap.servers": svc["kafka"]["bootstrap"],
                             "topic": f"bench-apply-{uuid.uuid4().hex[:8]}",
                             "partitionsNum": args.partitions, "partitionHash": "bench_src.t:$pk$"}
                    cfg_path = deployment(tmp / f"kafka{rep}", src, dst, args.partitions, "t_kafka", kafka,
                                          round_rows=args.round_rows)
                    table = "t_kafka"
                else:
                    continue
                phases = fresh_job_phases if args.store == "kafka" else job_phases
                times[which].append(phases(cfg_path, dst, table, data, upd_rows, args.partitions, args.warmup))
        # each store's best time of each phase (--repeat > 1)
        job_insert, job_update = min(t[0] for t in times["files"]), min(t[1] for t in times["files"])
        if args.store == "kafka":
            k_insert, k_update = min(t[0] for t in times["kafka"]), min(t[1] for t in times["kafka"])

    with connect(dst, "bench_dst") as c, c.cursor() as cur:
        for t in ("t_job", "t_kafka") if args.store == "kafka" else ("t_job",):
            cur.execute(f"SELECT (SELECT COUNT(*) FROM {t}), (SELECT COUNT(*) FROM {t} j JOIN t_canal c USING (id) "
                        "WHERE j.k = c.k AND j.c = c.c AND j.pad = c.pad)")
            count, same = cur.fetchone()
            assert count == args.rows and same == args.rows, (t, count, same)

    r_ins = raw_insert / job_insert
    r_upd = canal_update / job_update
    result = {"rows": args.rows, "partitions": args.partitions,
              "raw_insert_rows_s": round(args.rows / raw_insert), "job_insert_rows_s": round(args.rows / job_insert),
              "insert_ratio": round(r_ins, 2), "updates": n_upd,
              "canal_update_rows_s": round(n_upd / canal_update), "job_update_rows_s": round(n_upd / job_update),
              "update_speedup": round(r_upd, 2)}
    if args.store == "kafka":
        result.update({"kafka_insert_rows_s": round(args.rows / k_insert),
                       "kafka_update_rows_s": round(n_upd / k_update),
                       "kafka_vs_files_insert": round(job_insert / k_insert, 2),
                       "kafka_vs_files_update": round(job_update / k_update, 2),
                       "kafka_vs_files": round((job_insert + job_update) / (k_insert + k_update), 2)})
    print(json.dumps(result))
    if args.record and args.store == "kafka":
        cmd = common.command_line("bench/apply.py")
        intro = ("The same job with the Kafka store (capture's records in a topic with `partitions` partitions hashed "
                 "by primary key; the executors read the offset ranges) vs the file store, same data, same "
                 "run, same target (`--repeat`: both stores that many times, alternating which goes first, each "
                 "store's best time per phase; each pass in a JVM of its own, as each `sluice run` has). "
                 "Target: Kafka rows/s >= 0.9x files.\n\n"
                 "| date | command | rows | files insert rows/s | Kafka insert rows/s | files update rows/s "
                 "| Kafka update rows/s | Kafka/files (all) |\n"
                 "|---|---|---|---|---|---|---|---|")
        line = (f"| {datetime.date.today()} | `{cmd}` | {args.rows} | {result['job_insert_rows_s']} | "
                f"{result['kafka_insert_rows_s']} | {result['job_update_rows_s']} | "
                f"{result['kafka_update_rows_s']} | "
                f"**{result['kafka_vs_files']}** |")
        section = "## Apply with the Kafka store (bench/apply.py --store kafka)"
        common.record_row(REPO / "docs" / "benchmarks.md", section, intro, line)
    elif args.record:
        cmd = common.command_line("bench/apply.py")
        intro = ("Whole `run_sync` (read batch files, split, partition, apply on executors, ack) on local Spark vs raw "
                 "baselines into an identical MariaDB table, same run. INSERT target: ratio >= 0.7 of raw multi-row "
                 "executemany. UPDATE target: >= 5x a canal-style one-statement-per-row baseline. Times exclude "
                 "SparkSession start-up (about 5 s once per run).\n\n| date | command | rows | raw insert rows/s | "
                 "job insert rows/s | ratio | updates | canal-style rows/s | job update rows/s | speed-up |\n"
                 "|---|---|---|---|---|---|---|---|---|---|")
        line = (f"| {datetime.date.today()} | `{cmd}` | {args.rows} | {result['raw_insert_rows_s']} "
                f"| {result['job_insert_rows_s']} | **{result['insert_ratio']}** | {n_upd} | "
                f"{result['canal_update_rows_s']} | {result['job_update_rows_s']} | **{result['update_speedup']}x** |")
        section = "## Apply through the Spark job (bench/apply.py)"
        common.record_row(REPO / "docs" / "benchmarks.md", section, intro, line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
