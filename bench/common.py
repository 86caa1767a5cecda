"""Setup shared by the benches that run the whole job: services, connections, a batch store
filled with Dml lines, a throw-away deployment, a timed ``run_sync``, and recording results.

Services are found in ``$SLUICE_SERVICES_DIR/services.json`` (default ``.sluice/services``),
as ``scripts/services`` writes it.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pymysql
import yaml

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from pipeline.config import load_config  # noqa: E402
from pipeline.job.driver import SyncSummary, run_sync  # noqa: E402
from pipeline.job.session import get_spark, store_jars  # noqa: E402
from pipeline.store import open_store  # noqa: E402
from pipeline.store.files import BatchStore  # noqa: E402

GROUP = "g"


def services() -> dict[str, Any]:
    """The running services (``scripts/services start ...``) of ``$SLUICE_SERVICES_DIR``."""
    sdir = Path(os.environ.get("SLUICE_SERVICES_DIR", REPO / ".sluice" / "services"))
    return json.loads((sdir / "services.json").read_text())


def connect(info: dict[str, Any], db: str | None = None, autocommit: bool = False) -> pymysql.connections.Connection:
    """A pymysql connection to a MariaDB service."""
    return pymysql.connect(host=info["host"], port=info["port"], user=info["user"], password=info["password"],
                           database=db, charset="utf8mb4", autocommit=autocommit)


def quiesce(info: dict[str, Any], timeout: float = 180.0) -> float:
    """Wait until a MariaDB service has written its dirty pages (flushing at full speed meanwhile),
    so that InnoDB's background flushing of one timed phase does not slow down the next one
    (whichever side runs later would pay for the earlier side's writes). Seconds waited."""
    t0 = time.monotonic()
    with connect(info, autocommit=True) as c, c.cursor() as cur:
        cur.execute("SELECT @@GLOBAL.innodb_max_dirty_pages_pct")
        (old,) = cur.fetchone()
        cur.execute("SET GLOBAL innodb_max_dirty_pages_pct = 0")
        try:
            while time.monotonic() - t0 < timeout:
                cur.execute("SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_pages_dirty'")
                if int(cur.fetchone()[1]) < 100:
                    break
                time.sleep(0.5)
        finally:
            cur.execute(f"SET GLOBAL innodb_max_dirty_pages_pct = {float(old)}")
    return time.monotonic() - t0


def create_source_table(src: dict[str, Any], database: str, ddl: str) -> None:
    """Recreate ``database`` on the source with one table (``ddl`` is its CREATE TABLE)."""
    with connect(src) as c, c.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{database}`")
        cur.execute(f"CREATE DATABASE `{database}`")
        cur.execute(ddl)


def dml(database: str, table: str, kind: str, data: dict[str, str | None], types: dict[str, str],
        pk: tuple[str, ...] = ("id",), old: dict[str, str | None] | None = None) -> dict[str, Any]:
    """One single-row Dml record as the capture stores it."""
    return {"id": 0, "database": database, "table": table, "type": kind, "isDdl": False, "sql": "",
            "pkNames": list(pk), "data": [data], "old": [old] if old else None, "mysqlType": types,
            "sqlType": None, "es": 0, "ts": 0, "gtid": None, "logfile": "bench", "logpos": 0}


def fill_store(store: BatchStore, records: list[dict[str, Any]], per_batch: int = 20000) -> list[int]:
    """Append ``records`` as batches of ``per_batch`` lines; the new batch ids."""
    before = set(store.batch_ids())
    with store.capture_lock():
        for i in range(0, len(records), per_batch):
            pos = {"logfile": "bench", "logpos": i}
            store.append(records[i:i + per_batch], start=pos, end=pos)
    return [b for b in store.batch_ids() if b not in before]


def write_deployment(tmp: Path, src: dict[str, Any], adapter: dict[str, Any], mappings: dict[str, dict[str, Any]],
                     partitions: int, src_database: str | None = None, kafka: dict[str, Any] | None = None,
                     spark: dict[str, Any] | None = None) -> Path:
    """``tmp/sluice.yml`` with one group ``g`` (one outer adapter, ``mappings/*.yml``) on
    ``local[partitions]``; ``src_database``: also a ``defaultDS`` data source on it; ``spark``:
    more keys of its ``spark`` section."""
    (tmp / "mappings").mkdir(parents=True, exist_ok=True)
    for name, content in mappings.items():
        (tmp / "mappings" / name).write_text(yaml.safe_dump(content))
    cfg: dict[str, Any] = {
        "source": {"name": "bench", "host": src["host"], "port": src["port"], "user": "root",
                   "password": src["password"]},
        "store": {"path": str(tmp / "store"), **({"kind": "kafka", "kafka": kafka} if kafka else {})},
        "groups": [{"groupId": GROUP, "mappings": ["mappings/*.yml"], "outerAdapters": [adapter]}],
        "spark": {"master": f"local[{partitions}]", "partitions": partitions, **(spark or {})}}
    if src_database is not None:
        cfg["srcDataSources"] = {"defaultDS": {"url": f"jdbc:mysql://{src['host']}:{src['port']}/{src_database}",
                                               "username": "root", "password": src["password"]}}
    (tmp / "sluice.yml").write_text(yaml.safe_dump(cfg))
    return tmp / "sluice.yml"


#: jars for every session a benchmark starts: a later session in the same JVM cannot add a
#: data source (the Kafka connector) that the first one lacked, so a run comparing the file and
#: Kafka stores sets this before its first session
SESSION_JARS: list[str] | None = None


def open_job(cfg_path: Path, app_name: str) -> tuple[Any, BatchStore]:
    """The SparkSession of the deployment (started here, outside any timing) and its store."""
    cfg = load_config(cfg_path)
    store = open_store(cfg)
    return get_spark(cfg.spark, app_name, jars=SESSION_JARS or store_jars(cfg)), store


def timed_sync(cfg_path: Path, spark: Any, store: BatchStore, partitions: int) -> tuple[float, SyncSummary]:
    """Seconds of one ``run_sync`` of group ``g`` over every pending batch (pre-flight checks,
    Spark jobs and acks included); fails unless it applied rows and acked the last batch."""
    cfg = load_config(cfg_path)
    t0 = time.perf_counter()
    summary = run_sync(cfg, GROUP, spark, partitions=partitions, max_batches=1000)
    secs = time.perf_counter() - t0
    assert summary.rows > 0 and store.cursor(GROUP) == store.batch_ids()[-1], summary.as_dict()
    return secs, summary


def record_row(doc: Path, section: str, intro: str, line: str) -> None:
    """Add a table row under the heading ``section`` of ``doc``; ``intro`` (text + table header)
    is written after the heading first if the section has no table yet. The section ends at the
    next heading of the same or a higher level; the row goes at the end of its first table (a
    later table in the section, say of probes, is narrative)."""
    lines = doc.read_text().splitlines() if doc.exists() else ["# Benchmarks"]
    level = section.split(" ", 1)[0]
    try:
        start = lines.index(section)
    except ValueError:
        lines += ["", section, ""]
        start = len(lines) - 2
    end = next((i for i in range(start + 1, len(lines))
                if lines[i].startswith("#") and len(lines[i].split(" ", 1)[0]) <= len(level)), len(lines))
    rows = [i for i in range(start + 1, end) if lines[i].startswith("|")]
    if rows:
        last = rows[0]
        while last + 1 < end and lines[last + 1].startswith("|"):
            last += 1
        lines.insert(last + 1, line)
    else:
        at = start + 1
        while at < end and not lines[at].strip():
            at += 1
        block = ["", *intro.strip("\n").splitlines(), line, ""]
        lines[start + 1:at] = block
    doc.write_text("\n".join(lines).rstrip("\n") + "\n")


def command_line(script: str) -> str:
    """How this bench was started, for the record (with ``nice -n N`` when it ran re-niced)."""
    niceness = os.nice(0)
    prefix = f"nice -n {niceness} " if niceness else ""
    return " ".join([f"{prefix}.venv/bin/python {script}", *sys.argv[1:]])
