"""``sluice report``: an HTML page with throughput and lag over recent runs."""

from __future__ import annotations

from pathlib import Path

import typer

from pipeline.commands.app import app
from pipeline.config import load_config


@app.command("report")
def report(
    config: str = typer.Option(..., "--config", "-c", help="The deployment config file."),
    out: str = typer.Option("sluice-report.html", "--out", "-o", help="The HTML file to write."),
    runs: int = typer.Option(50, "--runs", min=1, help="How many recent runs to show."),
) -> None:
    """Render the recent runs (rows/s, lag, rows, errors) as one self-contained HTML page."""
    from pipeline.ops.metrics import write_atomic
    from pipeline.ops.report import render
    from pipeline.state.runlog import RunLog
    from pipeline.store import open_store

    cfg = load_config(config)
    store = open_store(cfg, create=False)
    recs = RunLog(store.root, cfg.metrics.keepRuns).runs(limit=runs)
    page = render(recs, source=cfg.source.name, store=str(store.root))
    path = Path(out)
    write_atomic(path, page.encode())
    typer.echo(f"wrote {path} ({len(recs)} runs)")
