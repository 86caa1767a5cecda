"""Wall time of a cold, small ``sluice run`` against the floor: a bare Spark session and one job.

    nice -n -10 .venv/bin/python bench/small_run.py [--rounds 3] [--rows 1000] [--record]

Each measurement is a new process (JVM start included), timed from its start to its exit;
variants alternate, round after round, so that a change in the machine's load hits them alike:

* **floor** (the issue's definition): a bare SparkSession on ``local[2]``, one trivial
  ``mapInArrow`` job on 2 rows, stop -- with Spark's defaults, then with each technique added in
  turn: the class-data-sharing archive (``scripts/bootstrap``: ``sluice jvm build``), C1-only JIT
  (``-XX:TieredStopAtLevel=1``), then importing the driver's pandas/pyarrow while the JVM starts
  (what ``pipeline/job/session.py`` does) and Python workers that import PySpark's cached
  bytecode instead of its zip (``pipeline/job/pydaemon.py``) and plans interpreted instead of
  compiled to Java (``pipeline.job.jvm.SMALL_SQL_CONF``) together ("all");
* **run**: ``sluice run`` of a mirrorDb deployment into the target MariaDB (``spark.master:
  local[2]``, ``spark.partitions: 4``, as the issue measured) after ``--rows`` single-row INSERT
  transactions (and 2) on the source: capture, pre-flight, Spark, the sync, the run record; with
  everything on, and with the JVM techniques off (``SLUICE_JVM_ARCHIVE=0 SLUICE_JVM_SMALL=0``)
  and a 4-partition round (``spark.smallRows: 0``), i.e. as before issue 19.

Reported: the median of each variant; the run/floor ratio against the floor with every
technique on (what ``sluice run`` adds above it) and against the default floor. Targets (issue
19): a run with <= 1000 pending rows in <= 10 s and <= 1.2x the floor. ``--record`` appends to
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
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
from pipeline.job.jvm import LOG_OPTS, SMALL_OPTS, SMALL_SQL_CONF, archive_path  # noqa: E402

SECTION = "## Small runs: a cold `sluice run` against the floor (bench/small_run.py)"
INTRO = """
Wall seconds from process start to exit (JVM start included), median of `--rounds` alternating
rounds. Floor = bare SparkSession (`local[2]`) + one trivial `mapInArrow` job on 2 rows + stop:
Spark's defaults, + the class-data-sharing archive (CDS), + C1-only JIT, + the driver's imports
while the JVM starts and (from 2026-11-25 11:50) workers importing PySpark's cached bytecode
and (from 2026-11-25 18:40) plans interpreted instead of compiled to Java (all).
Run = `sluice run` (mirrorDb into MariaDB, `spark.partitions: 4`)
after N single-row INSERTs; "before" = JVM options off and a 4-partition round (as before issue
19). Ratio = run (N rows) / floor with everything on; in brackets / Spark's default floor.
Target: a run with <= 1000 rows <= 10 s and <= 1.2x the floor.

| date | command | floor default | + CDS | + CDS + C1 | all | run 2 rows | run N rows | N | run N before | ratio | load|
|---|---|---|---|---|---|---|---|---|---|---|---|
"""

FLOOR = r'''
import os, sys, threading
from pyspark.sql import SparkSession
if os.environ.get("FLOOR_PREFETCH") == "1":
    def _pre():
        import pyarrow, pyspark.testing.utils  # noqa
    threading.Thread(target=_pre, daemon=True).start()
b = (SparkSession.builder.master("local[2]").appName("floor")
     .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
     .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false"))
if os.environ.get("FLOOR_OPTS"):
    b = b.config("spark.driver.extraJavaOptions", os.environ["FLOOR_OPTS"])
if os.environ.get("FLOOR_DAEMON"):
    b = b.config("spark.python.daemon.module", os.environ["FLOOR_DAEMON"])
for k, v in __import__("json").loads(os.environ.get("FLOOR_CONF") or "{}").items():
    b = b.config(k, v)
spark = b.getOrCreate()
def f(it):
    for batch in it:
        yield batch
df = spark.createDataFrame([(1, "a"), (2, "b")], "id long, v string")
assert len(df.mapInArrow(f, df.schema).collect()) == 2
spark.stop()
'''


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, timeout=600)
    return time.perf_counter() - t0, p


def floor_variants() -> dict[str, dict[str, str]]:
    cds = archive_path()
    if cds is None:
        sys.exit("no class-data-sharing archive: run scripts/bootstrap (or sluice jvm build) first")
    arch = " ".join([f"-XX:SharedArchiveFile={cds}", *LOG_OPTS])
    c1 = " ".join(SMALL_OPTS)
    return {"floor default": {},
            "+ CDS": {"FLOOR_OPTS": arch},
            "+ CDS + C1": {"FLOOR_OPTS": f"{arch} {c1}"},
            "all": {"FLOOR_OPTS": f"{arch} {c1}", "FLOOR_PREFETCH": "1", "FLOOR_DAEMON": "pipeline.job.pydaemon",
                    "FLOOR_CONF": json.dumps(SMALL_SQL_CONF)}}


def deployment(tmp: Path, src: dict, dst: dict, db: str, small_rows: int | None) -> Path:
    mapping = {"dataSourceKey": "defaultDS", "destination": db, "groupId": "g1", "outerAdapterKey": "tgt",
               "dbMapping": {"mirrorDb": True, "database": db, "targetDb": f"{db}_copy"}}
    (tmp / "mappings").mkdir(exist_ok=True)
    (tmp / "mappings" / "m.yml").write_text(yaml.safe_dump(mapping))
    spark = {"master": "local[2]", "partitions": 4}
    if small_rows is not None:
        spark["smallRows"] = small_rows
    cfg = {"source": {"name": db, "host": src["host"], "port": src["port"], "user": src["user"],
                      "password": src["password"], "serverId": 7600 + os.getpid() % 300,
                      "filter": {"include": rf"{db}\..*"}},
           "store": {"path": str(tmp.parent / "store")},
           "groups": [{"groupId": "g1", "mappings": ["mappings/*.yml"], "outerAdapters": [{
               "name": "rdb", "key": "tgt", "properties": {
                   "jdbc.url": f"jdbc:mysql://{dst['host']}:{dst['port']}/{db}_copy",
                   "jdbc.username": dst["user"], "jdbc.password": dst["password"]}}]}],
           "spark": spark}
    (tmp / "sluice.yml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    return tmp / "sluice.yml"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--record", action="store_true")
    args = ap.parse_args()
    svc = services()
    src, dst = svc["mariadb"], svc["mariadb-target"]
    db = f"bsmall_{uuid.uuid4().hex[:6]}"
    tmp = Path(tempfile.mkdtemp(prefix="bench-small-"))
    for info, name in ((src, db), (dst, f"{db}_copy")):
        with connect(info, autocommit=True) as c, c.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
            cur.execute(f"CREATE DATABASE `{name}`")
            cur.execute(f"CREATE TABLE `{name}`.t (id BIGINT PRIMARY KEY, v VARCHAR(64), n INT)")
    (tmp / "now").mkdir()
    (tmp / "before").mkdir()
    cfg_now = deployment(tmp / "now", src, dst, db, None)
    cfg_before = deployment(tmp / "before", src, dst, db, 0)   # the same store: one capture position
    base = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    sl = [sys.executable, "-m", "pipeline.cli"]
    subprocess.run([*sl, "capture", "--config", str(cfg_now), "--once"], check=True, cwd=REPO, env=base,
                   capture_output=True)
    next_id = [1]

    def write(n: int) -> None:
        with connect(src, db) as c, c.cursor() as cur:
            for _ in range(n):
                cur.execute("INSERT INTO t VALUES (%s, %s, %s)", (next_id[0], f"row {next_id[0]}", next_id[0]))
                c.commit()
                next_id[0] += 1

    def run(cfg: Path, n: int, env: dict[str, str]) -> float:
        write(n)
        secs, p = timed([*sl, "run", "--config", str(cfg), "--json"], env)
        rec = json.loads([ln for ln in p.stdout.splitlines() if ln.startswith("{")][-1])
        synced = rec["sync"]["g1"].get("rows")
        assert p.returncode == 0 and synced == n, (p.returncode, rec.get("errors"), p.stderr[-2000:])
        return secs

    floors = floor_variants()
    times: dict[str, list[float]] = {k: [] for k in [*floors, "run 2", "run N", "run N before"]}
    loads = []
    for r in range(args.rounds):
        loads.append(os.getloadavg()[0])
        for name, extra in floors.items():
            secs, p = timed([sys.executable, "-c", FLOOR], {**base, **extra})
            assert p.returncode == 0, p.stderr[-3000:]
            times[name].append(secs)
        times["run 2"].append(run(cfg_now, 2, base))
        times["run N"].append(run(cfg_now, args.rows, base))
        times["run N before"].append(run(cfg_before, args.rows, {**base, "SLUICE_JVM_ARCHIVE": "0",
                                                                 "SLUICE_JVM_SMALL": "0"}))
        print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.2f}" for k, v in times.items()), flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    ratio, ratio_default = med["run N"] / med["all"], med["run N"] / med["floor default"]
    load = statistics.mean(loads)
    print("median: " + ", ".join(f"{k} {v:.2f} s" for k, v in med.items())
          + f"; run {args.rows} rows / floor (all) {ratio:.2f}, / default floor {ratio_default:.2f}; load {load:.2f}")
    if args.record:
        record_row(REPO / "docs" / "benchmarks.md", SECTION, INTRO,
                   f"| {dt.date.today()} | `{command_line('bench/small_run.py')}` | {med['floor default']:.1f} "
                   f"| {med['+ CDS']:.1f} | {med['+ CDS + C1']:.1f} | {med['all']:.1f} | {med['run 2']:.1f} "
                   f"| {med['run N']:.1f} | {args.rows} | {med['run N before']:.1f} | **{ratio:.2f}** "
                   f"({ratio_default:.2f}) | {load:.2f} |")
    for info, name in ((src, db), (dst, f"{db}_copy")):
        with connect(info, autocommit=True) as c, c.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")


if __name__ == "__main__":
    main()
