"""``sluice repair``: make a diverged target equal to its source again, chunk by chunk, online."""

from __future__ import annotations

import json
import sys

import typer

from pipeline.commands.app import app
from pipeline.config import load_config
from sluice_common import exitcodes


@app.command("repair")
def repair(
    config: str = typer.Option(..., "--config", "-c", help="The deployment config file."),
    group: str = typer.Option(..., "--group", "-g", help="The group whose targets are repaired."),
    mapping: list[str] = typer.Option(None, "--mapping", "-m", help="Only this mapping file of the group (path "
                                      "or file name); repeatable. Default: every mapping of the group."),
    table: list[str] = typer.Option(None, "--table", "-t", help="Only this source table, as db.table; "
                                    "repeatable."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Compare only: print what would be written and "
                                 "deleted, change nothing."),
    chunk_size: int = typer.Option(1000, "--chunk-size", min=1, help="Source rows per compared chunk."),
    partitions: int | None = typer.Option(None, "--partitions", min=1, help="Key ranges per table = parallel "
                                          "tasks (default: spark.partitions)."),
    master: str = typer.Option(None, "--master", help="Spark master (default: spark.master, local[*])."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Compare source and target by chunked checksums and rewrite every chunk that differs (upsert what
    differs, delete what the source lacks), while capture and sync keep running; exit 0 done (or, with
    --dry-run, nothing differs), 5 --dry-run found differences, 1 a range failed."""
    from pipeline.commands.etl_cmd import _find
    from pipeline.job.group import load_group
    from pipeline.job.session import get_spark
    from pipeline.repair.driver import RepairFailed, run_repair
    from sluice_common.logs import register_secret

    cfg = load_config(config)
    cfg.group(group)
    plan = load_group(cfg, group)
    register_secret(cfg.source.password.reveal())
    midxs = [_find(plan, m, config, group) for m in mapping] if mapping else None
    plan.check()  # source and targets answer, mappings fit their tables: before Spark starts
    spark = get_spark(cfg.spark, f"sluice-repair-{group}", master)
    try:
        summary = run_repair(cfg, plan, spark, midxs=midxs, tables=list(table or []) or None,
                             partitions=partitions, chunk=chunk_size, dry_run=dry_run)
    except RepairFailed as e:
        done = getattr(e, "summary", None)
        if done is not None:
            _report(done.as_dict(), as_json)
        raise
    out = summary.as_dict()
    _report(out, as_json)
    differing = sum(t["missing"] + t["changed"] + t["extra"] for t in out["tables"].values())
    sys.exit(exitcodes.DIFFERENT if dry_run and differing else exitcodes.OK)


def _report(out: dict, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(out, default=str))
    else:
        for line in summary_lines(out):
            typer.echo(line)


def summary_lines(out: dict) -> list[str]:
    """The human summary: one line per table, then the totals."""
    lines = []
    for name, t in out["tables"].items():
        lines.append(f"{name} -> {t['target']}: {t['chunks']} chunks compared, {t['differing']} differed, "
                     f"{t['repaired']} repaired; {t['missing']} missing, {t['changed']} changed, {t['extra']} extra"
                     + ("" if out["dry_run"] else f"; {t['upserted']} rows upserted, {t['deleted']} deleted")
                     + (f"; waited {t['lock_wait']:.1f} s for the lock, held it {t['lock_held']:.1f} s"
                        if t["lock_held"] else ""))
        if t["keys"]:
            lines.append(f"     keys: {', '.join(json.dumps(k, default=str) for k in t['keys'])}")
    tables = out["tables"].values()
    total = sum(t["missing"] + t["changed"] + t["extra"] for t in tables)
    if out["dry_run"]:  # nothing written: what a repair would write (missing and changed rows) and delete (extra)
        done = (f"would write {sum(t['missing'] + t['changed'] for t in tables)} rows and delete "
                f"{sum(t['extra'] for t in tables)}")
    else:
        done = f"wrote {sum(t['upserted'] for t in tables)} rows and deleted {sum(t['deleted'] for t in tables)}"
    lines.append(f"repair {out['group']}{' (dry run)' if out['dry_run'] else ''}: {len(out['tables'])} tables, "
                 f"{total} differing rows, {done} in {out['seconds']} s")
    for w in out["waived"]:
        lines.append(f"capture waiver added for {w}: statement-format DML on it up to the repair's start is skipped")
    return lines
