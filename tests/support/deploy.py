"""Write a throw-away deployment (sluice.yml + mapping files) for an end-to-end test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]


def rdb_adapter(info: dict[str, Any], key: str, database: str | None = None, dialect: str = "mysql") -> dict:
    """An ``outerAdapters`` entry in canal's jdbc.* form for a fixture's server."""
    db = database or info.get("database", "")
    scheme = "mysql" if dialect == "mysql" else "postgresql"
    return {"name": "rdb", "key": key, "properties": {
        "jdbc.url": f"jdbc:{scheme}://{info['host']}:{info['port']}/{db}",
        "jdbc.username": info["user"], "jdbc.password": info["password"]}}


def mirror_deployment(tmp: Path, source: dict[str, Any], target: dict[str, Any], prefix: str, *,
                      batch_rows: int, kafka: dict[str, Any] | None = None, partitions: int = 2) -> dict[str, Any]:
    """A fresh source database ``<prefix>_<hex>`` mirrored (canal ``mirrorDb``) into ``<db>_copy`` on
    ``target`` by group ``g1`` on ``local[2]``, into the file store or (``kafka``: the fixture) a
    Kafka store of 2 partitions hashed by primary key; the store started at the binlog's end, the
    target database created, the source database not yet. Returns ``cfg``, ``db``, ``tdb``, ``tmp``."""
    import uuid

    from tests.support import sysbench

    db = f"{prefix}_{uuid.uuid4().hex[:6]}"
    tdb = f"{db}_copy"
    sysbench.create_database(target, tdb)
    mapping = {"dataSourceKey": "defaultDS", "destination": db, "groupId": "g1", "outerAdapterKey": "t",
               "dbMapping": {"mirrorDb": True, "database": db, "targetDb": tdb}}
    cfg = write_deployment(tmp, source, name=db, include=rf"{db}\..*", master="local[2]", partitions=partitions,
                           groups=[{"groupId": "g1", "outerAdapters": [rdb_adapter(target, "t", tdb)],
                                    "mappings": ["mappings/rdb/m.yml"]}], mappings={"rdb/m.yml": mapping},
                           batch_rows=batch_rows,
                           kafka=kafka_store(kafka, db, partitionsNum=2, partitionHash=rf"{db}\..*:$pk$")
                           if kafka else None)
    sluice("capture", "--config", str(cfg), "--once")  # the store starts at the binlog's end
    return {"cfg": cfg, "db": db, "tdb": tdb, "tmp": tmp}


def write_deployment(tmp: Path, source: dict[str, Any], *, name: str, include: str,
                     groups: list[dict], mappings: dict[str, dict], partitions: int = 4,
                     master: str = "local[2]", batch_rows: int = 5000, kafka: dict[str, Any] | None = None,
                     round_rows: int | None = None) -> Path:
    """Write ``tmp/sluice.yml`` and ``tmp/mappings/<file>`` and return the config path.

    ``mappings`` maps a file name (e.g. ``rdb/mirror.yml``) to its canal-format content;
    each group's ``mappings`` should list globs relative to ``tmp``. ``kafka``: a ``store.kafka``
    section (``store.kind`` becomes kafka), see :func:`kafka_store`. ``round_rows``:
    ``spark.roundRows`` (0: a sync's rounds are not bounded, each takes ``--max-batches`` batches:
    the crash tests that stop a sync in a known round, or assert that a killed sync acked nothing).
    """
    for fname, content in mappings.items():
        p = tmp / "mappings" / fname
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(yaml.safe_dump(content, sort_keys=False))
    cfg = {
        "source": {"name": name, "host": source["host"], "port": source["port"], "user": source["user"],
                   "password": source["password"], "serverId": 7000 + (os.getpid() % 1000),
                   "filter": {"include": include}},
        "store": {"path": str(tmp / "store"), "batch": {"maxRows": batch_rows},
                  **({"kind": "kafka", "kafka": kafka} if kafka else {})},
        "groups": groups,
        "spark": {"master": master, "partitions": partitions,
                  **({"roundRows": round_rows} if round_rows is not None else {})},
    }
    path = tmp / "sluice.yml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def kafka_store(info: dict[str, Any], topic: str, **more: Any) -> dict[str, Any]:
    """A ``store.kafka`` section for the suite's broker (``more``: partitionsNum, partitionHash, ...)."""
    return {"bootstrap.servers": info["bootstrap"], "topic": topic, **more}


def sluice(*args: str, timeout: float = 900, env: dict | None = None, check: bool = True
           ) -> subprocess.CompletedProcess:
    """Run the ``sluice`` CLI of this checkout as a subprocess."""
    e = dict(os.environ, **(env or {}))
    e.setdefault("PYSPARK_PYTHON", sys.executable)
    proc = subprocess.run([sys.executable, "-m", "pipeline.cli", *args], cwd=REPO, env=e, text=True,
                          capture_output=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"sluice {' '.join(args)} exited {proc.returncode}\n"
                             f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-5000:]}")
    return proc


def spark_submit(spark_info: dict[str, Any], tmp: Path, *args: str, timeout: float = 900, check: bool = True
                 ) -> subprocess.CompletedProcess:
    """``sluice package`` + ``spark-submit --master spark://... --py-files zip entry.py args``."""
    cmd, env = submit_command(spark_info, tmp, *args)
    proc = subprocess.run(cmd, env=env, text=True, capture_output=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"spark-submit exited {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\n"
                             f"stderr:\n{proc.stderr[-6000:]}")
    return proc


def submit_command(spark_info: dict[str, Any], tmp: Path, *args: str) -> tuple[list[str], dict[str, str]]:
    """``sluice package`` into ``tmp/dist``; the spark-submit command line and environment."""
    dist = tmp / "dist"
    sluice("package", "--out", str(dist))
    zips = sorted(dist.glob("sluice-*.zip"))
    home = spark_info["spark_home"]
    env = dict(os.environ, SPARK_HOME=home, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_LOCAL_IP="127.0.0.1")
    env.setdefault("JAVA_HOME", "/usr/lib/jvm/java-17-openjdk-amd64")
    cmd = [f"{home}/bin/spark-submit", "--master", spark_info["master_url"], "--conf", "spark.ui.enabled=false",
           "--py-files", str(zips[-1]), str(dist / "sluice_submit.py"), *args]
    return cmd, env


def mirror_groups(target: dict[str, Any], database: str, groups: dict[str, int]) -> tuple[list, dict]:
    """``groups`` and ``mappings`` for :func:`write_deployment`: one ``mirrorDb`` group per name in
    ``groups`` (name -> the partitions a test syncs it with), each into its own target database
    ``<database>_<name>``, which is created (empty) on ``target``."""
    from tests.support import sysbench

    out, mappings = [], {}
    for g in groups:
        tdb = f"{database}_{g}"
        sysbench.create_database(target, tdb)
        mappings[f"{g}/mirror.yml"] = {"dataSourceKey": "defaultDS", "destination": database, "groupId": g,
                                       "outerAdapterKey": g, "dbMapping": {"mirrorDb": True, "database": database,
                                                                           "targetDb": tdb}}
        out.append({"groupId": g, "outerAdapters": [rdb_adapter(target, g, tdb)], "mappings": [f"mappings/{g}/*.yml"]})
    return out, mappings
