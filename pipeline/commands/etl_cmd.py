"""``sluice etl``: a full load of one group's mapping(s) through Spark (upsert)."""

from __future__ import annotations

import json
from contextlib import ExitStack
from pathlib import Path

import typer

from pipeline.commands.app import app
from pipeline.config import load_config


def split_params(text: str | None) -> tuple[str, ...]:
    """canal's ``params`` form: values separated by ``;``."""
    return tuple(p for p in (text or "").split(";")) if text else ()


def _print(out: dict, as_json: bool, what: str) -> None:
    if as_json:
        typer.echo(json.dumps(out))
        return
    typer.echo(f"{what} {out['group']}: {out['rows']} rows in {out['seconds']} s ({out['rows_per_s']} rows/s)")
    for table, t in out["tables"].items():
        typer.echo(f"  {table:40} {t['rows']:>10} rows read  {t['written']:>10} written  ({t['ranges']} ranges)")


@app.command("etl")
def etl(
    config: str = typer.Option(..., "--config", "-c", help="The deployment config file."),
    group: str = typer.Option(..., "--group", "-g", help="The group whose outerAdapters the mapping writes to."),
    mapping: list[str] = typer.Option(None, "--mapping", "-m", help="A mapping file of the group (path or file "
                                      "name); repeatable."),
    all_: bool = typer.Option(False, "--all", help="Load every mapping of the group."),
    params: str = typer.Option(None, "--params", help="Values for the etlCondition's {} placeholders, "
                               "separated by ';' (canal's form), e.g. '2024-01-01;5'."),
    partitions: int | None = typer.Option(None, "--partitions", min=1, help="Key ranges per table = parallel "
                                          "readers (default: spark.partitions)."),
    master: str = typer.Option(None, "--master", help="Spark master (default: spark.master, local[*])."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Full load: read the source table(s) in parallel key ranges and upsert them into the targets."""
    from pipeline.etl.driver import run_etl
    from pipeline.job.group import load_group
    from pipeline.job.session import get_spark
    from pipeline.store import open_store
    from sluice_common.errors import UsageError
    from sluice_common.logs import register_secret

    cfg = load_config(config)
    cfg.group(group)
    if bool(mapping) == all_:
        raise UsageError("give --mapping <file> (repeatable) or --all, not both or neither")
    plan = load_group(cfg, group)
    register_secret(cfg.source.password.reveal())
    midxs = None if all_ else [_find(plan, m, config, group) for m in mapping]
    store_dir = cfg.store_dir()
    with ExitStack() as held:
        if store_dir.exists():  # a deployment with a store: no sync of this group may run meanwhile
            held.enter_context(open_store(cfg, create=False).apply_lock(group))
        plan.check()  # source and targets answer, mappings fit: before Spark starts
        spark = get_spark(cfg.spark, f"sluice-etl-{group}", master)
        summary = run_etl(cfg, plan, spark, midxs=midxs, params=split_params(params), partitions=partitions,
                          check=False)
    _print(summary.as_dict(), as_json, "etl")


def _find(plan, wanted: str, config: str, group: str) -> int:
    from sluice_common.errors import ConfigError

    target = Path(wanted)
    for i, m in enumerate(plan.mappings):
        f = Path(m.file)
        if f == target or f.name == target.name and (len(target.parts) == 1 or f.resolve() == target.resolve()):
            return i
    known = ", ".join(Path(m.file).name for m in plan.mappings)
    raise ConfigError(config, f"groups[{group}].mappings",
                      f"no mapping file {wanted!r} in group {group} (files: {known})")
