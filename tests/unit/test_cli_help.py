"""``--help`` of every command (issue 37): examples, the exit codes the command can end with -- the
same as the "which commands" column of docs/operations.md -- and readable placeholders, never
typer's ``<str>`` / ``<list[str]>`` / ``<int range>``."""

from __future__ import annotations

import re

import pytest

from pipeline.cli import main
from pipeline.commands.helptext import EXAMPLES
from tests.support.deploy import REPO

COMMANDS = sorted(EXAMPLES)


def _which() -> dict[int, set[str] | None]:
    """``{code: commands}`` from the table (None: all)."""
    text = (REPO / "docs" / "operations.md").read_text(encoding="utf-8")
    section = text[text.index("### Exit codes"):text.index("### What needs the source")]
    out: dict[int, set[str] | None] = {}
    for m in re.finditer(r"^\| (\d+) \|[^|]*\|[^|]*\| ([^|]*) \|", section, re.M):
        cell = m.group(2).strip()
        # `repair --dry-run`: the command is the words before its options
        out[int(m.group(1))] = None if cell == "all" else {n.split(" --")[0] for n in re.findall(r"`([^`]+)`", cell)}
    return out


@pytest.fixture(autouse=True)
def _own_logging():
    """``main`` configures logging to this test's captured stderr: put it back afterwards (later tests
    in this process would log to a closed stream)."""
    import logging

    import structlog

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    structlog.reset_defaults()
    root.handlers[:] = handlers
    root.setLevel(level)


def _help(capsys, *args: str) -> str:
    assert main([*args, "--help"]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("command", COMMANDS)
def test_help_has_examples_and_the_exit_codes_of_the_table(command, capsys):
    text = _help(capsys, *command.split())
    assert "Examples:" in text and "sluice" in text.split("Examples:", 1)[1]
    listed = {int(c) for c in re.findall(r"^\s+(\d+)\s+\S", text.split("Exit codes", 1)[1], re.M)}
    wanted = {code for code, names in _which().items() if names is None or command in names}
    assert listed == wanted, (command, listed, wanted)
    assert not re.search(r"<(str|int|float|list|bool)", text), text


def test_the_top_level_help_lists_every_code(capsys):
    text = _help(capsys)
    assert set(map(int, re.findall(r"^\s+(\d+)\s+\S", text.split("Exit codes", 1)[1], re.M))) == set(_which())
    assert "--log-level LEVEL" in text


def test_every_command_has_examples(capsys):
    """A command added later gets examples too (this list is the help's)."""
    text = _help(capsys)
    top = set(re.findall(r"^  (\w[\w-]*)\s{2,}", text.split("Commands:", 1)[1], re.M))
    groups = {c.split()[0] for c in COMMANDS if " " in c}
    assert top == {c for c in COMMANDS if " " not in c} | groups


def test_an_error_an_interrupt_caused_exits_as_interrupted(monkeypatch, capsys):
    """SIGTERM in the middle of ``import pyspark.sql`` left the module half made, and the cleanup's
    import of it raised ImportError: CI saw ``unexpected ImportError`` and exit 1 where the run was
    interrupted (130). An error whose cause chain holds the interrupt, or any error after a stop was
    asked for, exits 130; other errors stay unexpected (1)."""
    from pipeline import cli
    from sluice_common import stopping
    from sluice_common.exitcodes import FAILED, INTERRUPTED

    def import_after_interrupt(argv):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise ImportError("cannot import name 'SQLContext' from partially initialized module") from None

    def plain_bug(argv):
        raise ImportError("no module named nowhere")

    monkeypatch.setattr(cli, "_run", import_after_interrupt)
    assert cli.main([]) == INTERRUPTED and "interrupted" in capsys.readouterr().err
    monkeypatch.setattr(cli, "_run", plain_bug)
    assert cli.main([]) == FAILED and "unexpected ImportError" in capsys.readouterr().err
    stopping.request()
    try:
        assert cli.main([]) == INTERRUPTED
    finally:
        stopping.clear()


def test_a_job_that_failed_because_ctrl_c_ended_its_jvm_exits_as_interrupted(monkeypatch, capsys):
    """Ctrl-C reaches the whole process group: the JVM dies, and the driver's py4j call can fail
    ("Answer from Java side is empty", a SluiceError: the Spark job failed) before or instead of the
    KeyboardInterrupt (CI of 7bcb34e: `sluice sync` exit 1). SIGINT asks for the stop as SIGTERM does,
    so that error exits 130; without a stop asked for it stays an error."""
    import signal

    from pipeline import cli
    from sluice_common import stopping
    from sluice_common.errors import SluiceError
    from sluice_common.exitcodes import FAILED, INTERRUPTED

    def job_failed(argv):
        raise SluiceError("the Spark job failed, nothing was acked: Answer from Java side is empty")

    monkeypatch.setattr(cli, "_run", job_failed)
    assert cli.main([]) == FAILED and "Answer from Java side" in capsys.readouterr().err
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    try:
        stopping.interrupt_on_sigterm()
        with pytest.raises(KeyboardInterrupt):
            signal.getsignal(signal.SIGINT)(signal.SIGINT, None)  # what Ctrl-C runs
        assert stopping.requested()
        assert cli.main([]) == INTERRUPTED and "interrupted" in capsys.readouterr().err
        signal.signal(signal.SIGINT, lambda *a: None)  # a Spark session's own handler ...
        stopping.on_sigint()  # ... replaced by Sluice's again
        assert signal.getsignal(signal.SIGINT) is signal.getsignal(signal.SIGTERM)
    finally:
        stopping.clear()
        signal.signal(signal.SIGINT, before[0])
        signal.signal(signal.SIGTERM, before[1])
