"""The README's main job on the embedded defaults: sysbench -> capture -> Spark sync -> compare.

Runs against the services started by ``scripts/services start mariadb mariadb-target``:
writes a deployment under ``.sluice/demo/`` (config + a canal mirrorDb mapping), starts
capture at the source's current position, creates a sysbench database and runs an OLTP
workload, captures it, applies it with Spark (local[*]) into a mirror database on the
target server, and prints a per-table source-vs-target comparison.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pymysql
import yaml

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / ".sluice" / "demo"
SRC_DB, DST_DB = "sbtest", "sbtest_mirror"


def services() -> dict:
    sdir = Path(os.environ.get("SLUICE_SERVICES_DIR", REPO / ".sluice" / "services"))
    return json.loads((sdir / "services.json").read_text())


def sql(info: dict, *stmts: str, db: str | None = None) -> list:
    conn = pymysql.connect(host=info["host"], port=info["port"], user=info["user"], password=info["password"],
                           database=db, autocommit=True, charset="utf8mb4")
    out = []
    with conn.cursor() as cur:
        for s in stmts:
            cur.execute(s)
            out = list(cur.fetchall())
    conn.close()
    return out


def sluice(*args: str) -> str:
    print(f"$ sluice {' '.join(args)}", flush=True)
    proc = subprocess.run([sys.executable, "-m", "pipeline.cli", *args], cwd=REPO, text=True,
                          stdout=subprocess.PIPE, env=dict(os.environ, PYSPARK_PYTHON=sys.executable))
    print(proc.stdout, end="", flush=True)
    if proc.returncode != 0:
        sys.exit(proc.returncode)
    return proc.stdout


def sysbench(src: dict, action: str, *extra: str) -> None:
    cmd = ["sysbench", "oltp_read_write", "--db-driver=mysql", "--mysql-host=127.0.0.1",
           f"--mysql-port={src['port']}", "--mysql-user=root", f"--mysql-password={src['password']}",
           f"--mysql-db={SRC_DB}", "--tables=3", "--table-size=5000", "--threads=4", *extra, action]
    print(f"$ sysbench oltp_read_write --tables=3 --table-size=5000 --threads=4 {' '.join(extra)} {action}")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        if any(k in line for k in ("transactions:", "queries:", "Creating table")):
            print("   ", line.strip())


def write_config(src: dict, dst: dict) -> Path:
    shutil.rmtree(DEMO, ignore_errors=True)
    (DEMO / "mappings").mkdir(parents=True)
    mapping = {"dataSourceKey": "defaultDS", "destination": "demo", "groupId": "g1", "outerAdapterKey": "mirror",
               "concurrent": True, "dbMapping": {"mirrorDb": True, "database": SRC_DB, "targetDb": DST_DB}}
    (DEMO / "mappings" / "mirror.yml").write_text(yaml.safe_dump(mapping, sort_keys=False))
    cfg = {
        "source": {"name": "demo", "host": src["host"], "port": src["port"], "user": "root",
                   "passwordEnv": "SLUICE_DEMO_SOURCE_PASSWORD", "filter": {"include": rf"{SRC_DB}\..*"}},
        "store": {"path": "store"},
        "groups": [{"groupId": "g1", "mappings": ["mappings/*.yml"], "outerAdapters": [{
            "name": "rdb", "key": "mirror", "properties": {
                "jdbc.url": f"jdbc:mysql://{dst['host']}:{dst['port']}/{DST_DB}", "jdbc.username": "root",
                "jdbc.password": "${SLUICE_DEMO_TARGET_PASSWORD}"}}]}],
        "spark": {"master": "local[*]", "partitions": 4},
    }
    path = DEMO / "sluice.yml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    os.environ["SLUICE_DEMO_SOURCE_PASSWORD"] = src["password"]
    os.environ["SLUICE_DEMO_TARGET_PASSWORD"] = dst["password"]
    return path


def compare(src: dict, dst: dict) -> int:
    bad = 0
    print(f"\n{'table':12} {'source rows':>12} {'target rows':>12} {'differing':>10}")
    for (table,) in sql(src, f"SHOW TABLES FROM {SRC_DB}"):
        a = set(sql(src, f"SELECT * FROM {SRC_DB}.{table}"))
        b = set(sql(dst, f"SELECT * FROM {DST_DB}.{table}"))
        diff = len(a ^ b)
        bad += diff
        print(f"{table:12} {len(a):12} {len(b):12} {diff:10}")
    print("\nsource and mirror are equal" if bad == 0 else f"\n{bad} rows differ")
    return bad


def main() -> int:
    svc = services()
    src, dst = svc["mariadb"], svc["mariadb-target"]
    cfg = str(write_config(src, dst))
    sql(src, f"DROP DATABASE IF EXISTS {SRC_DB}")
    sql(dst, f"DROP DATABASE IF EXISTS {DST_DB}", f"CREATE DATABASE {DST_DB}")
    sluice("capture", "--config", cfg, "--once")          # a new store starts at the current position
    sql(src, f"CREATE DATABASE {SRC_DB}")
    sysbench(src, "prepare")
    sysbench(src, "run", "--time=10")
    sluice("capture", "--config", cfg, "--once")
    sluice("store", "status", "--config", cfg)
    sluice("sync", "--config", cfg, "--group", "g1")
    return 1 if compare(src, dst) else 0


if __name__ == "__main__":
    sys.exit(main())
