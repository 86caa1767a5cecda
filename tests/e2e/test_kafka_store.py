"""The Kafka store end to end: sysbench on the source -> capture publishes to Kafka (3 partitions,
rows hashed by primary key as canal's partitionHash) -> the Spark job's executors read the offset
ranges (sluice-spark.jar's reader) -> a mirror database; ``sluice verify`` finds 0 differing rows.

Also: replaying everything (cursor 0) changes nothing; the group's offsets are Kafka consumer-group
offsets (``kafka-consumer-groups --describe`` shows lag 0 after a sync); two groups at different
offsets, and a deployment with only one of them refused ``store restart`` of the shared store;
kill -9 of the job mid-apply acks nothing and a rerun converges; spark-submit to the standalone
cluster with the jars of ``sluice package``.

The replay and the kill run with ``SLUICE_E2E_FULL=1`` (CI budget): by default test_ack_window.py
kills a Kafka-store sync before its ack and replays the round over the target that holds it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.support import sysbench
from tests.support.compare import diff_databases
from tests.support.deploy import REPO, kafka_store, rdb_adapter, sluice, submit_command, write_deployment
from tests.support.matrix import FULL


@pytest.fixture(scope="module")
def deployment(tmp_path_factory, mariadb, mariadb_target, kafka):
    tmp = tmp_path_factory.mktemp("kafka")
    db = f"sbk_{uuid.uuid4().hex[:6]}"
    tdb, tdb2 = f"{db}_copy", f"{db}_two"
    for t in (tdb, tdb2):
        sysbench.create_database(mariadb_target, t)
    mappings = {f"rdb/{name}.yml": {"dataSourceKey": "defaultDS", "destination": db, "groupId": g,
                                    "outerAdapterKey": g, "dbMapping": {"mirrorDb": True, "database": db,
                                                                        "targetDb": target}}
                for name, g, target in (("one", "g1", tdb), ("two", "g2", tdb2))}
    groups = [{"groupId": g, "outerAdapters": [rdb_adapter(mariadb_target, g, target)],
               "mappings": [f"mappings/rdb/{name}.yml"]}
              for name, g, target in (("one", "g1", tdb), ("two", "g2", tdb2))]
    cfg = write_deployment(tmp, mariadb, name=db, include=rf"{db}\..*", groups=groups, mappings=mappings,
                           batch_rows=2000, round_rows=0, kafka=kafka_store(kafka, db, partitionsNum=3,
                                                              partitionHash=rf"{db}\..*:$pk$"))
    sluice("capture", "--config", str(cfg), "--once")         # a new store starts here
    with sysbench.connect(mariadb) as c, c.cursor() as cur:   # CREATE DATABASE and tables go through Kafka too
        cur.execute(f"CREATE DATABASE `{db}`")
    sysbench.prepare(mariadb, db, tables=3, table_size=1000, create=False)
    yield {"cfg": cfg, "db": db, "tdb": tdb, "tdb2": tdb2, "tmp": tmp, "kafka": kafka}
    sysbench.drop_database(mariadb, db)
    for t in (tdb, tdb2):
        sysbench.drop_database(mariadb_target, t)


def _json(stdout: str) -> dict:
    return json.loads([line for line in stdout.splitlines() if line.startswith("{")][-1])


def _cursor(cfg: Path, group: str = "g1") -> int:
    st = json.loads(sluice("store", "status", "--config", str(cfg), "--json").stdout)
    return st["groups"].get(group, {}).get("cursor", 0)


def _equal(mariadb, mariadb_target, db: str, tdb: str) -> None:
    diff = diff_databases(mariadb, db, mariadb_target, tdb)
    assert diff and all(v == 0 for v in diff.values()), diff


def _describe(kafka: dict, group: str) -> str:
    return subprocess.run([f"{kafka['bin']}/kafka-consumer-groups", "--describe", "--group", group],
                          capture_output=True, text=True, timeout=120).stdout


def test_sysbench_through_kafka_verifies_equal(deployment, mariadb, mariadb_target):
    d = deployment
    sysbench.run(mariadb, d["db"], seconds=3, threads=2, tables=3, table_size=1000)
    with sysbench.connect(mariadb, d["db"]) as c, c.cursor() as cur:  # a key change and a DDL mid-stream
        cur.execute("UPDATE sbtest1 SET id = id + 1000000 WHERE id % 97 = 0")
        cur.execute("ALTER TABLE sbtest2 ADD COLUMN note VARCHAR(20) DEFAULT 'x'")
        cur.execute("UPDATE sbtest2 SET note = 'after' WHERE id % 3 = 0")
    sluice("capture", "--config", str(d["cfg"]), "--once")
    out = _json(sluice("sync", "--config", str(d["cfg"]), "--group", "g1", "--json").stdout)
    assert out["rows"] > 0 and out["ddl"] >= 4
    _equal(mariadb, mariadb_target, d["db"], d["tdb"])
    v = sluice("verify", "--config", str(d["cfg"]), "--mapping", str(d["tmp"] / "mappings/rdb/one.yml"), check=False)
    assert v.returncode == 0, v.stdout + v.stderr
    assert _cursor(d["cfg"]) == out["cursor"]
    described = _describe(d["kafka"], "g1")
    lines = [ln.split() for ln in described.splitlines() if ln.startswith("g1 ")]
    lines = [parts for parts in lines if parts[1] in (d["db"], f"{d['db']}.sluice-batches")]  # this run's topics
    assert lines and all(parts[5] == "0" for parts in lines), described  # LAG column: nothing pending
    assert {parts[1] for parts in lines} >= {d["db"], f"{d['db']}.sluice-batches"}


def test_second_group_at_its_own_offsets(deployment, mariadb, mariadb_target):
    d = deployment
    assert _cursor(d["cfg"], "g2") == 0
    sysbench.run(mariadb, d["db"], seconds=2, threads=2, tables=3, table_size=1000)
    sluice("capture", "--config", str(d["cfg"]), "--once")
    g1 = _cursor(d["cfg"])
    out = _json(sluice("sync", "--config", str(d["cfg"]), "--group", "g2", "--json").stdout)
    assert out["cursor"] > g1 and _cursor(d["cfg"]) == g1  # g2 applied everything; g1 did not move
    _equal(mariadb, mariadb_target, d["db"], d["tdb2"])
    sluice("sync", "--config", str(d["cfg"]), "--group", "g1")
    _equal(mariadb, mariadb_target, d["db"], d["tdb"])


def test_a_deployment_without_the_other_group_cannot_restart_the_shared_store(deployment):
    """g1 and g2 both have cursors (consumer-group offsets on the batch topic): another deployment
    sharing the store with only g1 is refused `store restart`, naming g2 (moving the start would
    skip or repeat history under g2's targets), and no cursor moves. Its fix for a group no
    deployment uses any more, followed, deletes g2's consumer group: the store is no longer shared
    (restart then stops at g1's own acked batches)."""
    import yaml

    d = deployment
    raw = yaml.safe_load(Path(d["cfg"]).read_text())
    raw["groups"] = [g for g in raw["groups"] if g["groupId"] == "g1"]
    alone = Path(d["cfg"]).with_name("only-g1.yml")
    alone.write_text(yaml.safe_dump(raw, sort_keys=False))
    was = _cursor(d["cfg"], "g2")  # 0 unless the long form's test above synced g2
    sluice("store", "set-cursor", "--config", str(d["cfg"]), "--group", "g2", "--to", str(was or 1))
    try:
        before = {g: _cursor(d["cfg"], g) for g in ("g1", "g2")}
        proc = sluice("store", "restart", "--config", str(alone), "--from", "now", check=False)
        assert proc.returncode == 2 and "the store is shared with group(s) g2, which" in proc.stderr, proc.stderr
        assert {g: _cursor(d["cfg"], g) for g in ("g1", "g2")} == before
        fix = proc.stderr.split("a group no deployment uses any more: ", 1)[1].split(" (its cursor)")[0].split()
        assert fix[:2] == ["kafka-consumer-groups", "--bootstrap-server"] and fix[3:] == ["--delete", "--group", "g2"]
        tool = [f"{d['kafka']['bin']}/kafka-consumer-groups", *fix[3:]]  # the test's tool names the broker itself
        assert subprocess.run(tool, capture_output=True, text=True, timeout=120).returncode == 0
        proc = sluice("store", "restart", "--config", str(alone), "--from", "now", check=False)
        assert proc.returncode == 2 and "group(s) g1 (cursor " in proc.stderr, proc.stderr
    finally:
        sluice("store", "set-cursor", "--config", str(d["cfg"]), "--group", "g2", "--to", str(was))


def test_replay_everything_changes_nothing(deployment, mariadb, mariadb_target):
    d = deployment
    before = _cursor(d["cfg"])
    sluice("store", "set-cursor", "--config", str(d["cfg"]), "--group", "g1", "--to", "0")
    assert _cursor(d["cfg"]) == 0
    out = _json(sluice("sync", "--config", str(d["cfg"]), "--group", "g1", "--json").stdout)
    assert out["cursor"] == before and sum(out["skipped"].values()) > 0
    _equal(mariadb, mariadb_target, d["db"], d["tdb"])


def test_kill_job_mid_apply_acks_nothing_and_rerun_converges(deployment, mariadb, mariadb_target, tmp_path):
    d = deployment
    sysbench.run(mariadb, d["db"], seconds=2, threads=2, tables=3, table_size=1000)
    sluice("capture", "--config", str(d["cfg"]), "--once")
    before = _cursor(d["cfg"])
    marker = tmp_path / "paused"
    env = dict(os.environ, SLUICE_TEST_PAUSE_AFTER_ROWS="200", SLUICE_TEST_PAUSE_MARKER=str(marker),
               PYSPARK_PYTHON=sys.executable)
    proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "sync", "--config", str(d["cfg"]), "--group", "g1",
                             "--partitions", "2"], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        deadline = time.time() + 300
        while not marker.exists():
            assert proc.poll() is None, proc.stderr.read()[-4000:]
            assert time.time() < deadline, "the executor never reached the pause"
            time.sleep(0.5)
        assert _cursor(d["cfg"]) == before, "acked while a partition was still applying"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert _cursor(d["cfg"]) == before
    sluice("sync", "--config", str(d["cfg"]), "--group", "g1")
    _equal(mariadb, mariadb_target, d["db"], d["tdb"])


def test_spark_submit_on_the_standalone_cluster(deployment, mariadb, mariadb_target, spark_cluster):
    """The cluster path: spark-submit to the standalone master with the jars `sluice package` put
    in dist/jars; executors in the worker's JVM read the ranges from the broker, the driver
    commits the group's offsets."""
    d = deployment
    sysbench.run(mariadb, d["db"], seconds=2, threads=2, tables=3, table_size=1000)
    sluice("capture", "--config", str(d["cfg"]), "--once")
    cmd, env = submit_command(spark_cluster, d["tmp"], "--config", str(d["cfg"]), "--group", "g1", "--json")
    jars = sorted((d["tmp"] / "dist" / "jars").glob("*.jar"))
    assert {"sluice-spark", "spark-sql-kafka-0-10", "kafka-clients"} <= {j.name.rsplit("-", 1)[0].split("_")[0]
                                                                          for j in jars}, jars
    at = cmd.index("--py-files")
    cmd[at:at] = ["--jars", ",".join(map(str, jars))]
    proc = subprocess.run(cmd, env=env, text=True, capture_output=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    out = _json(proc.stdout)
    assert out["rows"] > 0 and _cursor(d["cfg"]) == out["cursor"]
    _equal(mariadb, mariadb_target, d["db"], d["tdb"])


if not FULL:  # long forms (SLUICE_E2E_FULL=1; CI budget): test_ack_window.py[kafka] covers both
    del test_replay_everything_changes_nothing
    del test_kill_job_mid_apply_acks_nothing_and_rerun_converges
    # two groups at their own offsets (Kafka consumer-group offsets per group): the long form only
    del test_second_group_at_its_own_offsets
    # the Kafka store's jars on the standalone cluster: the long form (the cluster path by default:
    # test_sync_mirror.py, test_ops_cron.py, test_faults.py)
    del test_spark_submit_on_the_standalone_cluster
