"""The typer app every ``sluice`` command registers on, with its root options (``--version``,
``--log-level``, ``--log-json``).

The command modules (``*_cmd.py``) import this module and add their commands to :data:`app`;
:mod:`pipeline.cli` imports :mod:`pipeline.commands` to load them and runs the app. Imports run one
way: cli -> commands -> app, never back (tests/unit/test_import_direction.py).
"""

from __future__ import annotations

import typer

from pipeline import __version__
from sluice_common.logs import configure

app = typer.Typer(
    name="sluice",
    help="Batch change replication: MySQL/MariaDB binlog -> batches -> Spark -> RDB, Elasticsearch, HBase.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,  # plain usage errors: "Error: Missing option '--config'", one block, no box
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"sluice {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
    log_level: str = typer.Option("INFO", "--log-level", envvar="SLUICE_LOG_LEVEL",
                                  help="DEBUG, INFO, WARNING or ERROR."),
    log_json: bool = typer.Option(False, "--log-json", envvar="SLUICE_LOG_JSON",
                                  help="Log one JSON object per line."),
) -> None:
    configure(log_level, log_json)
