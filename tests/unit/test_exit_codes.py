"""The exit-code table of docs/operations.md is the code's, and every command follows it: a usage
error, a config file that is not there and an unknown group are exit 2 everywhere, one message,
no traceback (through the real CLI, no services needed)."""

from __future__ import annotations

import re

import pytest
import yaml

from pipeline.job.segment import ApplyFailed
from sluice_common import exitcodes
from sluice_common.errors import (
    ConfigError,
    CorruptBatchError,
    LockHeldError,
    OutOfOrderAckError,
    RowError,
    SluiceError,
    SourceError,
    StoreError,
    TargetError,
    TargetMismatchError,
    TransientError,
    UsageError,
)
from tests.support.cli import cli, one_message
from tests.support.deploy import REPO

#: every command, with what it needs besides --config to get as far as reading the config
COMMANDS = {
    "capture": [],
    "sync": ["--group", "g1"],
    "run": [],
    "status": [],
    "verify": [],
    "report": [],
    "etl": ["--group", "g1", "--all"],
    "repair": ["--group", "g1"],
    "bootstrap": [],
    "deadletter list": ["--group", "g1"],
    "deadletter replay": ["--group", "g1"],
    "store status": [],
    "store set-cursor": ["--group", "g1", "--to", "0"],
    "store verify": [],
    "store recapture": ["--from", "1"],
}
#: commands with --group, and how they name an unknown group
GROUP_COMMANDS = ["sync", "run", "etl", "repair", "verify", "deadletter list", "deadletter replay", "store set-cursor"]


def _table() -> dict[int, str]:
    text = (REPO / "docs" / "operations.md").read_text(encoding="utf-8")
    section = text[text.index("### Exit codes"):text.index("### What needs the source")]
    return {int(m.group(1)): m.group(2) for m in re.finditer(r"^\| (\d+) \| ([^|]*) \|", section, re.M)}


def test_the_docs_table_is_the_code():
    table = _table()
    codes = {v for k, v in vars(exitcodes).items() if k.isupper()}
    assert set(table) == codes == {0, 1, 2, 3, 4, 5, 130}
    statuses = {code: status.strip().strip("`") for code, status in table.items()}
    assert statuses == {0: "ok", 1: "failed", 2: "invalid", 3: "locked", 4: "nothing", 5: "—", 130: "interrupted"}


@pytest.mark.parametrize(("cls", "code"), [
    (SluiceError, exitcodes.FAILED), (ConfigError, exitcodes.CONFIG), (UsageError, exitcodes.CONFIG),
    (StoreError, exitcodes.CONFIG), (CorruptBatchError, exitcodes.CONFIG), (LockHeldError, exitcodes.LOCKED),
    (OutOfOrderAckError, exitcodes.FAILED), (SourceError, exitcodes.FAILED), (TargetError, exitcodes.FAILED),
    (TargetMismatchError, exitcodes.CONFIG), (RowError, exitcodes.FAILED), (TransientError, exitcodes.FAILED),
    (ApplyFailed, exitcodes.FAILED)])
def test_each_error_class_has_its_row(cls, code):
    assert cls.exit_code == code


@pytest.fixture
def deployment(tmp_path):
    """A config whose servers are never reached by these tests."""
    (tmp_path / "mappings").mkdir()
    (tmp_path / "mappings" / "t.yml").write_text(yaml.safe_dump({"dbMapping": {
        "database": "d", "table": "t", "targetTable": "t", "targetPk": {"id": None}, "mapAll": True}}))
    cfg = tmp_path / "sluice.yml"
    cfg.write_text(yaml.safe_dump({
        "source": {"name": "s", "host": "127.0.0.1", "port": 1, "password": "src-secret-pw"},
        "store": {"path": str(tmp_path / "store")},
        "groups": [{"groupId": "g1", "outerAdapters": [{"name": "rdb", "properties": {
            "jdbc.url": "jdbc:mysql://127.0.0.1:1/d", "jdbc.username": "u", "jdbc.password": "tgt-secret-pw"}}],
            "mappings": ["mappings/*.yml"]}]}))
    return cfg


@pytest.mark.parametrize("command", [*COMMANDS, "package"])
def test_a_usage_error_is_exit_2(command):
    one_message(cli(*command.split(), "--bogus"), exitcodes.CONFIG, "No such option: --bogus",
                f"sluice {command}")


@pytest.mark.parametrize(("args", "option"), [(["run"], "'--config'"), (["sync", "--config", "x.yml"], "'--group'"),
                                            (["store", "set-cursor", "-c", "x.yml", "-g", "g1"], "'--to'")])
def test_a_missing_option_is_exit_2(args, option):
    one_message(cli(*args), exitcodes.CONFIG, f"Error: Missing option {option}")


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_config_file_that_is_not_there_is_exit_2(command, tmp_path):
    missing = tmp_path / "nope.yml"
    line = one_message(cli(*command.split(), "--config", str(missing), *COMMANDS[command]), exitcodes.CONFIG)
    assert line == f"sluice: error: {missing}: file not found"


@pytest.mark.parametrize("command", GROUP_COMMANDS)
def test_an_unknown_group_is_exit_2(command, deployment):
    args = [a if a != "g1" else "nope" for a in COMMANDS[command]] or ["--group", "nope"]
    line = one_message(cli(*command.split(), "--config", str(deployment), *args), exitcodes.CONFIG)
    assert line == f"sluice: error: {deployment}: groups: no group 'nope' (known: g1)"


def test_no_command_and_an_unknown_command_are_usage_errors():
    assert cli().returncode == exitcodes.CONFIG  # the help, as click does without a command
    one_message(cli("bogus"), exitcodes.CONFIG, "No such command 'bogus'")
    assert cli("--version").stdout.startswith("sluice ")
