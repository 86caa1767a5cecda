"""Many small tables: what one DDL barrier costs as the number of mirrored tables grows.

    .venv/bin/python bench/ddl_tables.py [--tables 100,300,1000] [--rows 3] [--pattern grouped] [--record]

For each table count N: a new source database whose N tables are created and given ``--rows``
rows each (``grouped``: every CREATE TABLE first, then the rows, as a schema script and a data
load do; ``interleaved``: each table's rows right after its CREATE), a mirrorDb deployment into
an empty database of the target MariaDB, capture (not timed), then one cold ``sluice run``, timed
from process start to exit. From the run's JSON log: the DDL phase (first to last replayed DDL,
divided by N: ms per DDL), the ms per DDL of the first and of the last tenth of the tables (flat
when they are alike: the cost of a DDL does not grow with the tables before it), and the rows
applied; the target is compared with the source (every table, every row).

Issue 38: the 1,000-table run took more than 10 minutes (331 tables replayed, each DDL slower than
the one before: 17 s for tables 1-50, 146 s for 250-300); the goal is well under a minute with a
flat per-DDL cost. ``--record`` adds a row per N to docs/benchmarks.md.
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

import yaml  # noqa: E402

from bench.common import command_line, connect, record_row, services  # noqa: E402

SECTION = "## Many tables: the cost of a DDL barrier (bench/ddl_tables.py)"
INTRO = """
One cold `sluice run` (mirrorDb into MariaDB, `local[2]`) after N tables were created on the source
and given 3 rows each (`grouped`: all CREATE TABLEs first, then the rows; `interleaved`: each table's
rows right after its CREATE). DDL phase = first to last replayed DDL in the run's log; ms/DDL first
and last tenth: the DDL phase's rate over the first and the last N/10 tables (flat = alike).
Issue 38 before the change: 1,000 tables, 331 replayed after 10 minutes (tables 1-50 in 17 s,
250-300 in 146 s). Goal: the 1,000-table run well under a minute, per-DDL cost flat.

| date | command | pattern | tables | run s | DDL phase s | ms/DDL | first tenth | last tenth | rows | equal | load |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"""


def deployment(tmp: Path, src: dict, dst: dict, db: str) -> Path:
    mapping = {"dataSourceKey": "defaultDS", "destination": db, "groupId": "g1", "outerAdapterKey": "tgt",
               "dbMapping": {"mirrorDb": True, "database": db, "targetDb": f"{db}_copy"}}
    (tmp / "mappings").mkdir(parents=True, exist_ok=True)
    (tmp / "mappings" / "m.yml").write_text(yaml.safe_dump(mapping))
    cfg = {"source": {"name": db, "host": src["host"], "port": src["port"], "user": src["user"],
                      "password": src["password"], "serverId": 7300 + os.getpid() % 300,
                      "filter": {"include": rf"{db}\..*"}},
           "store": {"path": str(tmp / "store")},
           "groups": [{"groupId": "g1", "mappings": ["mappings/*.yml"], "outerAdapters": [{
               "name": "rdb", "key": "tgt", "properties": {
                   "jdbc.url": f"jdbc:mysql://{dst['host']}:{dst['port']}/{db}_copy",
                   "jdbc.username": dst["user"], "jdbc.password": dst["password"]}}]}],
           "spark": {"master": "local[2]", "partitions": 2}}
    (tmp / "sluice.yml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    return tmp / "sluice.yml"


def make_tables(src: dict, db: str, n: int, rows: int, pattern: str) -> None:
    ddl = "CREATE TABLE `t{i:04d}` (id INT PRIMARY KEY, name VARCHAR(40) NOT NULL, amount DECIMAL(10,2))"
    with connect(src, db, autocommit=True) as c, c.cursor() as cur:
        def fill(i: int) -> None:
            cur.executemany(f"INSERT INTO `t{i:04d}` VALUES (%s, %s, %s)",
                            [(r, f"row {r} of {i}", r * 1.5) for r in range(1, rows + 1)])
        for i in range(n):
            cur.execute(ddl.format(i=i))
            if pattern == "interleaved":
                fill(i)
        if pattern == "grouped":
            for i in range(n):
                fill(i)


def ts(line: dict) -> float:
    return dt.datetime.fromisoformat(line["ts"].replace("Z", "+00:00")).timestamp()


def equal(src: dict, dst: dict, db: str) -> bool:
    """Every table of the source database has the same rows on the target."""
    with connect(src, db) as a, connect(dst, f"{db}_copy") as b, a.cursor() as ca, b.cursor() as cb:
        ca.execute("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s", (db,))
        for (t,) in ca.fetchall():
            ca.execute(f"SELECT * FROM `{t}` ORDER BY id")
            try:
                cb.execute(f"SELECT * FROM `{t}` ORDER BY id")
            except Exception:  # noqa: BLE001 - a table missing on the target
                return False
            if ca.fetchall() != cb.fetchall():
                return False
    return True


def one(src: dict, dst: dict, n: int, rows: int, pattern: str) -> dict:
    db = f"bddl_{n}_{uuid.uuid4().hex[:6]}"
    tmp = Path(tempfile.mkdtemp(prefix="bench-ddl-"))
    for info, name in ((src, db), (dst, f"{db}_copy")):
        with connect(info, autocommit=True) as c, c.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
            cur.execute(f"CREATE DATABASE `{name}`")
    cfg = deployment(tmp, src, dst, db)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    sl = [sys.executable, "-m", "pipeline.cli"]
    subprocess.run([*sl, "capture", "--config", str(cfg), "--once"], check=True, cwd=REPO, env=env,
                   capture_output=True)
    make_tables(src, db, n, rows, pattern)
    subprocess.run([*sl, "capture", "--config", str(cfg), "--once"], check=True, cwd=REPO, env=env,
                   capture_output=True)
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    p = subprocess.run([*sl, "--log-json", "run", "--config", str(cfg), "--json"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=3600)
    secs = time.perf_counter() - t0
    rec = json.loads([ln for ln in p.stdout.splitlines() if ln.startswith('{"run"')][-1])
    assert p.returncode == 0, (rec.get("errors"), p.stderr[-3000:])
    logs = [json.loads(ln) for ln in (p.stdout + p.stderr).splitlines() if ln.startswith('{"component"')]
    ddl = [ts(x) for x in logs if x.get("component") == "sync" and x.get("event") == "ddl"
           and x.get("kind") == "CREATE" and x.get("table")]
    assert len(ddl) >= n, f"{len(ddl)} CREATE TABLEs replayed of {n}"
    tenth = max(1, n // 10)
    first = (ddl[tenth] - ddl[0]) / tenth * 1000
    last = (ddl[-1] - ddl[-1 - tenth]) / tenth * 1000
    start = ts(logs[0])
    out = {"before_ddl_s": ddl[0] - start, "after_ddl_s": ts(logs[-1]) - ddl[-1], "tables": n, "run_s": secs,
           "ddl_s": ddl[-1] - ddl[0], "ms_per_ddl": (ddl[-1] - ddl[0]) / n * 1000,
           "first_ms": first, "last_ms": last, "rows": rec["sync"]["g1"].get("rows"),
           "equal": equal(src, dst, db), "load": load}
    for info, name in ((src, db), (dst, f"{db}_copy")):
        with connect(info, autocommit=True) as c, c.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tables", default="100,300,1000")
    ap.add_argument("--rows", type=int, default=3)
    ap.add_argument("--pattern", choices=("grouped", "interleaved"), default="grouped")
    ap.add_argument("--record", action="store_true")
    args = ap.parse_args()
    svc = services()
    src, dst = svc["mariadb"], svc["mariadb-target"]
    for n in (int(x) for x in args.tables.split(",")):
        r = one(src, dst, n, args.rows, args.pattern)
        print(f"{n} tables ({args.pattern}): run {r['run_s']:.1f} s (before the first DDL {r['before_ddl_s']:.1f} s, "
              f"after the last {r['after_ddl_s']:.1f} s), DDL phase {r['ddl_s']:.1f} s, "
              f"{r['ms_per_ddl']:.0f} ms/DDL (first tenth {r['first_ms']:.0f}, last tenth {r['last_ms']:.0f}), "
              f"{r['rows']} rows, equal {r['equal']}, load {r['load']:.1f}", flush=True)
        if args.record:
            record_row(REPO / "docs" / "benchmarks.md", SECTION, INTRO,
                       f"| {dt.date.today()} | `{command_line('bench/ddl_tables.py')}` | {args.pattern} | {n} "
                       f"| {r['run_s']:.1f} | {r['ddl_s']:.1f} | {r['ms_per_ddl']:.0f} | {r['first_ms']:.0f} "
                       f"| {r['last_ms']:.0f} | {r['rows']} | {r['equal']} | {r['load']:.1f} |")


if __name__ == "__main__":
    main()
