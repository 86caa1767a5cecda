"""``sluice store ...``: inspect the batch store."""

from __future__ import annotations

import json

import typer

from pipeline.cli import app
from pipeline.config import load_config

store_app = typer.Typer(help="Inspect the batch store (batches, group cursors, lag).", no_args_is_help=True)
app.add_typer(store_app, name="store")


@store_app.command("status")
def status(
    config: str = typer.Option(..., "--config", "-c", help="The deployment config file."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Show batches, per-group cursors and pending batches/rows."""
    from pipeline.store import BatchStore

    cfg = load_config(config)
    st = BatchStore(cfg.store_dir(), create=False).status()
    if as_json:
        typer.echo(json.dumps(st, indent=2, default=str))
        return
    typer.echo(f"store      {st['root']}")
    typer.echo(f"batches    {st['batches']} (first {st['first_batch']}, last {st['last_batch']}), "
               f"{st['rows']} rows, {st['bytes']} bytes")
    typer.echo(f"position   {json.dumps(st['last_position'])}")
    for g, gs in sorted(st["groups"].items()):
        typer.echo(f"group {g:12} cursor {gs['cursor']:>8}  pending {gs['pending_batches']} batches, "
                   f"{gs['pending_rows']} rows")
    for name, holder in (st.get("locks") or {}).items():
        if holder:
            typer.echo(f"lock {name}: {holder}")
