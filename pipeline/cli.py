"""The ``sluice`` command line (typer). Each stage adds its commands here.

Every command turns a :class:`~pipeline.errors.SluiceError` into one message on stderr
and a non-zero exit code; no traceback, no password.
"""

from __future__ import annotations

import sys

import typer

from pipeline import __version__
from pipeline.errors import SluiceError
from pipeline.logs import configure, mask

app = typer.Typer(
    name="sluice",
    help="Batch change replication: MySQL/MariaDB binlog -> batches -> Spark -> RDB, Elasticsearch, HBase.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
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


def _register() -> None:
    """Attach the sub-command modules (imported lazily to keep --help fast)."""
    from pipeline import commands  # noqa: F401  (registers commands on `app`)


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point."""
    _register()
    try:
        rv = app(args=argv, standalone_mode=False)
        if isinstance(rv, int):  # click returns typer.Exit's code when not standalone
            return rv
    except SluiceError as e:
        typer.echo(f"sluice: error: {mask(str(e))}", err=True)
        return e.exit_code
    except typer.Exit as e:
        return e.exit_code
    except typer.Abort:
        typer.echo("sluice: aborted", err=True)
        return 130
    except SystemExit as e:
        return int(e.code or 0)
    except Exception as e:  # click usage errors arrive as ClickException
        import click

        if isinstance(e, click.ClickException):
            e.show()
            return e.exit_code
        raise
    return 0


if __name__ == "__main__":  # `python -m pipeline.cli`: use the importable module's app
    from pipeline.cli import main as _main

    sys.exit(_main())
