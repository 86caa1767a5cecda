"""The appliers and checks of bench/backlog.py: the parallel replica, the serial replay, the Sluice
deployment, the byte comparison, the segment log's summary and the load average."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import statistics
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pymysql
import pymysql.cursors
import yaml

from bench.common import connect

Position = tuple[str, int]


def binlog_position(src: dict) -> Position:
    """The source's current binlog file and position."""
    with connect(src, autocommit=True) as c, c.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        row = cur.fetchone()
    return row[0], int(row[1])


def run_replica(rep: dict, src: dict, start: Position, end: Position, timeout: float = 1800) -> float:
    """Seconds from ``START SLAVE UNTIL end`` (the replica set to read from ``start``) until the
    replica executed everything up to ``end``; fails on a replication error."""
    with connect(rep, autocommit=True) as c, c.cursor(pymysql.cursors.DictCursor) as cur:
        point_replica(cur, rep, src, start)
        t0 = time.perf_counter()
        cur.execute("START SLAVE UNTIL MASTER_LOG_FILE=%s, MASTER_LOG_POS=%s", (end[0], end[1]))
        while True:
            cur.execute("SHOW SLAVE STATUS")
            s = cur.fetchone()
            if (s["Relay_Master_Log_File"], int(s["Exec_Master_Log_Pos"])) >= end:
                secs = time.perf_counter() - t0
                break
            if s["Last_SQL_Errno"] or s["Last_IO_Errno"]:
                raise RuntimeError(f"replica failed: {s['Last_SQL_Error'] or s['Last_IO_Error']}")
            if time.perf_counter() - t0 > timeout:
                raise RuntimeError(f"replica did not reach {end} in {timeout} s (at {s['Exec_Master_Log_Pos']})")
            time.sleep(0.05)
        cur.execute("STOP SLAVE")
    return secs


def point_replica(cur, rep: dict, src: dict, start: Position) -> None:  # noqa: ANN001 - a pymysql cursor
    """Stop the replica and set it to read the source from ``start`` (not started)."""
    cur.execute("STOP SLAVE")
    cur.execute("RESET SLAVE ALL")
    cur.execute("CHANGE MASTER TO MASTER_HOST=%s, MASTER_PORT=%s, MASTER_USER=%s, MASTER_PASSWORD=%s, "
                "MASTER_LOG_FILE=%s, MASTER_LOG_POS=%s, MASTER_USE_GTID=no",
                (src["host"], int(src["port"]), rep["repl_user"], rep["repl_password"], start[0], start[1]))


def run_serial(src: dict, dst: dict, start: Position, end: Position, db: str, into: str) -> float:
    """Seconds of ``mariadb-binlog --read-from-remote-server ... | mariadb`` replaying the range
    into ``into`` on ``dst`` (``--rewrite-db``), single-threaded."""
    with connect(src, autocommit=True) as c, c.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        files = [r[0] for r in cur.fetchall() if start[0] <= r[0] <= end[0]]
    env = dict(os.environ, MYSQL_PWD=src["password"])
    dump = ["mariadb-binlog", "--read-from-remote-server", f"--host={src['host']}", f"--port={src['port']}",
            f"--user={src['user']}", f"--start-position={start[1]}", f"--stop-position={end[1]}",
            f"--rewrite-db={db}->{into}", *files]
    load = ["mariadb", "--protocol=tcp", f"--host={dst['host']}", f"--port={dst['port']}", f"--user={dst['user']}",
            f"--password={dst['password']}", into]
    t0 = time.perf_counter()
    reader = subprocess.Popen(dump, stdout=subprocess.PIPE, env=env)
    applied = subprocess.run(load, stdin=reader.stdout, capture_output=True, text=True)
    reader.stdout.close()
    if reader.wait() or applied.returncode:
        raise RuntimeError(f"serial replay failed: {applied.stderr[-2000:]}")
    return time.perf_counter() - t0


def write_deployment(tmp: Path, src: dict, dst: dict, db: str, target: str, partitions: int, lanes: int,
                     round_rows: int | None = None, plain: bool = False) -> Path:
    """``tmp/sluice.yml``: group ``g`` mirrors ``db`` into ``target`` on ``dst`` (``local[P]``,
    ``spark.partitions: P``; ``spark.applyLanes`` when > 1); the store in ``tmp/store``. ``plain``:
    no TLS to the source (``source.ssl: {disabled: true}``) nor to the target (``tls.mode: disable``),
    as the replica's link (``MASTER_SSL=0``)."""
    (tmp / "mappings").mkdir(exist_ok=True)
    mirror = {"dataSourceKey": "defaultDS", "destination": db, "groupId": "g", "outerAdapterKey": "tgt",
              "dbMapping": {"mirrorDb": True, "database": db, "targetDb": target}}
    (tmp / "mappings" / "mirror.yml").write_text(yaml.safe_dump(mirror))
    spark = {"master": f"local[{partitions}]", "partitions": partitions, **({"applyLanes": lanes} if lanes > 1 else {}),
             **({"roundRows": round_rows} if round_rows is not None else {})}
    cfg = {"source": {"name": db, "host": src["host"], "port": src["port"], "user": src["user"],
                      "password": src["password"], "serverId": 7600 + os.getpid() % 300,
                      "filter": {"include": rf"{db}\..*"}, **({"ssl": {"disabled": True}} if plain else {})},
           "srcDataSources": {"defaultDS": {"url": f"jdbc:mysql://{src['host']}:{src['port']}/{db}",
                                            "username": src["user"], "password": src["password"]}},
           "store": {"path": str(tmp / "store")},
           "groups": [{"groupId": "g", "mappings": ["mappings/mirror.yml"], "outerAdapters": [{
               "name": "rdb", "key": "tgt", "properties": {
                   "jdbc.url": f"jdbc:mysql://{dst['host']}:{dst['port']}/{target}",
                   "jdbc.username": dst["user"], "jdbc.password": dst["password"],
                   **({"tls.mode": "disable"} if plain else {})}}]}],
           "spark": spark}
    (tmp / "sluice.yml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    return tmp / "sluice.yml"


def _digest(info: dict, db: str, table: str, key: str) -> tuple[int, str]:
    """Rows and a SHA-256 of every row of ``db.table`` in key order, as the server returns them."""
    h = hashlib.sha256()
    n = 0
    with connect(info, db) as c, c.cursor(pymysql.cursors.SSCursor) as cur:
        cur.execute(f"SELECT * FROM `{table}` ORDER BY {key}")
        for row in cur:
            h.update(repr(row).encode())
            n += 1
    return n, h.hexdigest()


def _schema(info: dict, db: str) -> dict[str, tuple[str, str]]:
    """{table: (primary key column list, CREATE TABLE text)} of the base tables of ``db`` (Sluice's
    own bookkeeping tables left out)."""
    with connect(info, db) as c, c.cursor() as cur:
        cur.execute("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA=%s "
                    "AND TABLE_TYPE='BASE TABLE' AND TABLE_NAME NOT LIKE '\\_sluice\\_%%'", (db,))
        out = {}
        for (t,) in cur.fetchall():
            cur.execute("SELECT GROUP_CONCAT(CONCAT('`', COLUMN_NAME, '`') ORDER BY SEQ_IN_INDEX) FROM "
                        "information_schema.STATISTICS WHERE TABLE_SCHEMA=%s AND TABLE_NAME=%s "
                        "AND INDEX_NAME='PRIMARY'",
                        (db, t))
            key = cur.fetchone()[0] or "1"
            cur.execute(f"SHOW CREATE TABLE `{t}`")
            out[t] = (key, cur.fetchone()[1].split("AUTO_INCREMENT=")[0])
    return out


def compare(src: dict, db: str, copies: list[tuple[dict, str]]) -> list[str]:
    """Each copy against the source: the same tables and definitions, every row equal (an ordered
    digest per table). The differences found, as text; empty when all are equal."""
    schema = _schema(src, db)
    want = {t: _digest(src, db, t, key) for t, (key, _) in schema.items()}
    diffs = []
    for info, name in copies:
        theirs = _schema(info, name)
        if set(theirs) != set(schema):
            diffs.append(f"{name}: tables {sorted(theirs)} != {sorted(schema)}")
            continue
        for t, (key, ddl) in schema.items():
            if theirs[t][1] != ddl:
                diffs.append(f"{name}.{t}: definition differs")
            got = _digest(info, name, t, key)
            if got != want[t]:
                diffs.append(f"{name}.{t}: {got[0]} rows vs {want[t][0]}, digests differ")
    return diffs


def segment_report(log_text: str, sync_s: float) -> dict:
    """The sync's segment log (``--log-json`` lines): per segment rows, seconds, plan_s, worker_s;
    summed; and the seconds outside its rounds (process start, JVM, pre-flight, exit)."""
    events = []
    for line in log_text.splitlines():
        with contextlib.suppress(ValueError):
            events.append(json.loads(line))
    segs = [e for e in events if e.get("event") == "segment"]
    rounds = [e for e in events if e.get("event") == "acked"]
    ddl = sum(1 for e in events if e.get("event") == "ddl")
    in_rounds = sum(float(e.get("seconds", 0)) for e in rounds)
    plan = sum(float(e.get("plan_s", 0)) for e in segs)
    worker = sum(float(e.get("worker_s", 0)) for e in segs)
    seg_s = sum(float(e.get("seconds", 0)) for e in segs)
    big = sorted(segs, key=lambda e: -float(e.get("seconds", 0)))[:3]
    text = (f"{len(rounds)} rounds ({in_rounds:.1f} s), {len(segs)} segments ({seg_s:.1f} s: plan {plan:.1f}, "
            f"worker {worker:.1f}), {ddl} DDL, outside rounds {sync_s - in_rounds:.1f} s; largest: "
            + ", ".join(f"{e.get('rows')} rows {e.get('seconds')} s (plan {e.get('plan_s')}, "
                        f"worker {e.get('worker_s')})" for e in big))
    short = f"{len(segs)}: {plan:.1f} / {worker:.1f} / {sync_s - in_rounds:.1f} s"
    return {"segments": segs, "rounds": len(rounds), "in_rounds": in_rounds, "plan": plan, "worker": worker,
            "seg_s": seg_s, "text": text, "short": short}


class Loadavg:
    """The 1-minute load average, sampled every 2 s during timed phases."""

    def __init__(self) -> None:
        self.samples: list[float] = []

    @contextlib.contextmanager
    def phase(self) -> Iterator[None]:
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                self.samples.append(os.getloadavg()[0])
                stop.wait(2)
        t = threading.Thread(target=sample, daemon=True)
        t.start()
        try:
            yield
        finally:
            stop.set()
            t.join()

    def mean(self) -> float:
        return statistics.mean(self.samples) if self.samples else os.getloadavg()[0]
