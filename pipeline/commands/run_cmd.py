"""``sluice run``: one scheduled run (capture --once, then sync every group), recorded."""

from __future__ import annotations

import json
import sys

import typer

from pipeline.commands.app import app
from pipeline.config import load_config
from sluice_common import stopping
from sluice_common.errors import UsageError
from sluice_common.exitcodes import NOTHING as EXIT_NOTHING


@app.command("run")
def run(
    config: str = typer.Option(..., "--config", "-c", help="The deployment config file."),
    group: list[str] = typer.Option(None, "--group", "-g", help="Only these groups (repeatable; default: all)."),
    no_capture: bool = typer.Option(False, "--no-capture", help="Skip capture (e.g. a `capture --follow` "
                                    "daemon feeds the store); only sync."),
    max_batches: int = typer.Option(50, "--max-batches", min=1, help="Batches per Spark round."),
    partitions: int | None = typer.Option(None, "--partitions", min=1, help="Partitions (default: spark.partitions)."),
    master: str = typer.Option(None, "--master", help="Spark master (default: spark.master; ignored "
                               "under spark-submit)."),
    nothing_exit: int = typer.Option(4, "--nothing-exit-code", min=0, max=255,
                                     help="Exit code when there was nothing to do (default 4; 0 for "
                                     "schedulers that fail on any non-zero code)."),
    as_json: bool = typer.Option(False, "--json", help="Print the run record as JSON."),
    follow: bool = typer.Option(False, "--follow", help="Run round after round in one warm Spark session "
                                "until SIGTERM/SIGINT (exit 130); failed groups are retried with back-off."),
    interval: float = typer.Option(1.0, "--interval", min=0.0, help="--follow: seconds from the start of one "
                                   "round to the start of the next (a round that leaves batches pending "
                                   "goes on at once)."),
    rounds: int | None = typer.Option(None, "--rounds", min=1, help="--follow: stop after this many rounds "
                                      "(tests, benchmarks)."),
) -> None:
    """Capture up to the source's current end, then sync every group, and record the run. With
    --follow: again and again in one warm Spark session (docs/operations.md, sluice run --follow)."""
    from pipeline.ops.run import run_once

    cfg = load_config(config)
    stopping.interrupt_on_sigterm()  # a clean stop: unacked batches are applied again next run
    if follow:
        _follow(cfg, group, no_capture, max_batches, partitions, master, nothing_exit, as_json, interval, rounds)
        return
    if rounds is not None:
        raise UsageError("--rounds needs --follow")

    def spark_factory(pending_rows: int):
        from pipeline.job.session import get_spark, store_jars

        small = 0 < pending_rows <= cfg.spark.smallRows
        return get_spark(cfg.spark, f"sluice-run-{cfg.source.name}", master, store_jars(cfg), small=small)

    result = run_once(cfg, groups=group or None, spark_factory=spark_factory, capture=not no_capture,
                      max_batches=max_batches, partitions=partitions, nothing_exit=nothing_exit)
    rec = result.record
    if as_json:
        typer.echo(json.dumps(rec, default=str))
    else:
        typer.echo(_text(rec))
    sys.exit(result.exit_code)  # SystemExit: the CLI returns its code (typer.Exit is swallowed)


def _follow(cfg, group, no_capture: bool, max_batches: int, partitions: int | None, master: str | None,
            nothing_exit: int, as_json: bool, interval: float, rounds: int | None) -> None:
    from pipeline.job.session import store_jars
    from pipeline.ops.follow import run_follow

    jars = store_jars(cfg)  # the Kafka store's connector: a missing one is a ConfigError now, not every round

    def spark_factory(_pending_rows: int):
        from pipeline.job.session import get_spark

        return get_spark(cfg.spark, f"sluice-follow-{cfg.source.name}", master, jars)  # long-lived: full JIT

    result = run_follow(cfg, groups=group or None, spark_factory=spark_factory, interval=interval,
                        max_rounds=rounds, capture=not no_capture, max_batches=max_batches, partitions=partitions)
    rec = result.record
    if as_json:
        typer.echo(json.dumps(rec, default=str))
    elif rec:
        typer.echo(_text(rec))
    code = result.exit_code
    sys.exit(nothing_exit if code == EXIT_NOTHING else code)


def _text(rec: dict) -> str:
    from pipeline.ops.summary import lag_text, sync_lines

    lines = [f"run {rec['run']}: {rec['status']} (exit {rec['exit']}) in {rec['seconds']} s"]
    cap = rec.get("capture")
    if cap:
        lines.append(f"  capture: {cap['rows']} rows in {cap['batches']} batches, {cap['rows_per_s']} rows/s "
                     f"({cap['stopped']})")
    for g, s in (rec.get("sync") or {}).items():
        lines += ["  " + x for x in sync_lines(g, s)]
    lag = (rec.get("lag") or {}).get("capture") or {}
    if lag:
        lines.append(f"  lag: {lag_text(lag)}; "
                     + ", ".join(f"{g} {gs['pending_batches']} batches pending ({gs['lag_s']} s)"
                                 for g, gs in ((rec.get("lag") or {}).get("groups") or {}).items()))
    for e in rec.get("errors") or ():
        where = e["stage"] + (f" {e['group']}" if e.get("group") else "")
        lines.append(f"  error ({where}): {e['message']}")
    return "\n".join(lines)
