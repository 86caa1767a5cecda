"""``sluice run`` against the real source and target in local mode: a failing target makes the
run exit 1 with the error in the run log, ``status`` and the metrics (never the password); once
fixed, the next run applies everything and exits 0; then there is nothing to do (exit 4)."""

from __future__ import annotations

import json
import uuid

import pymysql
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.support.deploy import rdb_adapter, sluice, write_deployment


def _sql(info: dict, *stmts: str) -> None:
    conn = pymysql.connect(host=info["host"], port=info["port"], user=info["user"], password=info["password"],
                           autocommit=True)
    try:
        with conn.cursor() as cur:
            for s in stmts:
                cur.execute(s)
    finally:
        conn.close()


@pytest.fixture
def dep(tmp_path, mariadb, mariadb_target):
    db = f"opsr_{uuid.uuid4().hex[:6]}"
    _sql(mariadb_target, f"CREATE DATABASE `{db}_copy`")
    mapping = {"groupId": "g1", "outerAdapterKey": "tgt", "dbMapping": {"mirrorDb": True, "database": db,
                                                                       "targetDb": f"{db}_copy"}}
    bad = dict(mariadb_target, password="wrong-pw-1234")
    cfg = write_deployment(tmp_path, mariadb, name=db, include=rf"{db}\..*", master="local[1]", partitions=1,
                           groups=[{"groupId": "g1", "outerAdapters": [rdb_adapter(bad, "tgt", f"{db}_copy")],
                                    "mappings": ["mappings/rdb/*.yml"]}], mappings={"rdb/m.yml": mapping})
    raw = yaml.safe_load(cfg.read_text())
    raw["metrics"] = {"textfile": "m/sluice.prom", "json": "m/sluice.json"}
    cfg.write_text(yaml.safe_dump(raw, sort_keys=False))
    # the target refuses the login, so whether it was applied to before cannot be told: start at "now"
    sluice("capture", "--config", str(cfg), "--once", "--from", "now")
    _sql(mariadb, f"CREATE DATABASE `{db}`", f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v VARCHAR(10))",
         f"INSERT INTO `{db}`.t VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    yield {"cfg": cfg, "db": db, "raw": raw, "tmp": tmp_path}
    _sql(mariadb, f"DROP DATABASE IF EXISTS `{db}`")
    _sql(mariadb_target, f"DROP DATABASE IF EXISTS `{db}_copy`")


def _prom(path) -> dict:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(path.read_text()) for s in f.samples}


def test_failure_is_recorded_then_fixed_then_nothing(dep, mariadb_target):
    cfg = str(dep["cfg"])
    bad = sluice("run", "--config", cfg, "--json", check=False)
    assert bad.returncode == 1, bad.stderr[-3000:]
    rec = json.loads(bad.stdout.strip().splitlines()[-1])
    assert rec["status"] == "failed" and rec["capture"]["rows"] == 5  # 3 rows + 2 DDL (each counts 1)
    assert rec["errors"][0]["stage"] == "sync" and rec["errors"][0]["group"] == "g1"
    assert "wrong-pw-1234" not in bad.stdout + bad.stderr
    st = json.loads(sluice("status", "--config", cfg, "--json").stdout)
    assert st["last_run"]["status"] == "failed" and st["groups"]["g1"]["pending_rows"] == 5
    assert st["groups"]["g1"]["last_run"]["ok"] is False and st["last_success_at"] is None
    assert st["source"]["capture"]["behind_bytes"] == 0 and st["source"]["capture"]["lag_s"] == 0  # read to the end
    prom = _prom(dep["tmp"] / "m/sluice.prom")
    src = ("source", dep["db"])
    assert prom[("sluice_last_run_success", (src,))] == 0
    assert prom[("sluice_last_run_sync_success", (("group", "g1"), src))] == 0
    text = sluice("status", "--config", cfg).stdout
    assert "FAILED" in text and "wrong-pw-1234" not in text

    dep["raw"]["groups"][0]["outerAdapters"][0] = rdb_adapter(mariadb_target, "tgt", f"{dep['db']}_copy")
    dep["cfg"].write_text(yaml.safe_dump(dep["raw"], sort_keys=False))
    good = sluice("run", "--config", cfg, "--json")
    rec = json.loads(good.stdout.strip().splitlines()[-1])
    assert rec["status"] == "ok" and rec["sync"]["g1"]["inserted"] == {f"{dep['db']}.t": 3}
    assert rec["sync"]["g1"]["executor"]["rows"] == rec["sync"]["g1"]["rows"] and rec["lag"]["groups"]["g1"][
        "pending_batches"] == 0
    idle = sluice("run", "--config", cfg, check=False)
    assert idle.returncode == 4 and "nothing" in idle.stdout
    assert sluice("verify", "--config", cfg).returncode == 0
    prom = _prom(dep["tmp"] / "m/sluice.prom")
    assert prom[("sluice_last_run_exit_code", (src,))] == 4 and prom[("sluice_last_run_success", (src,))] == 1
