"""A backlog of OLTP traffic applied by a parallel MariaDB replica and by Sluice, same range, same run.

    .venv/bin/python bench/backlog.py [--tables 4] [--table-size 20000] [--seconds 45] [--threads 4]
        [--partitions 2] [--lanes 1[,2,4]] [--repeat 1] [--round-rows N] [--serial] [--plain] [--record]

Needs ``scripts/services start mariadb mariadb-target mariadb-replica``. On the source MariaDB a
fresh, empty database gets sysbench's tables (``--tables`` x ``--table-size``, prepare: CREATE TABLE,
multi-row INSERTs, CREATE INDEX) and then ``oltp_write_only`` for ``--seconds`` on ``--threads``
threads with no rate limit; the binlog positions before and after are the *range*. Then, each into
an empty database of its own MariaDB (issue 38, point 1):

* **replica**: the ``mariadb-replica`` service (``slave_parallel_threads=4``,
  ``slave_parallel_mode=optimistic``): ``CHANGE MASTER TO MASTER_LOG_FILE/POS`` = the range's start,
  ``START SLAVE UNTIL MASTER_LOG_FILE/POS`` = its end; timed from START until the executed position
  reaches the end (its IO thread's download of the range included);
* **Sluice**: a deployment mirroring the database (canal ``mirrorDb``) into the ``mariadb-target``
  (``local[P]``, ``spark.partitions: P``): ``sluice capture --once --from <range start>`` and
  ``sluice sync``, each timed as a whole process (JVM start, pre-flight, every round and ack), and
  the job's own segment log (``plan_s``: building the segment's plan on the driver, ``worker_s``:
  the slowest partition's time in its Python worker). ``--lanes 1,2,4 --repeat 2`` syncs the same
  captured range again per value (``spark.applyLanes``), each time into a fresh database, cursor back
  to 0, the round sizer's memory removed;
* with ``--plain`` Sluice's connections are plain text like the replica's link (``MASTER_SSL=0``):
  ``source.ssl: {disabled: true}`` and the target's ``tls.mode: disable``; by default it takes the TLS
  both servers offer (capture decrypts the binlog stream, the writers encrypt their statements);
* **serial** (``--serial``): ``mariadb-binlog --start-position --stop-position | mariadb`` into a
  database of its own on the target (``--rewrite-db``), the single-threaded replay.

Every copy is compared with the source byte for byte (every table, every row, in key order: a
SHA-256 of the ordered rows as the server returns them). Ratio = replica seconds / Sluice seconds
(capture + sync); >= 1.0 means Sluice applied the backlog at least as fast. Services are quiesced
(dirty pages written) before each timed phase. ``--record`` appends one row per Sluice pass to
docs/benchmarks.md, misses included.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.backlog_parts import (  # noqa: E402
    Loadavg,
    binlog_position,
    compare,
    run_replica,
    run_serial,
    segment_report,
    write_deployment,
)
from bench.common import command_line, connect, quiesce, record_row, services  # noqa: E402
from bench.cpu import CpuMeter  # noqa: E402
from tests.support import sysbench  # noqa: E402

SECTION = "## Backlog apply against a parallel MariaDB replica (bench/backlog.py)"
INTRO = """
One backlog on the source MariaDB (a sysbench prepare of `--tables` x `--table-size` rows, then
`oltp_write_only` for `--seconds` on `--threads` threads, no rate limit), its binlog range applied
in the same run by (a) the `mariadb-replica` service (`slave_parallel_threads=4`,
`slave_parallel_mode=optimistic`, `START SLAVE UNTIL` the range's end, timed from START until the
executed position reaches the end) and (b) Sluice (`sluice capture --once --from <start>`, then
`sluice sync`, both timed as whole processes; mirrorDb into the `mariadb-target`, `local[2]`,
`spark.partitions: 2`), each into an empty database of its own MariaDB; every copy compared with
the source byte for byte. Ratio = replica s / (capture + sync) s: >= 1.0 means Sluice at least as
fast (the goal of issue 38). Segments: count, then `plan_s` and `worker_s` summed over them and the
sync's seconds outside its rounds (JVM start, pre-flight). Load: the 1-minute load average, mean
over the run's timed phases. CPU s (bench/cpu.py): the machine's busy CPU seconds (all processes,
from /proc/stat) during the replica's apply / Sluice's capture + sync.

| date | command | rows | replica s | capture s | sync s | ratio | replica rows/s | Sluice rows/s | lanes |\
 segments | serial s | equal | load | CPU s |
|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|
"""


def sluice_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "pipeline.cli", "--log-json", *args]


def timed(cmd: list[str], env: dict) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    secs = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd[3:])} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return secs, proc


def make_backlog(src: dict, db: str, args) -> tuple[tuple[str, int], tuple[str, int], float]:
    """sysbench prepare + oltp_write_only on ``db`` (empty, existing); the range and sysbench's rows/s."""
    shape = {"tables": args.tables, "table_size": args.table_size}
    start = binlog_position(src)
    sysbench.prepare(src, db, create=False, **shape)
    out = subprocess.run(sysbench.command(src, db, "run", **shape, threads=args.threads, seconds=args.seconds,
                                          extra=("--rate=0",)), check=True, capture_output=True, text=True).stdout
    end = binlog_position(src)
    tps = next((float(x.split("(")[1].split()[0]) for x in out.splitlines() if "transactions:" in x), 0.0)
    return start, end, 4 * tps


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tables", type=int, default=4)
    ap.add_argument("--table-size", type=int, default=20000)
    ap.add_argument("--seconds", type=int, default=45)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--lanes", default="1", help="spark.applyLanes of each Sluice pass, comma-separated (e.g. 1,2,4)")
    ap.add_argument("--repeat", type=int, default=1, help="Sluice passes per --lanes value (the range captured once)")
    ap.add_argument("--round-rows", type=int, default=None,
                    help="spark.roundRows of the deployment (default: the config's default)")
    ap.add_argument("--serial", action="store_true", help="also a serial replay: mariadb-binlog | mariadb")
    ap.add_argument("--plain", action="store_true", help="Sluice without TLS to the source and the target, as "
                    "the replica's link (MASTER_SSL=0); by default Sluice takes the TLS both servers offer")
    ap.add_argument("--keep", action="store_true",
                    help="keep the databases and the deployment's store (else only its logs stay)")
    ap.add_argument("--record", action="store_true", help="append the result to docs/benchmarks.md")
    args = ap.parse_args()
    lanes = [int(x) for x in args.lanes.split(",")]
    from pipeline.config import SparkConfig

    if max(lanes) > 1 and "applyLanes" not in SparkConfig.model_fields:
        sys.exit("--lanes above 1 needs spark.applyLanes, which this checkout does not have (the apply-lanes "
                 "experiment was measured and not landed: docs/benchmarks.md)")
    svc = services()
    missing = [n for n in ("mariadb", "mariadb-target", "mariadb-replica") if n not in svc]
    if missing:
        sys.exit(f"start {', '.join(missing)} first: scripts/services start mariadb mariadb-target mariadb-replica")
    src, dst, rep = svc["mariadb"], svc["mariadb-target"], svc["mariadb-replica"]
    db = f"backlog_{uuid.uuid4().hex[:6]}"
    tmp = Path(tempfile.mkdtemp(prefix="bench-backlog-"))
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    load = Loadavg()
    cpu = CpuMeter({name: int(svc[name]["pid"]) for name in ("mariadb", "mariadb-target", "mariadb-replica")})
    copies: list[tuple[dict, str]] = [(rep, db)]
    for info, name in ((src, db), *copies):
        sysbench.create_database(info, name)
    try:
        start, end, sb_rows = make_backlog(src, db, args)
        print(f"range {start[0]}:{start[1]} .. {end[0]}:{end[1]}; sysbench wrote {sb_rows:.0f} rows/s")
        for info in (src, rep):
            quiesce(info)
        with load.phase(), cpu.phase("replica", "mariadb-replica", "mariadb"):
            replica_s = run_replica(rep, src, start, end)
        print(f"replica: {replica_s:.1f} s, CPU {_cpu(cpu, 'replica')}")
        cfg = write_deployment(tmp, src, dst, db, f"{db}_p0", args.partitions, lanes[0], args.round_rows, args.plain)
        sysbench.create_database(dst, f"{db}_p0")
        quiesce(dst)
        with load.phase(), cpu.phase("capture", "mariadb"):
            capture_s, _ = timed(sluice_cmd("capture", "--config", str(cfg), "--once", "--from",
                                            f"{start[0]}:{start[1]}"), env)
        print(f"capture: {capture_s:.1f} s, CPU {_cpu(cpu, 'capture')}")
        passes = []
        for i, n in enumerate(x for x in lanes for _ in range(args.repeat)):
            target = f"{db}_p{i}"
            if i:
                cfg = write_deployment(tmp, src, dst, db, target, args.partitions, n, args.round_rows, args.plain)
                sysbench.create_database(dst, target)
                timed(sluice_cmd("store", "set-cursor", "--config", str(cfg), "--group", "g", "--to", "0"), env)
            shutil.rmtree(tmp / "store" / "rounds", ignore_errors=True)  # each pass sizes its rounds afresh
            quiesce(dst)
            la0 = os.getloadavg()[0]
            with load.phase(), cpu.phase(f"sync-{i}", "mariadb-target"):
                sync_s, proc = timed(sluice_cmd("sync", "--config", str(cfg), "--group", "g", "--json"), env)
            summary = json.loads([x for x in proc.stdout.splitlines() if x.startswith("{")][-1])
            seg = segment_report(proc.stderr, sync_s)
            copies.append((dst, target))
            passes.append({"lanes": n, "sync_s": sync_s, "rows": summary["rows"], "seg": seg, "target": target,
                           "load": la0, "log": proc.stderr, "cpu": cpu.machine(f"sync-{i}")})
            (tmp / f"sync-{i}.log").write_text(proc.stderr)
            print(f"sync pass {i} (lanes {n}): {sync_s:.1f} s, {summary['rows']} rows, load {la0:.2f}, "
                  f"CPU {_cpu(cpu, f'sync-{i}')}; {seg['text']}")
        serial_s = None
        if args.serial:
            sysbench.create_database(dst, f"{db}_serial")
            quiesce(dst)
            with load.phase():
                serial_s = run_serial(src, dst, start, end, db, f"{db}_serial")
            copies.append((dst, f"{db}_serial"))
            print(f"serial: {serial_s:.1f} s")
        diffs = compare(src, db, copies)
        equal = "all equal" if not diffs else "DIFFER: " + "; ".join(diffs)
        print(equal)
        la = load.mean()
        for p in passes:
            rows = p["rows"]
            sluice_s = capture_s + p["sync_s"]
            ratio = replica_s / sluice_s
            line = (f"| {dt.date.today()} | `{command_line('bench/backlog.py')}` | {rows} | {replica_s:.1f} "
                    f"| {capture_s:.1f} | {p['sync_s']:.1f} | {ratio:.2f} | {rows / replica_s:.0f} "
                    f"| {rows / sluice_s:.0f} "
                    f"| {p['lanes']} | {p['seg']['short']} | {'-' if serial_s is None else f'{serial_s:.0f}'} "
                    f"| {'yes' if not diffs else 'NO'} | {la:.2f} (pass start {p['load']:.2f}) "
                    f"| {cpu.machine('replica'):.0f} / {cpu.machine('capture'):.0f} + {p['cpu']:.0f} |")
            print(f"lanes {p['lanes']}: ratio {ratio:.2f} (replica {rows / replica_s:.0f} rows/s, "
                  f"Sluice {rows / sluice_s:.0f} rows/s, sync alone {rows / p['sync_s']:.0f} rows/s)")
            if args.record:
                record_row(REPO / "docs" / "benchmarks.md", SECTION, INTRO, line)
        print(f"deployment and logs: {tmp}")
        return 0 if not diffs else 5
    finally:
        if not args.keep:  # the logs stay; the store (~0.5 GB per 1M changes) goes
            shutil.rmtree(tmp / "store", ignore_errors=True)
            for info, name in ((src, db), *copies):
                sysbench.drop_database(info, name)
            with connect(rep, autocommit=True) as c, c.cursor() as cur:
                cur.execute("STOP SLAVE")
                cur.execute("RESET SLAVE ALL")


def _cpu(cpu: CpuMeter, phase: str) -> str:
    got = cpu.phases[phase]
    return ", ".join(f"{k} {v:.1f} s" for k, v in got.items())


if __name__ == "__main__":
    sys.exit(main())
