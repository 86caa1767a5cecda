"""``sluice bootstrap``: snapshot position + full load of every group + capture start position."""

from __future__ import annotations

import json

import typer

from pipeline.commands.app import app
from pipeline.config import load_config


@app.command("bootstrap")
def bootstrap(
    config: str = typer.Option(..., "--config", "-c", help="The deployment config file."),
    force: bool = typer.Option(False, "--force", help="Bootstrap a store that already has a position "
                               "(capture restarts from the new snapshot; every group's cursor skips the "
                               "stored batches)."),
    params: str = typer.Option(None, "--params", help="Values for etlCondition {} placeholders ('a;b')."),
    partitions: int | None = typer.Option(None, "--partitions", min=1, help="Key ranges per table (default: "
                                          "spark.partitions)."),
    master: str = typer.Option(None, "--master", help="Spark master (default: spark.master, local[*])."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Load every group's mappings from a consistent snapshot and start capture exactly there."""
    from pipeline.commands.etl_cmd import split_params
    from pipeline.etl.bootstrap import run_bootstrap
    from pipeline.job.session import get_spark

    cfg = load_config(config)
    out = run_bootstrap(cfg, lambda: get_spark(cfg.spark, "sluice-bootstrap", master), force=force,
                        partitions=partitions, params=split_params(params))
    if as_json:
        typer.echo(json.dumps(out))
        return
    typer.echo(f"bootstrap: capture starts at {out['position']['logfile']}:{out['position']['logpos']} "
               f"(gtid {out['position'].get('gtid')}) in {out['seconds']} s")
    for g in out["groups"]:
        typer.echo(f"  group {g['group']}: {g['rows']} rows, cursor -> {out['cursors'][g['group']]['to']}")
        for table, t in g["tables"].items():
            typer.echo(f"    {table:40} {t['rows']:>10} rows read  {t['written']:>10} written")
