"""What foreign keys cost: sysbench-like OLTP through the whole job into a target whose tables
have a foreign key (one ordered group: one stream, source order) vs the same tables without it
(hash-partitioned by key), same changes, same run.

The changes are sysbench ``oltp_write_only`` transactions on ``sbtest1..4`` (id, k, c, pad):
UPDATE of the indexed ``k``, UPDATE of ``c``, DELETE and re-INSERT of one id. With the foreign
key, every ``sbtestN.k`` references ``kref(id)``, which joins the four tables into one group.

    .venv/bin/python bench/fk.py [--txns 25000] [--partitions 4] [--record]

Uses the running ``mariadb`` and ``mariadb-target`` services. The ratio is FK rows/s / no-FK
rows/s (1.0: foreign keys cost nothing).
"""

from __future__ import annotations

import argparse
import datetime
import random
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench import common  # noqa: E402
from bench.common import connect, fill_store, open_job, quiesce, services, timed_sync  # noqa: E402

SRC = "bench_fksrc"
TABLES = [f"sbtest{i}" for i in range(1, 5)]
SIZE = 10_000
TYPES = {"id": "int", "k": "int", "c": "char(120)", "pad": "char(60)"}
DDL = "CREATE TABLE {t} (id INT NOT NULL PRIMARY KEY, k INT NOT NULL, c CHAR(120) NOT NULL, pad CHAR(60) NOT NULL, " \
      "KEY k_idx (k){fk}) ENGINE=InnoDB"
FK = ", CONSTRAINT fk_{t} FOREIGN KEY (k) REFERENCES kref (id)"


def schema(info: dict, db: str, with_fk: bool, rows: bool) -> None:
    """``db`` with ``kref`` and ``sbtest1..4`` (``SIZE`` rows each when ``rows``)."""
    with connect(info, autocommit=True) as c, c.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{db}`")
        cur.execute(f"CREATE DATABASE `{db}`")
        cur.execute(f"USE `{db}`")
        cur.execute("CREATE TABLE kref (id INT NOT NULL PRIMARY KEY) ENGINE=InnoDB")
        cur.execute(f"INSERT INTO kref SELECT seq FROM seq_1_to_{2 * SIZE}")
        for t in TABLES:
            cur.execute(DDL.format(t=t, fk=FK.format(t=t) if with_fk else ""))
            if rows:
                cur.execute(f"INSERT INTO {t} SELECT seq, seq, LPAD(seq, 120, 'c'), LPAD(seq, 60, 'p') "
                            f"FROM seq_1_to_{SIZE}")


def changes(txns: int) -> list[dict]:
    """sysbench oltp_write_only transactions as single-row Dml records (valid images)."""
    rnd = random.Random(7)
    state = {t: {i: (i, str(i).rjust(120, "c"), str(i).rjust(60, "p")) for i in range(1, SIZE + 1)} for t in TABLES}
    out = []

    def row(i, k, c, pad):
        return {"id": str(i), "k": str(k), "c": c, "pad": pad}

    for n in range(txns):
        t = TABLES[n % 4]
        rows = state[t]
        i = rnd.randint(1, SIZE)
        k, c, pad = rows[i]
        nk = rnd.randint(1, 2 * SIZE)
        out.append(common.dml(SRC, t, "UPDATE", row(i, nk, c, pad), TYPES, old={"k": str(k)}))
        rows[i] = (nk, c, pad)
        j = rnd.randint(1, SIZE)
        k, c, pad = rows[j]
        nc = f"{rnd.getrandbits(64):020d}-" * 5 + "x" * 15
        out.append(common.dml(SRC, t, "UPDATE", row(j, k, nc, pad), TYPES, old={"c": c}))
        rows[j] = (k, nc, pad)
        d = rnd.randint(1, SIZE)
        k, c, pad = rows[d]
        out.append(common.dml(SRC, t, "DELETE", row(d, k, c, pad), TYPES))
        nk = rnd.randint(1, 2 * SIZE)
        out.append(common.dml(SRC, t, "INSERT", row(d, nk, c, pad), TYPES))
        rows[d] = (nk, c, pad)
    return out


def run(tmp: Path, src: dict, dst: dict, target_db: str, records: list[dict], partitions: int) -> tuple[float, int]:
    mapping = {"groupId": "g", "dbMapping": {"mirrorDb": True, "database": SRC, "targetDb": target_db}}
    adapter = {"name": "rdb", "properties": {"jdbc.url": f"jdbc:mysql://{dst['host']}:{dst['port']}/{target_db}",
                                             "jdbc.username": "root", "jdbc.password": dst["password"]}}
    cfg = common.write_deployment(tmp, src, adapter, {"m.yml": mapping}, partitions)
    spark, store = open_job(cfg, f"bench-fk-{target_db}")
    fill_store(store, records)
    quiesce(dst)
    secs, summary = timed_sync(cfg, spark, store, partitions)
    return secs, summary.rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--txns", type=int, default=25_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--record", action="store_true", help="append the result to docs/benchmarks.md")
    args = ap.parse_args()
    svc = services()
    src, dst = svc["mariadb"], svc["mariadb-target"]
    schema(src, SRC, with_fk=True, rows=False)
    records = changes(args.txns)
    schema(dst, "bench_warm", with_fk=False, rows=True)  # untimed: the JVM's first sync compiles the plan
    with tempfile.TemporaryDirectory() as tmp:
        run(Path(tmp), src, dst, "bench_warm", records[:4000], args.partitions)
    results = {}
    for name, with_fk in (("bench_nofk", False), ("bench_fk", True)):
        schema(dst, name, with_fk=with_fk, rows=True)
        with tempfile.TemporaryDirectory() as tmp:
            secs, n = run(Path(tmp), src, dst, name, records, args.partitions)
        results[name] = n / secs
        print(f"{name}: {n} rows in {secs:.1f} s = {n / secs:,.0f} rows/s", flush=True)
    for a, b in (("bench_nofk", "bench_fk"),):
        with connect(dst) as c, c.cursor() as cur:
            for t in TABLES:
                cur.execute(f"SELECT COUNT(*), SUM(CRC32(CONCAT(id, k, c, pad))) FROM `{a}`.{t}")
                x = cur.fetchone()
                cur.execute(f"SELECT COUNT(*), SUM(CRC32(CONCAT(id, k, c, pad))) FROM `{b}`.{t}")
                assert cur.fetchone() == x, f"{t} differs between the two targets"
    ratio = results["bench_fk"] / results["bench_nofk"]
    print(f"foreign keys: {ratio:.2f} of the rows/s without them ({args.partitions} partitions)")
    if args.record:
        common.record_row(
            REPO / "docs" / "benchmarks.md", "## Foreign keys (bench/fk.py)",
            "sysbench-like OLTP (4 tables, UPDATE k, UPDATE c, DELETE + INSERT per transaction) through the "
            "whole job into tables with a foreign key (one ordered group) and without (hash-partitioned), "
            "same changes, same run.\n\n| date | command | rows | no FK rows/s | FK rows/s | ratio |\n"
            "|---|---|---|---|---|---|",
            f"| {datetime.date.today()} | `{common.command_line('bench/fk.py')}` | {len(records)} | "
            f"{results['bench_nofk']:,.0f} | {results['bench_fk']:,.0f} | {ratio:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
