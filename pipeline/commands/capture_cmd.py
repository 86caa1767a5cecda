"""``sluice capture``: read the binlog into the batch store."""

from __future__ import annotations

import json
import signal

import typer

from pipeline.commands.app import app
from pipeline.config import load_config


def _sigterm(_signo, _frame) -> None:  # a clean stop: nothing unstored is lost, it is re-read next run
    raise KeyboardInterrupt


@app.command("capture")
def capture(
    config: str = typer.Option(..., "--config", "-c", help="The deployment config file."),
    once: bool = typer.Option(False, "--once", help="Read up to the source's current end position and exit "
                              "(default; for scheduled runs)."),
    follow: bool = typer.Option(False, "--follow", help="Keep reading new changes until stopped."),
    max_batches: int | None = typer.Option(None, "--max-batches", min=1, help="Stop after N batches."),
    start_from: str = typer.Option(None, "--from", help="Where a store without a position starts: FILE:POS (e.g. "
                                   "where the targets stand, as a refusal names it; on MySQL 'FILE:POS gtid=SET' "
                                   "with the GTID set there, which is else read from the binlog) or now (the "
                                   "source's current position, even when targets were applied to before)."),
) -> None:
    """Capture binlog changes into the batch store, resuming from its stored position."""
    from pipeline.capture import run_capture
    from sluice_common.errors import UsageError

    if once and follow:
        raise UsageError("give either --once or --follow, not both")
    cfg = load_config(config)
    signal.signal(signal.SIGTERM, _sigterm)
    summary = run_capture(cfg, follow=follow, max_batches=max_batches, start_from=start_from)
    typer.echo(json.dumps(summary.to_dict()))
    if summary.stopped == "interrupted":
        raise typer.Exit(130)
