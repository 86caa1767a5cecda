"""Freshness of ``sluice run --follow``: seconds from a source commit until the row is in the target.

    nice -n -10 .venv/bin/python bench/follow_latency.py [--seconds 60] [--rate 0] [--tables 4] [--table-size 20000]
        [--threads 4] [--every 0.5] [--partitions 2] [--es] [--capture-beside] [--replica | --replica-only]
        [--cold-start] [--record]

A fresh database on the source MariaDB gets sysbench's schema (``--tables`` tables of
``--table-size`` rows) and a ``probe`` table. The deployment mirrors the database into the target
MariaDB (group ``rdb``, a canal ``mirrorDb`` mapping, ``spark.partitions: 2``) and, with ``--es``,
indexes the probe table into Elasticsearch (group ``es``, row mode). ``sluice run --follow
--interval 1`` starts from the current binlog position; then, for ``--seconds``:

* sysbench ``oltp_write_only`` writes on ``--threads`` threads at ``--rate`` transactions/s
  (0, the default: as fast as the primary takes them, issue 38);
* ``--capture-beside``: ``sluice capture --follow`` in a process of its own feeds the store while
  ``sluice run --follow --no-capture`` applies (capture no longer waits between rounds);
* a probe writer inserts one row every ``--every`` s and notes the wall time right after its
  COMMIT returned (``commit_at``);
* with ``--replica``, the anchor: the ``mariadb-replica`` service (``slave_parallel_threads=4``,
  optimistic; the same schema prepared on it) replicates the source from the same position,
  started with the follower, and is polled like a target (``replica``): how far a parallel
  replica of the same primary falls behind on the same machine; ``--replica-only``: the replica
  without the follower (neither takes CPU from the other);
* a poller per target asks every 50 ms for the probes not seen yet, each by its own key
  (MariaDB: ``SELECT id FROM probe WHERE id IN (...)``; Elasticsearch: the ``ids`` of searchable
  documents), and notes when each was first seen.

Latency of a probe = first seen - commit_at (the poll period adds up to 50 ms). The follower's
start is left out: the probes start with the follower, and the load starts ``--warmup`` seconds
after the first probe reached every target (JVM start, the first round's compilation: the steady
state of a follower that runs for days is measured, not its start); the window opens with the
load. ``--cold-start`` (as before 2026-11-28): the load starts with the follower, whose cold
start then runs under full load, and the window opens ``--warmup`` s after the first probe
arrived, or ``--startup`` s after the start if sooner. Every probe in the window must arrive: one
that has not arrived 120 s after the load stopped counts as a failure, and as an infinite latency
in the percentiles. Drain = from the
load's end until the last probe (written after the load) is in the target. Reported: median, p95,
p99, max and missing probes per target, the drain, sysbench's row rate, the load average.
``--record`` appends the result to docs/benchmarks.md. Targets (issue 38): at full speed,
p99 <= 10 s and drain <= 10 s, no probe missing.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402

from bench.backlog_parts import binlog_position, point_replica  # noqa: E402
from bench.common import command_line, connect, record_row, services  # noqa: E402
from tests.support import sysbench  # noqa: E402

SECTION = "## Follow mode at full speed: commit-to-target latency, every probe by its key (bench/follow_latency.py)"
INTRO = """
`sluice run --follow --interval 1` (one warm Spark session, `local[2]`, `spark.partitions: 2`) while
sysbench `oltp_write_only` writes on the source (`--tables` x `--table-size`, `--threads`, `--rate`
transactions/s, 0 = as fast as it goes); a probe row is inserted every `--every` s and the target
is polled every 50 ms for each probe not seen yet, by its own key. Latency = first seen in the
target - wall time right after the source COMMIT returned. A probe that never arrives (120 s after
the load) is a failure, counted in `missing` and as an infinite latency. Drain = load's end until
the last probe is in the target. Start-up is left out: the load starts `--warmup` s after the
first probe reached every target and the window opens with it (`warmup` column: seconds from the
start); with `--cold-start` (every row before 2026-11-28 08:20 UTC) the load starts with the follower
and the window opens `--warmup` s after the first probe arrived, or `--startup` (20) s after the
start if sooner (a follower still behind then is measured from then). Target (issue 38): p99 <= 10 s, drain <= 10 s,
none missing.

| date | command | target | probes | missing | rows/s | p50 s | p95 s | p99 s | max s | drain s | warmup | load |
|---|---|---|---|---|---|---|---|---|---|---|---|---|
"""


def percentile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def write_deployment(tmp: Path, src: dict, dst: dict, db: str, es: dict | None, partitions: int = 2) -> Path:
    (tmp / "mappings").mkdir()
    mirror = {"dataSourceKey": "defaultDS", "destination": db, "groupId": "rdb", "outerAdapterKey": "tgt",
              "dbMapping": {"mirrorDb": True, "database": db, "targetDb": f"{db}_copy"}}
    (tmp / "mappings" / "mirror.yml").write_text(yaml.safe_dump(mirror))
    groups = [{"groupId": "rdb", "mappings": ["mappings/mirror.yml"], "outerAdapters": [{
        "name": "rdb", "key": "tgt", "properties": {
            "jdbc.url": f"jdbc:mysql://{dst['host']}:{dst['port']}/{db}_copy",
            "jdbc.username": dst["user"], "jdbc.password": dst["password"]}}]}]
    if es is not None:
        (tmp / "mappings" / "es").mkdir()
        doc = {"dataSourceKey": "defaultDS", "destination": db, "groupId": "es", "esMapping": {
            "_index": f"{db}-probe", "_id": "id", "sql": "select p.id, p.note from probe p", "commitBatch": 3000}}
        (tmp / "mappings" / "es" / "probe.yml").write_text(yaml.safe_dump(doc))
        groups.append({"groupId": "es", "mappings": ["mappings/es/*.yml"], "outerAdapters": [{
            "name": "es8", "hosts": es["url"].removeprefix("http://"), "properties": {"mode": "rest"}}]})
    cfg = {"source": {"name": db, "host": src["host"], "port": src["port"], "user": src["user"],
                      "password": src["password"], "serverId": 7400 + os.getpid() % 500,
                      "filter": {"include": rf"{db}\..*"}},
           "srcDataSources": {"defaultDS": {"url": f"jdbc:mysql://{src['host']}:{src['port']}/{db}",
                                            "username": src["user"], "password": src["password"]}},
           "store": {"path": str(tmp / "store")}, "groups": groups,
           "spark": {"master": "local[2]", "partitions": partitions}}
    (tmp / "sluice.yml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    return tmp / "sluice.yml"


class Probes:
    """The probe writer and the pollers; ``commits[id]`` and ``seen[target][id]`` are wall times."""

    def __init__(self, src: dict, db: str):
        self.src, self.db = src, db
        self.commits: dict[int, float] = {}
        self.seen: dict[str, dict[int, float]] = {}
        self.stop = threading.Event()
        self.writing = threading.Event()
        self.writing.set()

    def writer(self, every: float) -> None:
        with connect(self.src, self.db, autocommit=True) as c, c.cursor() as cur:
            while self.writing.is_set():
                cur.execute("INSERT INTO probe (note) VALUES ('p')")
                self.commits[cur.lastrowid] = time.time()
                time.sleep(every)

    def write_one(self) -> int:
        with connect(self.src, self.db, autocommit=True) as c, c.cursor() as cur:
            cur.execute("INSERT INTO probe (note) VALUES ('last')")
            self.commits[cur.lastrowid] = time.time()
            return cur.lastrowid

    def _poll(self, name: str, found) -> None:
        """Ask ``found(ids)`` every 50 ms which of the probes not seen yet are in the target."""
        seen = self.seen.setdefault(name, {})
        while not self.stop.is_set():
            pending = [i for i in list(self.commits) if i not in seen][-5000:]
            if pending:
                try:
                    hits = found(pending)
                except Exception:  # noqa: BLE001 - the table or index may not exist yet
                    hits = ()
                now = time.time()
                for i in hits:
                    seen.setdefault(int(i), now)
            time.sleep(0.05)

    def poll_rdb(self, dst: dict, db: str | None = None, name: str = "mariadb") -> None:
        with connect(dst, db or f"{self.db}_copy", autocommit=True) as c, c.cursor() as cur:
            def found(ids):
                cur.execute(f"SELECT id FROM probe WHERE id IN ({', '.join(str(i) for i in ids)})")
                return [r[0] for r in cur.fetchall()]
            self._poll(name, found)

    def poll_es(self, es: dict) -> None:
        from elasticsearch import Elasticsearch

        client = Elasticsearch(es["url"], request_timeout=10)

        def found(ids):
            r = client.search(index=f"{self.db}-probe", query={"ids": {"values": [str(i) for i in ids]}},
                              size=len(ids), source=False)
            return [h["_id"] for h in r["hits"]["hits"]]
        self._poll("elasticsearch", found)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=10,
                    help="seconds after the first probe reached every target before the window opens")
    ap.add_argument("--startup", type=int, default=20,
                    help="the window opens this many seconds after the start at the latest (JVM start, first rounds)")
    ap.add_argument("--rate", type=int, default=0, help="sysbench transactions/s (0: as fast as it goes)")
    ap.add_argument("--tables", type=int, default=4)
    ap.add_argument("--table-size", type=int, default=20000)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--partitions", type=int, default=2, help="spark.partitions of the follower's deployment")
    ap.add_argument("--every", type=float, default=0.5, help="seconds between probes")
    ap.add_argument("--es", action="store_true", help="also an Elasticsearch target")
    ap.add_argument("--replica", action="store_true",
                    help="also the mariadb-replica service replicating the source from the same position")
    ap.add_argument("--cold-start", action="store_true",
                    help="start the load with the follower (its cold start under full load counts; the window "
                    "opens --warmup s after the first probe arrived, --startup s at the latest)")
    ap.add_argument("--capture-beside", action="store_true",
                    help="capture in a process of its own (sluice capture --follow) beside "
                    "sluice run --follow --no-capture, instead of between the follower's rounds")
    ap.add_argument("--replica-only", action="store_true", help="the replica alone, no follower")
    ap.add_argument("--keep", action="store_true", help="keep the deployment's store (else only its logs stay)")
    ap.add_argument("--record", action="store_true")
    args = ap.parse_args()
    args.replica = args.replica or args.replica_only
    svc = services()
    src, dst = svc["mariadb"], svc["mariadb-target"]
    rep = svc.get("mariadb-replica") if args.replica else None
    if args.replica and rep is None:
        sys.exit("--replica: start it first (scripts/services start mariadb-replica)")
    es = svc.get("elasticsearch") if args.es else None
    if args.es and es is None:
        sys.exit("--es: start Elasticsearch first (scripts/services start elasticsearch)")
    db = f"bfollow_{uuid.uuid4().hex[:6]}"
    tmp = Path(tempfile.mkdtemp(prefix="bench-follow-"))
    shape = {"tables": args.tables, "table_size": args.table_size}
    copies = [(src, db), (dst, f"{db}_copy")] + ([(rep, db)] if rep is not None else [])
    for info, name in copies:
        sysbench.prepare(info, name, **shape)
        with connect(info, name, autocommit=True) as c, c.cursor() as cur:
            cur.execute("CREATE TABLE probe (id BIGINT AUTO_INCREMENT PRIMARY KEY, note VARCHAR(16))")
    cfg = write_deployment(tmp, src, dst, db, es, args.partitions)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    sl = [sys.executable, "-m", "pipeline.cli"]
    subprocess.run([*sl, "capture", "--config", str(cfg), "--once"], check=True, cwd=REPO, env=env,
                   capture_output=True)   # the store starts at the binlog's end
    if rep is not None:  # from the binlog's end now, started with the follower
        with connect(rep, autocommit=True) as c, c.cursor() as cur:
            point_replica(cur, rep, src, binlog_position(src))
    log = (tmp / "follow.log").open("w")
    follower = None if args.replica_only else subprocess.Popen(
        [*sl, "--log-json", "run", "--config", str(cfg), "--follow", "--interval", "1",
         *(["--no-capture"] if args.capture_beside else [])],
        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    capturer = subprocess.Popen(  # the store fed by its own process, beside the follower's apply
        [*sl, "--log-json", "capture", "--config", str(cfg), "--follow"], cwd=REPO, env=env,
        stdout=(tmp / "capture.log").open("w"), stderr=subprocess.STDOUT, start_new_session=True,
    ) if args.capture_beside and follower is not None else None
    if rep is not None:
        with connect(rep, autocommit=True) as c, c.cursor() as cur:
            cur.execute("START SLAVE")
    targets = _targets(es, rep, follower is not None)
    probes = Probes(src, db)
    writer = threading.Thread(target=probes.writer, args=(args.every,))
    pollers = [] if follower is None else [threading.Thread(target=probes.poll_rdb, args=(dst,))]
    if rep is not None:
        pollers.append(threading.Thread(target=probes.poll_rdb, args=(rep, db, "replica")))
    if es is not None:
        pollers.append(threading.Thread(target=probes.poll_es, args=(es,)))
    load_avg = []
    drain: dict[str, float | None] = {}
    load = None
    try:
        t0 = time.time()
        for t in [writer, *pollers]:
            t.start()
        if not args.cold_start:  # the load starts once the follower is warm: steady state, not its start
            ready = _wait_first(probes, targets, t0 + 300)
            print(f"first probe in every target {ready - t0:.1f} s after the start; load in {args.warmup} s")
            time.sleep(args.warmup)
        load = subprocess.Popen(sysbench.command(src, db, "run", **shape, threads=args.threads,
                                                 seconds=args.seconds, extra=(f"--rate={args.rate}",)),
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        loaded = time.time()
        while load.poll() is None:
            time.sleep(5)
            load_avg.append(os.getloadavg()[0])
        out = load.stdout.read()
        ended = time.time()
        probes.writing.clear()
        writer.join()
        last = probes.write_one()   # the drain: until this one (after every sysbench commit) arrives
        deadline = time.time() + 120
        # every probe, not only the last: partitions commit on their own, so a probe of another key may
        # become visible a moment after the last one (a poll stopped at the last one counted it missing)
        while time.time() < deadline and any(i not in probes.seen.get(t, {}) for t in targets
                                             for i in list(probes.commits)):
            time.sleep(0.2)
        for t in targets:
            at = probes.seen.get(t, {}).get(last)
            drain[t] = None if at is None else at - ended
        probes.stop.set()
        for t in pollers:
            t.join()
    finally:
        probes.writing.clear()
        probes.stop.set()
        if load is not None and load.poll() is None:
            load.kill()
        if rep is not None:
            with connect(rep, autocommit=True) as c, c.cursor() as cur:
                cur.execute("STOP SLAVE")
        for proc in (follower, capturer):
            if proc is not None:
                proc.send_signal(signal.SIGTERM)  # the follower stops its own JVM (systemd: KillMode=mixed)
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
    rows_s = _rows_per_s(out)
    if follower is not None:
        print(f"follower exit {follower.returncode}; log {tmp / 'follow.log'}")
    if args.cold_start:
        first = max((min(seen.values()) for seen in probes.seen.values() if seen), default=t0)
        # a follower still behind when --startup seconds have passed is measured from then: its backlog
        # is latency, not start-up
        opens = min(first + args.warmup, t0 + args.startup)
        print(f"first probe in every target {first - t0:.1f} s after the start; window opens at "
              f"{opens - t0:.1f} s")
    else:  # every probe written once the load started
        opens = loaded
        print(f"window opens with the load, {opens - t0:.1f} s after the start")
    la = statistics.mean(load_avg) if load_avg else os.getloadavg()[0]
    for target in targets:
        seen = probes.seen.get(target, {})
        window = [i for i, c in probes.commits.items() if c >= opens]
        lat = sorted(seen[i] - probes.commits[i] if i in seen else math.inf for i in window)
        missing = sum(1 for i in window if i not in seen)
        if not lat or missing == len(lat):
            print(f"{target}: no probe arrived")
            continue
        p50, p95, p99, mx = (statistics.median(lat), percentile(lat, 0.95), percentile(lat, 0.99), max(lat))
        d = drain.get(target)
        dtext = "never" if d is None else f"{d:.2f}"
        print(f"{target}: {len(lat)} probes, {missing} missing: p50 {p50:.2f} s, p95 {p95:.2f} s, p99 {p99:.2f} s, "
              f"max {mx:.2f} s; drain {dtext} s; sysbench {rows_s:.0f} rows/s; load {la:.2f}")
        if args.record:
            record_row(REPO / "docs" / "benchmarks.md", SECTION, INTRO,
                       f"| {dt.date.today()} | `{command_line('bench/follow_latency.py')}` | {target} | {len(lat)} "
                       f"| {missing} | {rows_s:.0f} | {p50:.2f} | {p95:.2f} | {p99:.2f} | {mx:.2f} | {dtext} "
                       f"| {opens - t0:.0f} s | {la:.2f} |")
    for info, name in copies:
        sysbench.drop_database(info, name)
    if not args.keep:  # the logs stay; the store (up to 1.4 GB for a minute at full speed) goes
        shutil.rmtree(tmp / "store", ignore_errors=True)


def _wait_first(probes: Probes, targets: list[str], deadline: float) -> float:
    """When every target had its first probe (fails past ``deadline``)."""
    while not all(probes.seen.get(t) for t in targets):
        if time.time() > deadline:
            sys.exit(f"no probe reached {', '.join(t for t in targets if not probes.seen.get(t))} in time")
        time.sleep(0.1)
    return time.time()


def _targets(es: dict | None, rep: dict | None = None, follower: bool = True) -> list[str]:
    return ((["mariadb"] + (["elasticsearch"] if es is not None else [])) if follower else []) + (
        ["replica"] if rep is not None else [])


def _rows_per_s(out: str) -> float:
    """Rows written per second by sysbench oltp_write_only (4 row changes per transaction)."""
    for line in out.splitlines():
        if "transactions:" in line and "per sec" in line:
            return 4 * float(line.split("(")[1].split()[0])
    return 0.0


if __name__ == "__main__":
    main()
