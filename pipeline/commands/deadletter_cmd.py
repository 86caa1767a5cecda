"""``sluice deadletter list|replay``: rows a target rejected for their own data (docs/deadletter.md)."""

from __future__ import annotations

import json

import typer

from pipeline.commands.app import app
from pipeline.config import load_config

dl_app = typer.Typer(help="Rows dead-lettered by mappings with deadLetter: true: list and replay them.",
                     no_args_is_help=True)
app.add_typer(dl_app, name="deadletter")


def _line(e: dict) -> str:
    return (f"{e['mapping']}  {e['table']}  {e['kind']} {{{e['key']}}}  batch {e['batchId']} seq {e['seq']} "
            f"row {e['row']}: {e['error']}")


@dl_app.command("list")
def list_cmd(
    config: str = typer.Option(..., "--config", "-c", help="The deployment config file."),
    group: str = typer.Option(..., "--group", "-g", help="The consumer group."),
    mapping: str = typer.Option(None, "--mapping", help="Only this mapping file."),
    as_json: bool = typer.Option(False, "--json", help="Print the entries as JSON."),
) -> None:
    """Show the group's dead-lettered rows, in source order, with their newest error."""
    from pipeline.ops.deadletter import list_entries

    entries = list_entries(load_config(config), group, mapping)
    if as_json:
        typer.echo(json.dumps([{k: v for k, v in e.items() if k != "ids"} for e in entries], ensure_ascii=False))
        return
    for e in entries:
        typer.echo(_line(e))
    typer.echo(f"{len(entries)} dead-lettered rows in group {group}")


@dl_app.command("replay")
def replay_cmd(
    config: str = typer.Option(..., "--config", "-c", help="The deployment config file."),
    group: str = typer.Option(..., "--group", "-g", help="The consumer group."),
    mapping: str = typer.Option(None, "--mapping", help="Only the rows of this mapping file."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Apply the dead-lettered rows again, in order; exit 1 if any still fail."""
    from pipeline.ops.deadletter import replay

    res = replay(load_config(config), group, mapping)
    if as_json:
        typer.echo(json.dumps({"applied": res.applied, "failed": len(res.failed), "left": res.left,
                               "errors": [_line(e) for e in res.failed]}, ensure_ascii=False))
    else:
        for e in res.failed:
            typer.echo(f"still failing: {_line(e)}")
        typer.echo(f"replay {group}: applied {res.applied}, still failing {len(res.failed)}, "
                   f"left in the dead-letter store {res.left}")
    if res.failed:
        raise typer.Exit(1)
