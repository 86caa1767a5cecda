"""Freshness of ``sluice run --follow``: seconds from a source commit until the row is in the target.

    nice -n -10 .venv/bin/python bench/follow_latency.py [--seconds 120] [--rate 50] [--es] [--record]

A fresh database on the source MariaDB gets sysbench's schema (2 tables of 10000 rows) and a
``probe`` table. The deployment mirrors the database into the target MariaDB (group ``rdb``,
a canal ``mirrorDb`` mapping) and, with ``--es``, indexes the probe table into Elasticsearch
(group ``es``, row mode). ``sluice run --follow --interval 1`` starts from the current binlog
position; then, for ``--seconds``:

* sysbench ``oltp_write_only`` writes a steady load (``--rate`` transactions/s, 2 threads);
* a probe writer inserts one row every 0.25 s and notes the wall time right after its COMMIT
  returned (``commit_at``);
* a poller per target asks every 50 ms for the newest probe id (MariaDB: ``MAX(id)``;
  Elasticsearch: the count of searchable documents, which sees a document once a refresh made
  it searchable; probe ids run 1, 2, 3, ... and are applied in order, so N documents are ids
  1..N) and notes when each id was first seen.

Latency of a probe = first seen - commit_at (the poll period adds up to 50 ms). The follower's
start is left out: the window opens ``--warmup`` seconds after the first probe reached every
target (JVM start, the first rounds' backlog and compilation; a cold start is what
bench/small_run.py measures); every probe written after that must arrive. Reported: median,
p95, p99 and max per target, sysbench's row rate, the load average. ``--record`` appends the
result to docs/benchmarks.md. Target (issue 19): median <= 3 s, p99 <= 10 s.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
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

from bench.common import command_line, connect, record_row, services  # noqa: E402
from tests.support import sysbench  # noqa: E402

SECTION = "## Follow mode: commit-to-target latency (bench/follow_latency.py)"
INTRO = """
`sluice run --follow --interval 1` (one warm Spark session, `local[2]`) while sysbench
`oltp_write_only` writes a steady load on the source (2 tables of 10000 rows, 2 threads, `--rate`
transactions/s); a probe row is inserted every 0.25 s and the target is polled every 50 ms for it.
Latency = first seen in the target - wall time right after the source COMMIT returned (ES: the
document counted by a search, i.e. after a refresh). Start-up is left out: the window opens 10 s
(`--warmup`) after the follower's first round brought a probe into every target; the `warmup`
column says when it opened, in seconds after the start (a cold start is the small-run table's).
Target: median <= 3 s, p99 <= 10 s.

| date | command | target | probes | sysbench rows/s | p50 s | p95 s | p99 s | max s | warmup | load |
|---|---|---|---|---|---|---|---|---|---|---|
"""


def percentile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def write_deployment(tmp: Path, src: dict, dst: dict, db: str, es: dict | None) -> Path:
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
           "spark": {"master": "local[2]", "partitions": 2}}
    (tmp / "sluice.yml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    return tmp / "sluice.yml"


class Probes:
    """The probe writer and the pollers; ``commits[id]`` and ``seen[target][id]`` are wall times."""

    def __init__(self, src: dict, db: str):
        self.src, self.db = src, db
        self.commits: dict[int, float] = {}
        self.seen: dict[str, dict[int, float]] = {}
        self.stop = threading.Event()

    def writer(self, every: float = 0.25) -> None:
        with connect(self.src, self.db, autocommit=True) as c, c.cursor() as cur:
            while not self.stop.is_set():
                cur.execute("INSERT INTO probe (note) VALUES ('p')")
                self.commits[cur.lastrowid] = time.time()
                self.stop.wait(every)

    def _poll(self, name: str, newest) -> None:
        seen = self.seen.setdefault(name, {})
        last = 0
        while not self.stop.is_set():
            try:
                top = newest() or 0
            except Exception:  # noqa: BLE001 - the index may not exist yet
                top = last
            now = time.time()
            for i in range(last + 1, top + 1):
                seen[i] = now
            last = max(last, top)
            time.sleep(0.05)

    def poll_rdb(self, dst: dict) -> None:
        with connect(dst, f"{self.db}_copy", autocommit=True) as c, c.cursor() as cur:
            def newest():
                cur.execute("SELECT MAX(id) FROM probe")
                return cur.fetchone()[0]
            self._poll("mariadb", newest)

    def poll_es(self, es: dict) -> None:
        from elasticsearch import Elasticsearch

        client = Elasticsearch(es["url"], request_timeout=10)

        def newest():  # ids are 1, 2, 3, ... and applied in order: N searchable documents = ids 1..N
            return int(client.count(index=f"{self.db}-probe")["count"])
        self._poll("elasticsearch", newest)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=120)
    ap.add_argument("--warmup", type=int, default=10,
                    help="seconds after the first probe reached every target before the window opens")
    ap.add_argument("--rate", type=int, default=50, help="sysbench transactions/s")
    ap.add_argument("--es", action="store_true", help="also an Elasticsearch target")
    ap.add_argument("--record", action="store_true")
    args = ap.parse_args()
    svc = services()
    src, dst = svc["mariadb"], svc["mariadb-target"]
    es = svc.get("elasticsearch") if args.es else None
    if args.es and es is None:
        sys.exit("--es: start Elasticsearch first (scripts/services start elasticsearch)")
    db = f"bfollow_{uuid.uuid4().hex[:6]}"
    tmp = Path(tempfile.mkdtemp(prefix="bench-follow-"))
    for info, name in ((src, db), (dst, f"{db}_copy")):
        sysbench.prepare(info, name, tables=2, table_size=10000)
        with connect(info, name, autocommit=True) as c, c.cursor() as cur:
            cur.execute("CREATE TABLE probe (id BIGINT AUTO_INCREMENT PRIMARY KEY, note VARCHAR(16))")
    cfg = write_deployment(tmp, src, dst, db, es)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    sl = [sys.executable, "-m", "pipeline.cli"]
    subprocess.run([*sl, "capture", "--config", str(cfg), "--once"], check=True, cwd=REPO, env=env,
                   capture_output=True)   # the store starts at the binlog's end
    log = (tmp / "follow.log").open("w")
    follower = subprocess.Popen([*sl, "--log-json", "run", "--config", str(cfg), "--follow", "--interval", "1"],
                                cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    probes = Probes(src, db)
    threads = [threading.Thread(target=probes.writer), threading.Thread(target=probes.poll_rdb, args=(dst,))]
    if es is not None:
        threads.append(threading.Thread(target=probes.poll_es, args=(es,)))
    load = subprocess.Popen(sysbench.command(src, db, "run", tables=2, table_size=10000, threads=2,
                                             seconds=args.seconds, extra=(f"--rate={args.rate}",)),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    t0 = time.time()
    load_avg = []
    try:
        for t in threads:
            t.start()
        while load.poll() is None:
            time.sleep(5)
            load_avg.append(os.getloadavg()[0])
        out = load.stdout.read()
        probes.stop.set()
        for t in threads[:1]:
            t.join()
        probes.stop.clear()
        deadline = time.time() + 60
        last = max(probes.commits)
        while time.time() < deadline and any(last not in s for s in probes.seen.values()):
            time.sleep(0.2)
        probes.stop.set()
        for t in threads[1:]:
            t.join()
    finally:
        probes.stop.set()
        follower.send_signal(signal.SIGTERM)  # the follower stops its own JVM (systemd: KillMode=mixed)
        try:
            follower.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(follower.pid, signal.SIGKILL)
    rows_s = _rows_per_s(out)
    print(f"follower exit {follower.returncode}; log {tmp / 'follow.log'}")
    first = max((min(seen.values()) for seen in probes.seen.values() if seen), default=t0)
    opens = first + args.warmup
    print(f"first probe in every target {first - t0:.1f} s after the start; window opens at {opens - t0:.1f} s")
    for target, seen in probes.seen.items():
        lat = [seen[i] - c for i, c in probes.commits.items() if c >= opens and i in seen]
        missing = [i for i, c in probes.commits.items() if c >= opens and i not in seen]
        if not lat:
            print(f"{target}: no probe arrived")
            continue
        p50, p95, p99, mx = (statistics.median(lat), percentile(lat, 0.95), percentile(lat, 0.99), max(lat))
        la = statistics.mean(load_avg) if load_avg else os.getloadavg()[0]
        print(f"{target}: {len(lat)} probes ({len(missing)} missing): p50 {p50:.2f} s, p95 {p95:.2f} s, "
              f"p99 {p99:.2f} s, max {mx:.2f} s; sysbench {rows_s:.0f} rows/s; load {la:.2f}")
        if args.record:
            record_row(REPO / "docs" / "benchmarks.md", SECTION, INTRO,
                       f"| {dt.date.today()} | `{command_line('bench/follow_latency.py')}` | {target} | {len(lat)} "
                       f"| {rows_s:.0f} | {p50:.2f} | {p95:.2f} | {p99:.2f} | {mx:.2f} | {opens - t0:.0f} s "
                       f"| {la:.2f} |")
    for info, name in ((src, db), (dst, f"{db}_copy")):
        sysbench.drop_database(info, name)


def _rows_per_s(out: str) -> float:
    """Rows written per second by sysbench oltp_write_only (4 row changes per transaction)."""
    for line in out.splitlines():
        if "transactions:" in line and "per sec" in line:
            return 4 * float(line.split("(")[1].split()[0])
    return 0.0


if __name__ == "__main__":
    main()
