"""Chaos soak (issue #40): writers, a follower and random faults at once; then byte for byte.

sysbench (``oltp_write_only``, rate-limited) and the seeded key-conflicts workload (keys under
``_ci`` collations, PK and unique-value swaps, REPLACE, IODKU, a table without a key, and its DDL
mid-stream; tests/support/workloads.py) write to the source while ``sluice run --follow`` applies
into a MariaDB mirror. Every few seconds (seeded) one fault strikes:

* kill -9 of the follower's process group, of its Spark JVM alone, of one PySpark process (a worker
  or the daemon that forks them: the same command line);
* SIGTERM to the follower; a restart of the target; a restart of the source (the writers reconnect);
* the source KILLs the binlog dump connection;
* a scheduled ``sluice run`` next to the follower (it must leave the group to the follower:
  refused by the lock, nothing else);
* with the Kafka store: a broker restart.

The test plays the supervisor: a follower that ended is started again at once. After the chaos,
the writers stop, the follower catches up, and the mirror equals the source table by table,
``sluice verify`` finds no difference and ``sluice store verify`` no damaged batch.

Short form by default (CI): 90 s of chaos (``SLUICE_CHAOS_SECONDS``) on the file store and 90 s on
the Kafka store, three minutes in all. The long form is ``SLUICE_CHAOS_SECONDS=3600`` (an hour on
each store; docs/reliability.md records its runs). The seed is ``SLUICE_TEST_SEED``
(default 40): a failure names it.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pymysql
import pytest

from tests.support import sysbench, workloads
from tests.support.compare import diff_databases
from tests.support.deploy import mirror_deployment, sluice
from tests.support.faults import Background, FollowerProcess, group_progress, service
from tests.support.source_faults import kill_dump_threads, restart_source, wait_for_source

SECONDS = float(os.environ.get("SLUICE_CHAOS_SECONDS", "90"))
SEED = int(os.environ.get("SLUICE_TEST_SEED", "40"))
TABLES, SIZE = 2, 2000


def _deploy(tmp: Path, mariadb: dict, mariadb_target: dict, kafka: dict | None) -> dict:
    d = mirror_deployment(tmp, mariadb, mariadb_target, "chaos", batch_rows=2000, kafka=kafka)
    sysbench.create_database(mariadb, d["db"])
    sysbench.prepare(mariadb, d["db"], tables=TABLES, table_size=SIZE, create=False)
    with sysbench.connect(mariadb, d["db"]) as c, c.cursor() as cur:
        for stmt in workloads.KEYS_DDL:
            cur.execute(stmt)
        workloads.keys_seed(cur)
        c.commit()
    return d


class KeysWriter(threading.Thread):
    """The seeded key-conflicts workload until stopped; its DDL once, a third of the way; a lost
    connection (the source restarting) is reconnected and the next transaction goes on. A DDL
    statement whose connection was lost may have run: on the retry, "already there" counts as done."""

    def __init__(self, mariadb: dict, db: str, seed: int):
        super().__init__(daemon=True)
        self.mariadb, self.db, self.rng = mariadb, db, random.Random(seed)
        self.stop = threading.Event()
        self.steps = self.lost = self.ddl_done = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                with sysbench.connect(self.mariadb, self.db) as c, c.cursor() as cur:
                    while not self.stop.is_set():
                        while self.steps >= 150 and self.ddl_done < len(workloads.KEYS_DDL_MID):
                            try:
                                cur.execute(workloads.KEYS_DDL_MID[self.ddl_done])
                            except pymysql.err.OperationalError as e:
                                if e.args[0] != 1060:  # ER_DUP_FIELDNAME: it ran before the connection went
                                    raise
                            self.ddl_done += 1
                        workloads.keys_step(cur, self.rng, self.steps)
                        self.steps += 1
                        time.sleep(0.02)
            except (pymysql.err.OperationalError, pymysql.err.InterfaceError) as e:
                if e.args and e.args[0] not in (0, 2003, 2006, 2013, 1053, 1927):  # lost / refused / shutdown
                    self.error = e
                    return
                self.lost += 1  # the source restarting: reconnect
                self.stop.wait(1.0)
            except BaseException as e:  # noqa: BLE001 - reported by the test
                self.error = e
                return


def _session_pids(pid: int) -> list[tuple[int, str]]:
    """(pid, command line) of every process in the session ``pid`` leads (the follower's)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            sid = int(stat.rsplit(") ", 1)[1].split()[3])
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
        if sid == pid and int(entry.name) != pid:
            out.append((int(entry.name), cmd))
    return out


def _chaos(kind: str, request, tmp_path: Path, mariadb: dict, mariadb_target: dict) -> None:
    kafka = request.getfixturevalue("kafka") if kind == "kafka" else None
    d = _deploy(tmp_path, mariadb, mariadb_target, kafka)
    cfg, rng = d["cfg"], random.Random(SEED)
    follower = FollowerProcess(cfg, tmp_path)
    writers: dict[str, Background | None] = {"sysbench": None}
    keys = KeysWriter(mariadb, d["db"], SEED)
    done: list[str] = []

    def sysbench_up() -> None:
        if writers["sysbench"] is None or writers["sysbench"].proc.poll() is not None:
            cmd = sysbench.command(mariadb, d["db"], "run", tables=TABLES, table_size=SIZE, threads=2,
                                   seconds=int(SECONDS) + 60, extra=("--rate=40",))
            writers["sysbench"] = Background(cmd, tmp_path / f"sysbench-{len(done)}.log")

    def sigterm() -> None:
        if not follower.running():
            return
        old = follower.proc.proc.pid
        code = follower.sigterm()
        assert code == 130, f"SIGTERM: exit {code}\n{follower.output()}"
        deadline = time.monotonic() + 30
        while _session_pids(old):  # the JVM and the Python workers end with their driver
            assert time.monotonic() < deadline, f"left after SIGTERM: {_session_pids(old)}"
            time.sleep(0.5)

    def kill_in_session(needle: str) -> None:
        if not follower.running():
            return
        victims = [p for p, cmd in _session_pids(follower.proc.proc.pid) if needle in cmd]
        if victims:
            os.kill(rng.choice(victims), signal.SIGKILL)

    def scheduled_run() -> None:
        proc = subprocess.run([sys.executable, "-m", "pipeline.cli", "run", "--config", str(cfg), "--json"],
                              capture_output=True, text=True, timeout=600,
                              env=dict(os.environ, PYSPARK_PYTHON=sys.executable))
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith('{"run"')]
        assert proc.returncode in (0, 3, 4) and lines, proc.stdout[-2000:] + proc.stderr[-3000:]
        errors = json.loads(lines[-1])["errors"]
        assert all(e["type"] == "LockHeldError" for e in errors), errors  # the follower keeps its group

    def source_restart() -> None:
        restart_source()
        wait_for_source(mariadb)

    faults = [("kill -9 follower", follower.kill9), ("kill -9 JVM", lambda: kill_in_session("java")),
              ("kill -9 PySpark worker or daemon", lambda: kill_in_session("pyspark")), ("SIGTERM", sigterm),
              ("target restart", lambda: service("restart", "mariadb-target")), ("source restart", source_restart),
              ("dump connection KILLed", lambda: kill_dump_threads(mariadb)), ("scheduled run", scheduled_run)]
    if kind == "kafka":
        faults.append(("broker restart", lambda: service("restart", "kafka")))
    sysbench_up()
    keys.start()
    follower.start()
    try:
        end = time.monotonic() + SECONDS
        while time.monotonic() < end:
            pause = time.monotonic() + rng.uniform(3, 8)
            while time.monotonic() < pause:
                if not follower.running():  # the supervisor: a follower a fault ended starts again
                    follower.start()
                time.sleep(0.25)
            name, act = rng.choice(faults)
            act()
            done.append(name)
            sysbench_up()
        steps_at_last_fault, deadline = keys.steps, time.monotonic() + 30
        while keys.steps <= steps_at_last_fault + 5 and keys.error is None and time.monotonic() < deadline:
            time.sleep(0.2)  # the workload goes on after the last fault
        keys.stop.set()
        keys.join(60)
        if writers["sysbench"] is not None:
            writers["sysbench"].kill()
        assert keys.error is None, f"the keys workload failed: {keys.error!r}"
        assert keys.steps > steps_at_last_fault and keys.ddl_done == len(workloads.KEYS_DDL_MID), \
            f"the keys workload stopped: {keys.steps} transactions, {keys.ddl_done} DDL"
        deadline = time.monotonic() + 900
        while True:
            if not follower.running():
                follower.start()
            cursor, pending = group_progress(cfg)
            if pending == 0:
                diff = diff_databases(mariadb, d["db"], mariadb_target, d["tdb"])
                if diff and all(v == 0 for v in diff.values()):
                    break
            assert time.monotonic() < deadline, (f"seed {SEED}: not converged after {done}: pending {pending}, "
                                                 f"{diff if pending == 0 else ''}\n{follower.output()}")
            time.sleep(2)
        print(f"chaos ({kind}, seed {SEED}): {len(done)} faults {done}; {keys.steps} keys transactions "
              f"({keys.lost} reconnects), follower started {follower.starts} times")
        assert set(diff) == {f"sbtest{i}" for i in range(1, TABLES + 1)} | {"b", "s", "u", "uk", "nk"}, diff
        os.kill(follower.proc.proc.pid, signal.SIGTERM)
        assert follower.proc.wait(120) == 130, follower.output()
        out = sluice("verify", "--config", str(cfg), "--json", check=False)
        assert out.returncode == 0 and json.loads(out.stdout)["differing_rows"] == 0, out.stdout[-3000:]
        assert sluice("store", "verify", "--config", str(cfg), check=False).returncode == 0
    finally:
        keys.stop.set()
        if writers["sysbench"] is not None:
            writers["sysbench"].kill()
        follower.stop()
        sysbench.drop_database(mariadb, d["db"])
        sysbench.drop_database(mariadb_target, d["tdb"])


@pytest.mark.timeout(3600 + 2 * SECONDS)
@pytest.mark.parametrize("kind", ["files", "kafka"])
def test_chaos_soak_converges(kind, request, tmp_path, mariadb, mariadb_target):
    _chaos(kind, request, tmp_path, mariadb, mariadb_target)
