"""Fault-injection helpers for tests/e2e/test_faults.py: a throw-away sysbench deployment per
target kind, bounded background runs, service restarts, a full source-vs-target comparison and
the per-fault report that ``tests/conftest.py`` prints at the end of the pytest output.

Every wait has a deadline and every process started here is killed in a ``finally``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pipeline.store.files import BatchStore
from tests.support import sysbench
from tests.support.deploy import REPO, rdb_adapter, sluice, write_deployment

SERVICES = [sys.executable, str(REPO / "scripts" / "services")]
KINDS = ("mariadb", "postgres", "es", "hbase")
MAX_BATCHES = "100000"  # one round per sync: an attempt takes every pending batch at once


# ---- the report ------------------------------------------------------------------------------

@dataclass
class FaultRow:
    """One line of the report (``rows_differing`` None: the test did not get to compare)."""

    fault: str
    batches_replayed: int = 0
    rows_compared: int = 0
    rows_differing: int | None = None
    seconds: float = 0.0
    detail: str = ""


REPORT: list[FaultRow] = []


@contextmanager
def reported(fault: str) -> Iterator[FaultRow]:
    """Time a fault test and add its row to the report, also when it fails."""
    row = FaultRow(fault)
    t0 = time.monotonic()
    try:
        yield row
    except BaseException as e:
        row.detail = (row.detail + "; " if row.detail else "") + f"FAILED: {type(e).__name__}"
        raise
    finally:
        row.seconds = round(time.monotonic() - t0, 1)
        REPORT.append(row)


def report_lines(rows: list[FaultRow] | None = None) -> list[str]:
    """The report as a fixed-width table."""
    rows = REPORT if rows is None else rows
    head = ("fault", "batches_replayed", "rows_compared", "rows_differing", "seconds", "detail")
    body = [(r.fault, str(r.batches_replayed), str(r.rows_compared),
             "-" if r.rows_differing is None else str(r.rows_differing), f"{r.seconds:.1f}", r.detail)
            for r in rows]
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head) - 1)]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=False)) + "  " + cells[-1]
    out = [line(head), line(tuple("-" * w for w in widths) + ("-" * 6,))]
    out += [line(b) for b in body]
    differing = sum(r.rows_differing or 0 for r in rows)
    unchecked = sum(1 for r in rows if r.rows_differing is None)
    out.append(f"{len(rows)} faults, {sum(r.rows_compared for r in rows)} rows compared, "
               f"{differing} differing, {unchecked} not compared")
    return out


def terminal_summary(terminalreporter: Any) -> None:
    """pytest_terminal_summary body: print the report when fault tests ran."""
    if not REPORT:
        return
    terminalreporter.write_sep("=", "fault-injection report (tests/e2e/test_faults.py)")
    for text in report_lines():
        terminalreporter.write_line(text)


# ---- services and processes ------------------------------------------------------------------

def service(action: str, name: str, timeout: float = 240) -> None:
    """``scripts/services <action> <name>`` in this run's services dir (SLUICE_SERVICES_DIR)."""
    proc = subprocess.run([*SERVICES, action, name], cwd=REPO, text=True, capture_output=True, timeout=timeout)
    assert proc.returncode == 0, f"services {action} {name} exited {proc.returncode}:\n{proc.stderr[-3000:]}"


class Background:
    """A command in its own session with output to a file; ``kill`` takes the whole group."""

    def __init__(self, cmd: list[str], log: Path, env: dict[str, str] | None = None):
        self.log = log
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)

    def output(self, tail: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-tail:]

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.proc.args[:4]} did not finish in {timeout:.0f} s:\n{self.output()}") from None

    def wait_for(self, path: Path, timeout: float) -> None:
        """Wait until ``path`` exists (the pause hook's marker) while the process runs."""
        deadline = time.monotonic() + timeout
        while not path.exists():
            if self.proc.poll() is not None:
                raise AssertionError(f"ended ({self.proc.returncode}) before {path.name}:\n{self.output()}")
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"{path.name} did not appear in {timeout:.0f} s:\n{self.output()}")
            time.sleep(0.3)

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=60)


def pause_env(marker: Path, rows: int) -> dict[str, str]:
    """The environment of a sync whose first partition to commit ``rows`` rows pauses."""
    return dict(os.environ, SLUICE_TEST_PAUSE_AFTER_ROWS=str(rows), SLUICE_TEST_PAUSE_MARKER=str(marker),
                PYSPARK_PYTHON=sys.executable)


def resume(marker: Path) -> None:
    """Let the paused partition go on (the pause hook polls for ``<marker>.go``)."""
    Path(f"{marker}.go").touch()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


def wait_dead(pid: int, timeout: float) -> bool:
    """True if ``pid`` ended within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.3)
    return True


def ancestor(pid: int, needle: str) -> int | None:
    """The nearest ancestor of ``pid`` whose command line contains ``needle``."""
    while pid > 1:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            pid = int(stat.rsplit(") ", 1)[1].split()[1])
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            return None
        if needle in cmdline:
            return pid
    return None


# ---- a deployment ----------------------------------------------------------------------------

@dataclass
class Deployment:
    """A source database with sysbench tables, a batch store, and one group ``g1`` that
    replicates every table into one target of ``kind``."""

    kind: str
    tmp: Path
    source: dict
    target: dict
    db: str
    tables: int = 2
    table_size: int = 500
    columns: dict[str, list[str]] = field(default_factory=dict)  # mapped columns per table (besides id)
    cfg: Path = field(default=Path())
    names: dict[str, str] = field(default_factory=dict)  # source table -> target table/index
    mapping_files: dict[str, dict] = field(default_factory=dict)

    # -- setup ---------------------------------------------------------------------------------

    def table_names(self) -> list[str]:
        return [f"sbtest{i}" for i in range(1, self.tables + 1)]

    def setup(self, adapter: dict, commit_batch: int = 100) -> None:
        """Write the config and mappings, start the store, create the source tables."""
        for t in self.table_names():
            self.columns[t] = ["k", "c", "pad"]
            if self.kind != "mariadb":
                self.mapping_files[f"{self.kind}/{t}.yml"] = self._mapping(t, commit_batch)
        if self.kind == "mariadb":
            self.mapping_files = {"mariadb/mirror.yml": {
                "dataSourceKey": "defaultDS", "destination": self.db, "groupId": "g1", "outerAdapterKey": "tgt",
                "dbMapping": {"mirrorDb": True, "database": self.db, "targetDb": self.names["*"],
                              "commitBatch": commit_batch}}}
        self.cfg = write_deployment(self.tmp, self.source, name=self.db, include=rf"{self.db}\..*",
                                    groups=[{"groupId": "g1", "outerAdapters": [adapter],
                                             "mappings": [f"mappings/{self.kind}/*.yml"]}],
                                    mappings=self.mapping_files, partitions=2, batch_rows=400,
                                    round_rows=0)  # a killed sync acks nothing: one round each
        sluice("capture", "--config", str(self.cfg), "--once", timeout=120)  # the store starts here
        with sysbench.connect(self.source) as c, c.cursor() as cur:  # CREATE DATABASE is in the binlog
            cur.execute(f"CREATE DATABASE `{self.db}`")
        sysbench.prepare(self.source, self.db, tables=self.tables, table_size=self.table_size, create=False)

    def _mapping(self, table: str, commit_batch: int) -> dict:
        target = self.names[table]
        base = {"dataSourceKey": "defaultDS", "destination": self.db, "groupId": "g1", "outerAdapterKey": "tgt"}
        cols = self.columns[table]
        if self.kind == "postgres":
            return {**base, "dbMapping": {"database": self.db, "table": table, "targetTable": target,
                                          "targetPk": {"id": "id"}, "targetColumns": {c: c for c in cols},
                                          "commitBatch": commit_batch}}
        if self.kind == "es":
            return {**base, "esMapping": {"_index": target, "_id": "id", "commitBatch": commit_batch,
                                          "sql": f"select t.id, {', '.join('t.' + c for c in cols)} from {table} t"}}
        return {**base, "hbaseMapping": {"mode": "STRING", "database": self.db, "table": table,
                                         "hbaseTable": target, "autoCreateTable": True, "commitBatch": commit_batch,
                                         "columns": {"id": "ROWKEY"}}}

    def drop_column(self, table: str, column: str) -> None:
        """Rewrite ``table``'s mapping without ``column`` (the operator's fix after a DDL)."""
        self.columns[table] = [c for c in self.columns[table] if c != column]
        name = f"{self.kind}/{table}.yml"
        self.mapping_files[name] = self._mapping(table, 100)
        (self.tmp / "mappings" / name).write_text(yaml.safe_dump(self.mapping_files[name], sort_keys=False))

    # -- running -------------------------------------------------------------------------------

    def workload(self, seconds: int, rate: int = 40) -> Background:
        """sysbench oltp_write_only in the background, ``rate`` transactions/s, ``--time=seconds``."""
        cmd = sysbench.command(self.source, self.db, "run", tables=self.tables, table_size=self.table_size,
                               threads=2, seconds=seconds, extra=(f"--rate={rate}",))
        return Background(cmd, self.tmp / f"sysbench-{uuid.uuid4().hex[:6]}.log")

    def wait_for_writes(self, transactions: int = 100, timeout: float = 60) -> None:
        """Return once the source has committed ``transactions`` more transactions (its binlog's
        GTID sequence, MariaDB's ``gtid_binlog_pos``: the deployments here have a MariaDB source;
        the workload's own, nothing else writes): the workload is under way, which a sleep only
        hoped for."""
        def seq() -> int:
            with sysbench.connect(self.source) as c, c.cursor() as cur:
                cur.execute("SELECT @@GLOBAL.gtid_binlog_pos")
                pos = cur.fetchone()[0] or ""
            return sum(int(part.rsplit("-", 1)[1]) for part in pos.split(",") if part.strip())

        start, deadline = seq(), time.monotonic() + timeout
        while seq() - start < transactions:
            assert time.monotonic() < deadline, f"the source committed fewer than {transactions} transactions in " \
                                                f"{timeout:.0f} s: is the workload running?"
            time.sleep(0.2)

    def capture(self) -> None:
        sluice("capture", "--config", str(self.cfg), "--once", timeout=300)

    def sync(self, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
        return sluice("sync", "--config", str(self.cfg), "--group", "g1", "--json", "--max-batches", MAX_BATCHES,
                      check=check, timeout=timeout)

    def sync_command(self, partitions: int = 2) -> list[str]:
        return [sys.executable, "-m", "pipeline.cli", "sync", "--config", str(self.cfg), "--group", "g1",
                "--partitions", str(partitions), "--max-batches", MAX_BATCHES, "--json"]

    def run(self, check: bool = False, timeout: float = 400) -> subprocess.CompletedProcess:
        """``sluice run --json``: capture to the source's end, then sync every group."""
        return sluice("run", "--config", str(self.cfg), "--json", check=check, timeout=timeout)

    def target_columns(self, table: str) -> list[str]:
        """The columns of a mirrored table on the MariaDB target, in order."""
        with sysbench.connect(self.target) as c, c.cursor() as cur:
            cur.execute("SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND "
                        "TABLE_NAME = %s ORDER BY ORDINAL_POSITION", (self.names["*"], table))
            return [r[0] for r in cur.fetchall()]

    def source_columns(self, table: str) -> list[str]:
        with sysbench.connect(self.source) as c, c.cursor() as cur:
            cur.execute("SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND "
                        "TABLE_NAME = %s ORDER BY ORDINAL_POSITION", (self.db, table))
            return [r[0] for r in cur.fetchall()]

    def store(self) -> BatchStore:
        from pipeline.config import load_config

        return BatchStore(load_config(str(self.cfg)).store_dir(), create=False)

    def cursor(self) -> int:
        return self.store().cursor("g1")

    def last_batch(self) -> int:
        return (self.store().batch_ids() or [0])[-1]

    # -- comparing -----------------------------------------------------------------------------

    def source_rows(self, table: str) -> dict[str, dict[str, str | None]]:
        cols = self.columns[table]
        with sysbench.connect(self.source, self.db) as c, c.cursor() as cur:
            cur.execute(f"SELECT id, {', '.join(cols)} FROM `{table}`")
            return {str(r[0]): {k: _text(v) for k, v in zip(cols, r[1:], strict=True)} for r in cur.fetchall()}

    def target_rows(self, table: str) -> dict[str, dict[str, str | None]]:
        cols = self.columns[table]
        if self.kind == "mariadb":
            with sysbench.connect(self.target, self.names["*"]) as c, c.cursor() as cur:
                cur.execute(f"SELECT id, {', '.join(cols)} FROM `{table}`")
                return {str(r[0]): {k: _text(v) for k, v in zip(cols, r[1:], strict=True)} for r in cur.fetchall()}
        if self.kind == "postgres":
            with _pg(self.target) as conn:
                rows = conn.execute(f'SELECT id, {", ".join(cols)} FROM "{self.names[table]}"').fetchall()
            return {str(r[0]): {k: _text(v) for k, v in zip(cols, r[1:], strict=True)} for r in rows}
        if self.kind == "es":
            from elasticsearch import Elasticsearch

            es = Elasticsearch(self.target["url"], request_timeout=60)
            try:
                es.indices.refresh(index=self.names[table])
                hits = es.search(index=self.names[table], size=10000, query={"match_all": {}})["hits"]["hits"]
            finally:
                es.close()
            return {h["_id"]: {k: _text(h["_source"].get(k)) for k in cols} for h in hits}
        import happybase

        from adapters.hbase.verify import read_rows
        from pipeline.mapping import load_mapping

        m = load_mapping(self.tmp / "mappings" / f"hbase/{table}.yml")
        types = {"id": "int(11)", "k": "int(11)", "c": "char(120)", "pad": "char(60)"}
        conn = happybase.Connection(self.target["host"], int(self.target["port"]), timeout=60000)
        try:
            rows = read_rows(conn, m, types).values()
        finally:
            conn.close()
        return {str(r["id"]): {k: _text(r.get(k)) for k in cols} for r in rows}

    def compare(self) -> tuple[int, int]:
        """(rows compared, rows differing) over every table: a key missing on either side or
        with any mapped column different counts once."""
        compared = differing = 0
        for t in self.table_names():
            src, dst = self.source_rows(t), self.target_rows(t)
            keys = src.keys() | dst.keys()
            compared += len(keys)
            differing += sum(1 for k in keys if src.get(k) != dst.get(k))
        return compared, differing

    def converge(self, row: FaultRow) -> None:
        """Capture to the source's end, sync, compare; fill the report row and assert equality."""
        self.capture()
        self.sync()
        assert self.cursor() == self.last_batch(), "sync did not ack every batch"
        row.rows_compared, row.rows_differing = self.compare()
        assert row.rows_compared >= self.tables * self.table_size // 2
        assert row.rows_differing == 0, f"{row.rows_differing} of {row.rows_compared} rows differ"


def _text(v: Any) -> str | None:
    return None if v is None else str(v)


@contextmanager
def _pg(info: dict) -> Iterator[Any]:
    import psycopg

    conn = psycopg.connect(host=info["host"], port=int(info["port"]), user=info["user"],
                           password=info["password"], dbname=info["database"], autocommit=True)
    try:
        yield conn
    finally:
        conn.close()


def make_deployment(kind: str, tmp: Path, source: dict, target: dict) -> Deployment:
    """Create the target side (database, tables or index) and return the deployment (not set up)."""
    db = f"flt_{uuid.uuid4().hex[:8]}"
    dep = Deployment(kind, tmp, source, target, db)
    if kind == "mariadb":
        dep.names["*"] = f"{db}_copy"
        sysbench.create_database(target, dep.names["*"])
        adapter = rdb_adapter(target, "tgt", dep.names["*"])
    elif kind == "postgres":
        with _pg(target) as conn:
            for t in dep.table_names():
                dep.names[t] = f"{db}_{t}"
                conn.execute(f'CREATE TABLE "{dep.names[t]}" (id integer PRIMARY KEY, k integer NOT NULL DEFAULT 0, '
                             "c varchar(120) NOT NULL DEFAULT '', pad varchar(60) NOT NULL DEFAULT '')")
        adapter = rdb_adapter(target, "tgt", dialect="postgresql")
    elif kind == "es":
        from elasticsearch import Elasticsearch

        es = Elasticsearch(target["url"], request_timeout=60)
        try:
            for t in dep.table_names():
                dep.names[t] = f"{db}-{t}"
                es.indices.create(index=dep.names[t], settings={"number_of_replicas": 0})
        finally:
            es.close()
        adapter = {"name": "es8", "key": "tgt", "hosts": f"{target['host']}:{target['port']}",
                   "properties": {"mode": "rest", "cluster.name": "sluice"}}
    else:
        for t in dep.table_names():
            dep.names[t] = f"FLT_{db[4:].upper()}_{t.upper()}"
        adapter = {"name": "hbase", "key": "tgt", "hosts": f"{target['host']}:{target['port']}"}
    dep.setup(adapter)
    return dep


def drop_deployment(dep: Deployment) -> None:
    """Remove the source database and what the deployment created on the target."""
    sysbench.drop_database(dep.source, dep.db)
    try:
        if dep.kind == "mariadb":
            sysbench.drop_database(dep.target, dep.names["*"])
        elif dep.kind == "postgres":
            with _pg(dep.target) as conn:
                for t in dep.table_names():
                    conn.execute(f'DROP TABLE IF EXISTS "{dep.names[t]}"')
        elif dep.kind == "es":
            from elasticsearch import Elasticsearch

            es = Elasticsearch(dep.target["url"], request_timeout=60)
            try:
                es.indices.delete(index=",".join(dep.names[t] for t in dep.table_names()), ignore_unavailable=True)
            finally:
                es.close()
        else:
            import happybase

            conn = happybase.Connection(dep.target["host"], int(dep.target["port"]), timeout=60000)
            try:
                for t in dep.table_names():
                    if dep.names[t].encode() in conn.tables():
                        conn.delete_table(dep.names[t], disable=True)
            finally:
                conn.close()
    except Exception as e:  # noqa: BLE001 - the target may be the thing a test broke
        print(f"cleanup of {dep.db} on {dep.kind} failed: {e}")


def last_json(text: str) -> dict:
    """The summary line of ``sluice sync --json`` or the record of ``sluice run --json`` (py4j
    and the executors' log lines may come after it)."""
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    raise AssertionError(f"no JSON summary in:\n{text[-3000:]}")


# ---- a follower under repeated faults (tests/e2e/test_follow_progress.py; a chaos soak) -------

class FollowerProcess:
    """``sluice run --follow`` in the background, as a supervisor runs it: the faults below end
    it, and :meth:`start` brings it back (a new process, a new Spark JVM)."""

    def __init__(self, cfg: Path, tmp: Path, interval: float = 0.5, env: dict[str, str] | None = None):
        self.cfg, self.tmp, self.interval, self.env = cfg, tmp, interval, env
        self.proc: Background | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        cmd = [sys.executable, "-m", "pipeline.cli", "--log-json", "run", "--config", str(self.cfg), "--follow",
               "--interval", str(self.interval)]
        self.proc = Background(cmd, self.tmp / f"follower-{self.starts}.log",
                               self.env or dict(os.environ, PYSPARK_PYTHON=sys.executable))

    def running(self) -> bool:
        return self.proc is not None and self.proc.proc.poll() is None

    def kill9(self) -> None:
        """SIGKILL to the follower's whole process group (driver, JVM, Python workers), then a new one."""
        if self.proc is not None:
            self.proc.kill()
        self.start()

    def sigterm(self, timeout: float = 90) -> int:
        """SIGTERM to the driver only (as ``kill <pid>``), wait for it to stop, then a new one."""
        code = -1
        if self.running():
            os.kill(self.proc.proc.pid, signal.SIGTERM)
            code = self.proc.wait(timeout)
        self.start()
        return code

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()

    def output(self, tail: int = 4000) -> str:
        return self.proc.output(tail) if self.proc is not None else ""


@dataclass
class FaultRecord:
    """One fault of a schedule: the group's cursor when it struck and when the next one did."""

    fault: str
    at: float
    cursor_before: int
    pending_before: int
    cursor_after: int | None = None


def fault_schedule(faults: list[tuple[str, Any]], every: float, cursor: Any, pending: Any,
                   alive: Any = None) -> list[FaultRecord]:
    """Run ``faults`` (``(name, callable)``) one after the other, each ``every`` seconds after the
    one before it finished (a restarted follower, a service back), recording the group's cursor
    (``cursor()``) and pending rows (``pending()``) as each strikes; after the last, wait
    ``every`` seconds more. ``alive()``, if given, must stay true between faults (the follower
    did not die by itself). Returns the records; :func:`stalled` names the intervals without progress."""
    out: list[FaultRecord] = []
    for name, act in [*faults, ("end", None)]:
        deadline = time.monotonic() + every
        while time.monotonic() < deadline:
            if alive is not None:
                assert alive(), f"the follower ended by itself before {name}"
            time.sleep(0.5)
        c = cursor()
        if out:
            out[-1].cursor_after = c
        if act is None:
            break
        out.append(FaultRecord(name, time.monotonic(), c, pending()))
        act()
    return out


def stalled(records: list[FaultRecord]) -> list[FaultRecord]:
    """The faults after which the cursor did not move before the next one, although rows were pending."""
    return [r for r in records if r.pending_before > 0 and (r.cursor_after or 0) <= r.cursor_before]


def group_progress(cfg: Path, group: str = "g1") -> tuple[int, int]:
    """(cursor, pending rows) of ``group``, read from the store as status does (files or Kafka)."""
    from pipeline.config import load_config
    from pipeline.store import open_store

    store = open_store(load_config(str(cfg)), create=False)
    try:
        st = store.status()["groups"].get(group) or {}
        return int(st.get("cursor") or 0), int(st.get("pending_rows") or 0)
    finally:
        getattr(store, "close", lambda: None)()
