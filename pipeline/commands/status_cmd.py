"""``sluice status``: capture position and lag, per-group backlog, the last run and its errors."""

from __future__ import annotations

import json

import typer

from pipeline.commands.app import app
from pipeline.config import load_config


@app.command("status")
def status(
    config: str = typer.Option(..., "--config", "-c", help="The deployment config file."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON (for machines)."),
    no_source: bool = typer.Option(False, "--no-source", help="Do not connect to the source (no bytes/seconds "
                                   "behind its binlog end)."),
) -> None:
    """Per source the capture position and lag; per group pending batches, rows and lag; the last run."""
    from pipeline.ops.status import deployment_status
    from pipeline.ops.summary import freshness_text, group_run_text

    cfg = load_config(config)
    st = deployment_status(cfg, with_source=not no_source)
    if as_json:
        typer.echo(json.dumps(st, indent=2, default=str))
        return
    s, c = st["source"], st["source"]["capture"]
    typer.echo(f"source {s['name']} ({s['server']})   store {s['store']}")
    typer.echo(f"  batches   {s['batches']} (first {s['first_batch']}, last {s['last_batch']}), {s['rows']} rows, "
               f"{s['bytes']} bytes")
    pos = c.get("position") or {}
    end = c.get("source_end") or {}
    typer.echo(f"  position  {pos.get('logfile')}:{pos.get('logpos')}   source end "
               f"{end.get('logfile', '?')}:{end.get('logpos', '?')}")
    if c.get("error"):
        typer.echo(f"  lag       unknown: the source is unreachable: {c['error']}")
    elif no_source:
        typer.echo("  lag       not measured (--no-source)")
    else:
        typer.echo(f"  lag       {_v(c.get('lag_s'), ' s')} behind the source, {_v(c.get('behind_bytes'), ' bytes')} "
                   "unread")
    if c.get("last_event_at"):
        typer.echo(f"  newest    event {c['last_event_at']} ({_v(c.get('last_event_age_s'), ' s')} ago)")
    for g, gs in st["groups"].items():
        note = "" if gs["configured"] else "  (not in the config)"
        typer.echo(f"group {g}{note}: cursor {gs['cursor']}, pending {gs['pending_batches']} batches / "
                   f"{gs['pending_rows']} rows, lag {gs['lag_s']} s")
        typer.echo(f"  fresh     {freshness_text(gs)}")
        lr = gs.get("last_run")
        if lr:
            typer.echo(f"  last run  {group_run_text(lr)}")
            for e in lr["errors"]:
                typer.echo(f"  error     {e['message']}")
            for n in lr.get("notes") or ():
                typer.echo(f"  note      {n}")
    lr = st["last_run"]
    if lr:
        typer.echo(f"last run {lr['run']}: {lr['status']} (exit {lr['exit']}), finished {lr['finished']}, "
                   f"{lr['seconds']} s; last success {st['last_success_at'] or 'never'}")
        for e in lr["errors"]:
            typer.echo(f"  error ({e['stage']}{' ' + e['group'] if e.get('group') else ''}): {e['message']}")
    else:
        typer.echo("no run recorded yet (sluice run)")
    for name, holder in st["locks"].items():
        typer.echo(f"lock {name}: pid {holder.get('pid')} on {holder.get('host')} since {holder.get('since')}")


def _v(x, unit: str) -> str:
    return "?" if x is None else f"{x}{unit}"
