"""Operating Sluice like cron does, on the Spark standalone cluster.

sysbench writes in the background while ``sluice run`` (capture --once + sync every group,
submitted with the documented ``spark-submit --master spark://... --py-files sluice-*.zip
sluice_submit.py run --config ...``) is started again and again; afterwards ``sluice verify``
finds 0 differing rows, ``sluice status`` shows the store's numbers, the metrics file parses
as Prometheus text and agrees with the run log, and ``sluice report`` renders the runs.
The store is a local path: driver and executor run on this machine, so both can read it.
"""

from __future__ import annotations

import json
import subprocess
import uuid

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pipeline.state.runlog import RunLog
from pipeline.store.files import BatchStore
from tests.support import sysbench
from tests.support.deploy import rdb_adapter, sluice, spark_submit, write_deployment

ROUNDS = 1  # a round under load, then a status check, a catch-up and an idle run: 3 cluster submits


@pytest.fixture(scope="module")
def deployment(tmp_path_factory, mariadb, mariadb_target):
    tmp = tmp_path_factory.mktemp("ops_cron")
    db = f"opsc_{uuid.uuid4().hex[:6]}"
    tdb = f"{db}_copy"
    sysbench.create_database(mariadb_target, tdb)
    mapping = {"dataSourceKey": "defaultDS", "destination": db, "groupId": "g1", "outerAdapterKey": "tgt",
               "dbMapping": {"mirrorDb": True, "database": db, "targetDb": tdb}}
    cfg = write_deployment(tmp, mariadb, name=db, include=rf"{db}\..*",
                           groups=[{"groupId": "g1", "outerAdapters": [rdb_adapter(mariadb_target, "tgt", tdb)],
                                    "mappings": ["mappings/rdb/*.yml"]}],
                           mappings={"rdb/mirror.yml": mapping}, batch_rows=1000, partitions=2)
    text = cfg.read_text() + "metrics:\n  textfile: metrics/sluice.prom\n  json: metrics/sluice.json\n"
    cfg.write_text(text)
    sluice("capture", "--config", str(cfg), "--once")   # a new store starts at the binlog's end
    with sysbench.connect(mariadb) as c, c.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{db}`")
    sysbench.prepare(mariadb, db, tables=2, table_size=300, create=False)
    yield {"cfg": cfg, "db": db, "tdb": tdb, "tmp": tmp}
    sysbench.drop_database(mariadb, db)
    sysbench.drop_database(mariadb_target, tdb)


def _workload(mariadb: dict, db: str, seconds: int) -> subprocess.Popen:
    """A rate-limited sysbench in the background (a few hundred rows per round)."""
    cmd = sysbench.command(mariadb, db, "run", tables=2, table_size=300, threads=2, seconds=seconds,
                           extra=("--rate=40",))
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _run(spark_cluster, d, *extra: str) -> subprocess.CompletedProcess:
    """The documented cluster command: spark-submit ... sluice_submit.py run --config ..."""
    return spark_submit(spark_cluster, d["tmp"], "run", "--config", str(d["cfg"]), "--json", *extra, check=False)


def _record(proc: subprocess.CompletedProcess) -> dict:
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines, f"no run record (exit {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    return json.loads(lines[-1])


def test_cron_runs_on_the_cluster_converge_and_report(deployment, mariadb, mariadb_target, spark_cluster):
    d = deployment
    cfg = str(d["cfg"])
    records = []
    for i in range(ROUNDS):
        writer = _workload(mariadb, d["db"], seconds=4)
        try:
            proc = _run(spark_cluster, d)
        finally:
            writer.wait(timeout=120)
        rec = _record(proc)
        assert proc.returncode == 0 and rec["status"] == "ok", (i, rec["errors"], proc.stderr[-3000:])
        records.append(rec)
    captured = BatchStore(d["tmp"] / "store" / d["db"], create=False).status()
    assert sum(r["capture"]["rows"] for r in records) == captured["rows"]  # every stored row, counted once
    assert records[-1]["lag"]["groups"]["g1"]["pending_batches"] == 0

    # capture alone leaves batches pending: status shows exactly the store's numbers
    _workload(mariadb, d["db"], seconds=2).wait(timeout=120)
    sluice("capture", "--config", cfg, "--once")
    st = json.loads(sluice("status", "--config", cfg, "--json").stdout)
    store = BatchStore(d["tmp"] / "store" / d["db"], create=False).status()
    assert st["groups"]["g1"]["pending_batches"] == store["groups"]["g1"]["pending_batches"] > 0
    assert st["groups"]["g1"]["pending_rows"] == store["groups"]["g1"]["pending_rows"] > 0
    assert st["groups"]["g1"]["cursor"] == store["groups"]["g1"]["cursor"]
    assert (st["source"]["batches"], st["source"]["rows"], st["source"]["last_batch"]) == \
        (store["batches"], store["rows"], store["last_batch"])
    assert st["groups"]["g1"]["lag_s"] > 0 and st["source"]["capture"]["behind_bytes"] == 0  # read to the end
    assert st["last_run"]["run"] == records[-1]["run"]

    # the final run catches up; a run with nothing new says so with its own exit code
    last = _record(_run(spark_cluster, d))
    assert last["status"] == "ok" and last["lag"]["groups"]["g1"]["pending_batches"] == 0
    idle = _run(spark_cluster, d)
    assert idle.returncode == 4 and _record(idle)["status"] == "nothing"

    out = sluice("verify", "--config", cfg, "--mapping", "mappings/rdb/mirror.yml", "--json", check=False)
    result = json.loads(out.stdout)
    assert out.returncode == 0 and result["ok"] and result["differing_rows"] == 0, result
    assert {t["source"] for t in result["tables"]} == {f"{d['db']}.sbtest1", f"{d['db']}.sbtest2"}
    with sysbench.connect(mariadb, d["db"]) as c, c.cursor() as cur:
        counts = {}
        for t in ("sbtest1", "sbtest2"):
            cur.execute(f"SELECT COUNT(*) FROM {t}")
            counts[f"{d['db']}.{t}"] = cur.fetchone()[0]
    assert {t["source"]: (t["source_rows"], t["target_rows"]) for t in result["tables"]} == {
        k: (n, n) for k, n in counts.items()}

    st = json.loads(sluice("status", "--config", cfg, "--json").stdout)
    store = BatchStore(d["tmp"] / "store" / d["db"], create=False).status()
    assert st["groups"]["g1"]["pending_batches"] == store["groups"]["g1"]["pending_batches"] == 0
    assert st["groups"]["g1"]["cursor"] == store["groups"]["g1"]["cursor"] == store["last_batch"]
    assert st["source"]["capture"]["behind_bytes"] == 0 and st["last_run"]["status"] == "nothing"

    # metrics: valid Prometheus text, the same numbers as the run log; JSON alongside
    runs = RunLog(d["tmp"] / "store" / d["db"]).runs()
    assert [r["run"] for r in runs][-2:] == [last["run"], _record(idle)["run"]]
    families = {f.name: f for f in text_string_to_metric_families((d["tmp"] / "metrics/sluice.prom").read_text())}
    sample = {(f.name, tuple(sorted(s.labels.items()))): s.value for f in families.values() for s in f.samples}
    src = (("source", d["db"]),)
    assert sample[("sluice_last_run_exit_code", src)] == 4
    assert sample[("sluice_last_run_success", src)] == 1
    assert sample[("sluice_group_pending_batches", (("group", "g1"), *src))] == 0
    assert sample[("sluice_group_cursor", (("group", "g1"), *src))] == store["last_batch"]
    assert "sluice_capture_lag_seconds" in families and "sluice_last_success_timestamp_seconds" in families
    doc = json.loads((d["tmp"] / "metrics/sluice.json").read_text())
    assert doc["run"]["run"] == runs[-1]["run"]

    # accumulators: the executors' own totals agree with the result rows
    synced = [r["sync"]["g1"] for r in records + [last] if r["sync"]["g1"].get("rows")]
    assert synced and all(s["executor"]["rows"] == s["rows"] for s in synced)
    # one task per partition per segment with DML; a round without DDL is one segment
    assert all(s["executor"]["failed_partitions"] == 0 for s in synced)
    # (a round of at most spark.smallRows rows -- 10000 by default -- runs in one partition)
    def width(s):
        return 1 if s["rows"] <= 10000 else 2
    assert all(s["executor"]["partitions"] == width(s) for s in synced if s["ddl"] == 0), synced
    assert all(s["executor"]["partitions"] in range(width(s), width(s) * (s["ddl"] + 1) + 1, width(s))
               for s in synced), synced

    page = d["tmp"] / "report.html"
    sluice("report", "--config", cfg, "--out", str(page))
    html = page.read_text()
    assert html.count("<svg") == 4 and last["run"] in html and "http" not in html.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")


def test_verify_lists_planted_differences(deployment, mariadb_target):
    d = deployment
    # a converged mirror first, whichever test ran before (the cron test may not have)
    sluice("capture", "--config", str(d["cfg"]), "--once")
    applied = sluice("sync", "--config", str(d["cfg"]), "--group", "g1", check=False)  # exit 0 also with nothing
    assert applied.returncode == 0, applied.stderr[-3000:]
    assert BatchStore(d["tmp"] / "store" / d["db"], create=False).status()["groups"]["g1"]["pending_batches"] == 0
    with sysbench.connect(mariadb_target, d["tdb"]) as c, c.cursor() as cur:
        cur.execute("SELECT MIN(id), MAX(id) FROM sbtest1")
        lo, hi = cur.fetchone()
        cur.execute("UPDATE sbtest1 SET c = 'planted' WHERE id = %s", (lo,))
        cur.execute("DELETE FROM sbtest1 WHERE id = %s", (hi,))
        cur.execute("INSERT INTO sbtest2 (id, k, c, pad) VALUES (9000001, 1, 'x', 'y')")
    out = sluice("verify", "--config", str(d["cfg"]), "--chunk-size", "50", "--json", check=False)
    assert out.returncode == 5  # differences found (docs/operations.md)
    tables = {t["source"].split(".")[1]: t for t in json.loads(out.stdout)["tables"]}
    assert tables["sbtest1"]["keys"] == {"missing": [hi], "extra": [], "changed": [lo]}
    assert tables["sbtest2"]["keys"] == {"missing": [], "extra": [9000001], "changed": []}
    assert tables["sbtest1"]["chunks"] > 2 and tables["sbtest1"]["differing_chunks"] == 2
