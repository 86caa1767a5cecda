"""Benchmark ``sluice repair`` of a large table with a share of its rows differing, under a steady
load that ``sluice run --follow`` replicates, against pt-table-sync's checksum-then-copy approach.

    .venv/bin/python bench/repair.py --rows 1000000 --differ 0.01 --rate 50 [--partitions 2] [--no-record]

1. Source ``bench_rep_<id>.sbtest1`` (sysbench's table) filled from MariaDB's sequence engine with
   the binlog off; the target mirror ``<db>_copy.sbtest1`` filled with the same generator on the
   target server (identical rows); the store starts at the binlog's end (``capture --once``), and
   ``sluice run --follow`` keeps running through both phases.
2. Damage (the same each phase): on the target, a third of ``--differ`` of the rows deleted, a third
   changed, a third of extra rows inserted.
3. Under sysbench ``oltp_write_only`` at ``--rate`` transactions/s on the source, timed:
   * ``sluice repair --group g1`` (the CLI: Spark's start included);
   * pt-table-sync ``--execute`` from the source to the target (checksums per chunk, then the
     differing rows copied), the baseline: it compares and writes without knowing what replication
     has applied, so a row it copies may be overwritten by an older change the follower applies
     after it, or it may copy an older row over a newer one.
4. After each phase the load stops, the follower catches up, and ``sluice verify`` counts the rows
   that still differ (0 is the only right answer).
Prints the results and records them, with the command, in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402

from bench.common import command_line, connect, record_row  # noqa: E402
from tests.conftest import ensure_service  # noqa: E402
from tests.support import sysbench  # noqa: E402

DDL = ("CREATE TABLE {t} (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, k INT NOT NULL DEFAULT 0, "
       "c CHAR(120) NOT NULL DEFAULT '', pad CHAR(60) NOT NULL DEFAULT '', KEY k_1 (k)) ENGINE=InnoDB")
FILL = ("INSERT INTO {t} SELECT seq, seq * 7919 % 1000003, CONCAT(LPAD(seq, 11, '0'), '-', "
        "REPEAT(SUBSTR(MD5(seq), 1, 10), 10)), CONCAT('pad-', REPEAT(SUBSTR(MD5(seq + 1), 1, 11), 5)) "
        "FROM seq_1_to_{n}")


def sql(info: dict, *stmts: str, db: str | None = None) -> list[tuple]:
    with connect(info, db, autocommit=True) as c, c.cursor() as cur:
        for s in stmts:
            cur.execute(s)
        return list(cur.fetchall())


def cli(*args: str, timeout: float = 3600, check: bool = True) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    p = subprocess.run([sys.executable, "-m", "pipeline.cli", *args], cwd=REPO, env=env, text=True,
                       capture_output=True, timeout=timeout)
    if check and p.returncode != 0:
        raise SystemExit(f"sluice {' '.join(args)} exited {p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}")
    return p


def damage(tgt: dict, tdb: str, rows: int, share: float) -> int:
    """Delete, change and add ``share`` of ``rows`` on the target (a third each); rows touched."""
    every = max(3, round(3 / share))
    extra = rows * share / 3
    sql(tgt, f"DELETE FROM sbtest1 WHERE id % {every} = 1",
        f"UPDATE sbtest1 SET c = CONCAT('damaged-', id) WHERE id % {every} = 2",
        f"INSERT INTO sbtest1 (id, k, c, pad) SELECT {rows} + seq, seq, 'extra', 'extra' FROM seq_1_to_{int(extra)}",
        db=tdb)
    return 2 * (rows // every) + int(extra)


def differing(cfg: Path) -> int:
    p = cli("verify", "--config", str(cfg), "--json", check=False)
    doc = json.loads(p.stdout)
    return int(doc["differing_rows"]) + sum(abs(t["source_rows"] - t["target_rows"]) for t in doc["tables"]
                                            if not t["differing_rows"])


def wait_caught_up(cfg: Path, timeout: float = 1800) -> None:
    from pipeline.config import load_config
    from pipeline.store import open_store

    store = open_store(load_config(cfg), create=False)

    def pending() -> int:  # a group that never synced has every stored row pending
        return sum(b.rows for b in store.batches(store.cursor("g1")))

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pending() == 0:
            time.sleep(3)  # what capture stores meanwhile shows up
            if pending() == 0:
                return
        time.sleep(1)
    raise SystemExit("the follower did not catch up")


def phase(name: str, run, src: dict, tgt: dict, db: str, tdb: str, cfg: Path, args) -> dict:
    touched = damage(tgt, tdb, args.rows, args.differ)
    load = subprocess.Popen(sysbench.command(src, db, "run", tables=1, table_size=args.rows, threads=2,
                                             seconds=36000, extra=(f"--rate={args.rate}",)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(5)
    try:
        t0 = time.perf_counter()
        detail = run()
        secs = time.perf_counter() - t0
        assert load.poll() is None, "the load stopped during the phase"
    finally:
        load.kill()
        load.wait()
    wait_caught_up(cfg)
    left = differing(cfg)
    print(f"{name}: {secs:.1f} s, {touched} rows damaged, {left} rows differ after the follower caught up; {detail}",
          flush=True)
    return {"seconds": secs, "touched": touched, "left": left, "detail": detail}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--differ", type=float, default=0.01)
    ap.add_argument("--rate", type=int, default=50, help="sysbench transactions/s on the source")
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--chunk", type=int, default=1000)
    ap.add_argument("--no-record", action="store_true")
    args = ap.parse_args()
    src, tgt = ensure_service("mariadb"), ensure_service("mariadb-target")
    db = f"bench_rep_{uuid.uuid4().hex[:6]}"
    tdb = f"{db}_copy"
    t0 = time.perf_counter()
    sql(src, "SET SESSION sql_log_bin = 0", f"CREATE DATABASE `{db}`", f"USE `{db}`", DDL.format(t=f"`{db}`.sbtest1"),
        FILL.format(t=f"`{db}`.sbtest1", n=args.rows), f"ANALYZE TABLE `{db}`.sbtest1")
    sql(tgt, f"CREATE DATABASE `{tdb}`", f"USE `{tdb}`", DDL.format(t=f"`{tdb}`.sbtest1"),
        FILL.format(t=f"`{tdb}`.sbtest1", n=args.rows))
    print(f"generated {args.rows} rows on both servers in {time.perf_counter() - t0:.1f} s")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "sluice.yml"
        (Path(tmp) / "m.yml").write_text(yaml.safe_dump({"groupId": "g1", "dbMapping": {
            "mirrorDb": True, "database": db, "targetDb": tdb}}))
        cfg.write_text(yaml.safe_dump({
            "source": {"name": db, "host": src["host"], "port": int(src["port"]), "user": src["user"],
                       "password": src["password"], "serverId": 7300 + os.getpid() % 100,
                       "filter": {"include": rf"{db}\..*"}},
            "store": {"path": str(Path(tmp) / "store")},
            "groups": [{"groupId": "g1", "mappings": ["m.yml"], "outerAdapters": [{
                "name": "rdb", "key": "t", "properties": {
                    "jdbc.url": f"jdbc:mysql://{tgt['host']}:{tgt['port']}/{tdb}",
                    "jdbc.username": tgt["user"], "jdbc.password": tgt["password"]}}]}],
            "spark": {"master": f"local[{args.partitions}]", "partitions": args.partitions}}))
        cli("capture", "--config", str(cfg), "--once")
        follow = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "run", "--config", str(cfg), "--follow",
                                   "--interval", "1"], cwd=REPO, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, env=dict(os.environ, PYSPARK_PYTHON=sys.executable),
                                  start_new_session=True)
        try:
            def sluice_repair() -> str:
                p = cli("repair", "--config", str(cfg), "--group", "g1", "--chunk-size", str(args.chunk),
                        "--partitions", str(args.partitions), "--json")
                t = json.loads(p.stdout.strip().splitlines()[-1])["tables"][f"{db}.sbtest1"]
                return (f"{t['chunks']} chunks, {t['differing']} differed, {t['upserted']} upserted, "
                        f"{t['deleted']} deleted, lock held {t['lock_held']:.1f} s, waited {t['lock_wait']:.1f} s")

            def pt_table_sync() -> str:
                dsn = "h={h},P={p},u={u},p={pw},D={d},t=sbtest1"
                cmd = ["pt-table-sync", "--execute", "--no-check-slave", "--no-check-triggers",
                       f"--chunk-size={args.chunk}", "--verbose",
                       dsn.format(h=src["host"], p=src["port"], u=src["user"], pw=src["password"], d=db),
                       dsn.format(h=tgt["host"], p=tgt["port"], u=tgt["user"], pw=tgt["password"], d=tdb)]
                p = subprocess.run(cmd, text=True, capture_output=True, timeout=7200)
                if p.returncode not in (0, 2):  # 2: differences found (and fixed)
                    raise SystemExit(f"pt-table-sync exited {p.returncode}: {p.stderr[-2000:]}")
                last = [ln for ln in p.stdout.splitlines() if "sbtest1" in ln][-1:] or ["?"]
                return "pt-table-sync " + " ".join(last[0].split())

            wait_caught_up(cfg)
            results["sluice repair"] = phase("sluice repair", sluice_repair, src, tgt, db, tdb, cfg, args)
            results["pt-table-sync"] = phase("pt-table-sync", pt_table_sync, src, tgt, db, tdb, cfg, args)
        finally:
            os.killpg(follow.pid, 9)
            follow.wait()
            sql(src, "SET SESSION sql_log_bin = 0", f"DROP DATABASE IF EXISTS `{db}`")
            sql(tgt, f"DROP DATABASE IF EXISTS `{tdb}`")
    if not args.no_record:
        record(args, results)


def record(args, results: dict) -> None:
    doc = REPO / "docs" / "benchmarks.md"
    section = "## Online repair against pt-table-sync (bench/repair.py)"
    intro = ("A mirror of a sysbench table with a share of its rows damaged on the target (a third deleted, a third "
             "changed, a third extra), repaired while sysbench `oltp_write_only` writes to the source and `sluice run "
             "--follow` replicates. *Left* counts the rows `sluice verify` finds different once the load stopped and "
             "the follower caught up: anything but 0 is a target the tool left diverged.\n\n"
             "| when | command | rows | differing | tool | seconds | left | detail |\n"
             "|---|---|---|---|---|---|---|---|")
    when = f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    for tool, r in results.items():
        record_row(doc, section, intro, f"| {when} | `{command_line('bench/repair.py')}` | {args.rows:,} | "
                   f"{r['touched']:,} | {tool} | {r['seconds']:.1f} | **{r['left']}** | {r['detail']} |")


if __name__ == "__main__":
    main()
