"""A new user's mistakes that need no server, each through the real CLI: one message naming the
file, key or path, the exit code of docs/operations.md, no traceback (issue 22)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml

from pipeline.store.files import BatchStore
from sluice_common import exitcodes
from tests.support.cli import NOBODY, cli, one_message
from tests.support.prereq import missing


def _deployment(root: Path, mappings: list[str] | None = None) -> Path:
    (root / "mappings").mkdir(parents=True, exist_ok=True)
    (root / "mappings" / "t.yml").write_text(yaml.safe_dump({"dbMapping": {
        "database": "d", "table": "t", "targetTable": "t", "targetPk": {"id": None}, "mapAll": True}}))
    cfg = root / "sluice.yml"
    cfg.write_text(yaml.safe_dump({
        "source": {"name": "s", "host": "127.0.0.1", "port": 1, "password": "src-secret-pw"},
        "store": {"path": str(root / "store")},
        "groups": [{"groupId": "g1", "outerAdapters": [{"name": "rdb", "properties": {
            "jdbc.url": "jdbc:mysql://127.0.0.1:1/d", "jdbc.username": "u", "jdbc.password": "tgt-secret-pw"}}],
            "mappings": mappings or ["mappings/*.yml"]}]}))
    return cfg


@pytest.fixture
def deployment(tmp_path):
    return _deployment(tmp_path)


def test_an_empty_config_is_refused(tmp_path):
    cfg = tmp_path / "sluice.yml"
    cfg.write_text("# nothing yet\n")
    for args in (["run"], ["sync", "-g", "g1"], ["status"]):
        one_message(cli(*args, "--config", str(cfg)), exitcodes.CONFIG,
                    f"sluice: error: {cfg}: the file is empty", "examples/sluice.yml")


def test_a_config_path_that_is_a_directory(tmp_path):
    one_message(cli("run", "--config", str(tmp_path)), exitcodes.CONFIG,
                f"sluice: error: {tmp_path}: is a directory, not a config file")


def test_a_mapping_file_that_is_a_directory(tmp_path):
    cfg = _deployment(tmp_path, mappings=["mappings"])
    for args in (["sync", "-g", "g1"], ["verify"], ["etl", "-g", "g1", "--all"]):
        one_message(cli(*args, "--config", str(cfg)), exitcodes.CONFIG,
                    "sluice: error: mappings: is a directory, not a mapping file", "mappings/*.yml")


def test_a_group_with_a_broken_mapping_is_invalid_under_run(tmp_path):
    """run records the group as not started (status invalid, exit 2) before capture and Spark."""
    cfg = _deployment(tmp_path)
    (tmp_path / "mappings" / "t.yml").write_text("dbMapping:\n  database: d\n  table: t\n  targetTable: t\n")
    proc = cli("run", "--config", str(cfg), "--no-capture", "--json")
    assert proc.returncode == exitcodes.CONFIG and "Traceback" not in proc.stdout + proc.stderr
    rec = json.loads(proc.stdout.strip().splitlines()[-1])
    assert rec["status"] == "invalid" and rec["exit"] == 2
    assert rec["errors"][0]["stage"] == "config" and rec["errors"][0]["group"] == "g1"
    assert rec["errors"][0]["message"].startswith("mappings/t.yml: dbMapping.targetPk: is required")
    assert "log4j" not in proc.stderr and "src-secret-pw" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("command", [["sync", "-g", "g1"], ["run"], ["etl", "-g", "g1", "--all"], ["bootstrap"]])
def test_partitions_0_is_a_usage_error(command, deployment):
    one_message(cli(*command, "--config", str(deployment), "--partitions", "0"), exitcodes.CONFIG,
                "Invalid value for '--partitions'")


def test_once_and_follow_together(deployment):
    one_message(cli("capture", "--config", str(deployment), "--once", "--follow"), exitcodes.CONFIG,
                "sluice: error: give either --once or --follow, not both")


def test_a_store_written_by_a_newer_sluice(deployment):
    root = deployment.parent / "store" / "s"
    BatchStore(root)
    (root / "store.json").write_text(json.dumps({"format": 2}))
    for args in (["store", "status"], ["sync", "-g", "g1"], ["run"], ["status", "--no-source"]):
        one_message(cli(*args, "--config", str(deployment)), exitcodes.CONFIG,
                    f"sluice: error: {root / 'store.json'}: this store was written by a newer Sluice (store format 2",
                    "upgrade")


def test_a_batch_written_by_a_newer_sluice(deployment):
    root = deployment.parent / "store" / "s"
    store = BatchStore(root)
    with store.capture_lock():
        meta = store.append([{"database": "d", "table": "t", "type": "INSERT", "data": [{"id": "1"}]}],
                            start={"logfile": "b.1", "logpos": 4}, end={"logfile": "b.1", "logpos": 9})
    path = Path(meta.path).with_name("000000000001.meta.json")
    path.write_text(json.dumps({**json.loads(path.read_text()), "format": 7}))
    one_message(cli("store", "status", "--config", str(deployment)), exitcodes.CONFIG,
                f"sluice: error: {path}: this batch was written by a newer Sluice (format 7", "upgrade")


def _can_drop_privileges() -> bool:
    if os.geteuid() != 0:
        return True
    if shutil.which("setpriv") is None:
        return False
    return subprocess.run([*NOBODY, "true"], capture_output=True).returncode == 0


@pytest.fixture
def read_only_deployment():
    """A deployment whose store exists but this (unprivileged) user cannot write."""
    if not _can_drop_privileges():
        missing("running as root without setpriv: a read-only folder cannot be made")
    root = Path(tempfile.mkdtemp(prefix="sluice-ro-"))
    try:
        root.chmod(0o755)
        cfg = _deployment(root)
        store = BatchStore(root / "store" / "s")
        with store.capture_lock():
            store.append([{"database": "d", "table": "t", "type": "INSERT", "data": [{"id": "1"}]}],
                         start={"logfile": "b.1", "logpos": 4}, end={"logfile": "b.1", "logpos": 9})
        for p in [root, *root.rglob("*")]:
            mode = p.stat().st_mode
            p.chmod((mode | stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH) & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
                    | (0o555 if p.is_dir() else 0))
        yield cfg, store.root
    finally:
        for p in [root, *root.rglob("*")]:
            p.chmod(p.stat().st_mode | stat.S_IWUSR)
        shutil.rmtree(root)


@pytest.mark.parametrize("command", [["run", "--no-capture"], ["run"], ["sync", "-g", "g1"], ["capture", "--once"],
                                     ["store", "set-cursor", "-g", "g1", "--to", "0"],
                                     ["deadletter", "replay", "-g", "g1"]])
def test_a_read_only_store_is_one_message_naming_the_path(read_only_deployment, command):
    cfg, root = read_only_deployment
    proc = cli(*command, "--config", str(cfg), as_nobody=os.geteuid() == 0)
    line = one_message(proc, exitcodes.CONFIG, "cannot write the batch store (Permission denied)",
                       "check the owner and permissions", "mounted read-write")
    assert line == f"sluice: error: {root}: cannot write the batch store (Permission denied)"
    assert "runs.lock" not in proc.stderr and "log4j" not in proc.stderr


def test_a_report_that_cannot_be_written(deployment, tmp_path):
    BatchStore(deployment.parent / "store" / "s")
    (tmp_path / "afile").write_text("")
    one_message(cli("report", "--config", str(deployment), "--out", str(tmp_path / "afile" / "r.html")),
                exitcodes.FAILED, f"sluice: error: {tmp_path / 'afile'}:", "fix: check that the path is right")
