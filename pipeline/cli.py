"""The ``sluice`` command line (typer): the entry point that loads the commands and runs them. The
commands register on the app of :mod:`pipeline.commands.app` (one module per stage).

Every command ends in one message and an exit code from the table in docs/operations.md
(``sluice_common.exitcodes``): a :class:`~sluice_common.errors.SluiceError` prints ``sluice: error: ...``
(and its fix), a usage error prints the usage line and what is wrong (exit 2), and anything
unexpected prints one line naming the exception (exit 1; the traceback only at
``--log-level DEBUG``). Never a traceback otherwise, never a password.

Only typer's public API is used (typer 0.26 vendors click instead of depending on it, so the
CLI must not import click itself).
"""

from __future__ import annotations

import logging
import sys
import traceback

import typer
import typer.main

from sluice_common.errors import SluiceError
from sluice_common.exitcodes import FAILED, INTERRUPTED, OK
from sluice_common.logs import mask


def _register() -> None:
    """Load the sub-command modules (lazily, at the first command): each adds its commands to the
    app of :mod:`pipeline.commands.app`; cli imports commands, never the other way."""
    from pipeline import commands  # noqa: F401  (importing the package registers the commands)


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point: run one command, return its exit code; never raises."""
    try:
        _register()
        return _run(argv)
    except SluiceError as e:
        if _interrupted(e):  # e.g. the Spark job failed because Ctrl-C ended its JVM: nothing acked
            _say("sluice: interrupted")
            return INTERRUPTED
        _say(f"sluice: error: {e}")
        return e.exit_code
    except KeyboardInterrupt:
        _say("sluice: interrupted")
        return INTERRUPTED
    except Exception as e:  # noqa: BLE001 - an interrupt's consequence is the interrupt, else see below
        if not _interrupted(e):
            return _failed(e)
        _say("sluice: interrupted")
        return INTERRUPTED


def _interrupted(e: BaseException) -> bool:
    """An error raised because of an interrupt: one that a KeyboardInterrupt caused (a SIGTERM in the
    middle of ``import pyspark.sql`` left the module half made, and the cleanup's import of it
    failed: CI saw ``unexpected ImportError`` and exit 1 for ``sluice run`` stopped while its JVM
    started), or any error after a stop was asked for (:mod:`sluice_common.stopping`)."""
    from sluice_common import stopping

    return _by_interrupt(e) or stopping.requested()


def _failed(e: Exception) -> int:
    """The exit of an error that was not caused by an interrupt."""
    if isinstance(e, OSError) and e.filename:
        _say(f"sluice: error: {e.filename}: {e.strerror or type(e).__name__}\n  fix: check that the path is right "
             "and that this user may read and write it")  # e.g. `report --out` into a folder we cannot write
        return FAILED
    return _unexpected(e)  # the last line of defence: one message, not a traceback


def _run(argv: list[str] | None) -> int:
    from pipeline.commands import helptext
    from pipeline.commands.app import app

    command = typer.main.get_command(app)
    helptext.apply(command)  # --help: examples, exit codes, readable placeholders
    try:
        command.main(args=argv, prog_name="sluice", standalone_mode=True)
    except SystemExit as e:  # typer (standalone) exits with the code: usage errors 2, --help 0, ...
        if _by_interrupt(e):  # typer turns Ctrl-C into a silent exit 130
            _say("sluice: interrupted")
        return _code(e.code)
    return OK


def _by_interrupt(e: BaseException) -> bool:
    """Did a KeyboardInterrupt (Ctrl-C, or SIGTERM in the commands that map it) end the command?"""
    seen: set[int] = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, KeyboardInterrupt):
            return True
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return False


def _code(code: object) -> int:
    if code is None:
        return OK
    if isinstance(code, int):
        return code
    _say(f"sluice: error: {code}")  # sys.exit("text")
    return FAILED


def _say(text: str) -> None:
    try:
        typer.echo(mask(text), err=True)
    except Exception:  # noqa: BLE001 - stderr closed (a pipe that went away): the exit code still tells
        pass


def _unexpected(e: BaseException) -> int:
    """An error no module turned into a SluiceError: a bug or an environment we did not expect."""
    first = (str(e).strip().splitlines() or [""])[0][:500]
    _say(f"sluice: error: unexpected {type(e).__name__}" + (f": {first}" if first else "")
         + "\n  fix: this is a bug or an unexpected environment; rerun with --log-level DEBUG for the "
         "traceback and report it")
    if logging.getLogger().isEnabledFor(logging.DEBUG):
        _say("".join(traceback.format_exception(e)))
    return FAILED


if __name__ == "__main__":  # `python -m pipeline.cli`: use the importable module's app
    from pipeline.cli import main as _main

    sys.exit(_main())
