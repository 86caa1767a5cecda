"""``sluice store ...``: inspect the batch store."""

from __future__ import annotations

import json

import typer

from pipeline.commands.app import app
from pipeline.config import load_config
from sluice_common import exitcodes

store_app = typer.Typer(help="Inspect the batch store (batches, group cursors, lag).", no_args_is_help=True)
app.add_typer(store_app, name="store")


@store_app.command("status")
def status(
    config: str = typer.Option(..., "--config", "-c", help="The deployment config file."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Show batches, per-group cursors and pending batches/rows."""
    from pipeline.store import open_store

    cfg = load_config(config)
    st = open_store(cfg, create=False).status()
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


@store_app.command("set-cursor")
def set_cursor(
    config: str = typer.Option(..., "--config", "-c", help="The deployment config file."),
    group: str = typer.Option(..., "--group", "-g", help="The consumer group."),
    to: int = typer.Option(..., "--to", min=0, help="The last batch to treat as applied (0: replay all)."),
) -> None:
    """Move a group's cursor (to 0: apply every stored batch again; replays are idempotent)."""
    from pipeline.store import open_store

    cfg = load_config(config)
    cfg.group(group)  # a group the config does not have: a config error, not a new cursor file
    store = open_store(cfg, create=False)
    store.check_writable()
    with store.apply_lock(group):
        before = store.cursor(group)
        skipped = [b for b in store.batches(since=before) if b.batch_id <= to] if to > before else []
        old = store.set_cursor(group, to)
    typer.echo(f"group {group}: cursor {old} -> {to}")
    if skipped:  # forward: batches counted as applied that were never applied
        rows = sum(b.rows for b in skipped)
        typer.echo(f"sluice: warning: batches {skipped[0].batch_id}..{skipped[-1].batch_id} ({rows} rows) of group "
                   f"{group} now count as applied, but were not: its targets lack their changes", err=True)
        typer.echo(f"  fix: to apply them after all: sluice store set-cursor --config {config} --group {group} "
                   f"--to {old}", err=True)


@store_app.command("set-filter")
def set_filter(config: str = typer.Option(..., "--config", "-c", help="The deployment config file.")) -> None:
    """Record the config's source.filter as the store's, when it leaves out tables the store's captures
    took so far and no deployment needs them any more (capture refuses such a filter until then)."""
    from pipeline.capture import filterlog
    from pipeline.store import open_store

    cfg = load_config(config)
    store = open_store(cfg, create=False)
    store.check_writable()
    with store.capture_lock():
        was = filterlog.recorded(store.root)
        filterlog.record(store.root, cfg)
    was_text = f" (was {filterlog.as_filter(was).text()})" if was else ""
    typer.echo(f"store {store.root}: capture filter {cfg.source.filter.text()}{was_text}")


@store_app.command("verify")
def verify(config: str = typer.Option(..., "--config", "-c", help="The deployment config file.")) -> None:
    """Check every stored batch file against its recorded size and checksum; exit 5 if one is corrupt."""
    from pipeline.store import open_store
    from sluice_common.errors import CorruptBatchError

    cfg = load_config(config)
    store = open_store(cfg, create=False)
    batches = store.batch_ids()
    bad = []
    for b in batches:
        try:
            store.verify(b)  # the meta file, then size, checksum and every JSON line
        except CorruptBatchError as e:
            bad.append(e)
    for e in bad:
        typer.echo(f"sluice: error: {e.message}", err=True)
    if bad and bad[0].hint:
        typer.echo(f"  fix: {bad[0].hint}", err=True)
    typer.echo(f"{len(batches)} batches verified" + (f", {len(bad)} corrupt" if bad else ""))
    if bad:
        raise typer.Exit(exitcodes.DIFFERENT)


@store_app.command("recapture")
def recapture(
    config: str = typer.Option(..., "--config", "-c", help="The deployment config file."),
    start: int = typer.Option(..., "--from", min=1, help="The first batch to drop and capture again."),
) -> None:
    """Drop batch N and every later one so the next `sluice capture` reads them again from the binlog
    (the recovery for a corrupt or truncated batch file). Refused while a group has acked batch N."""
    from pipeline.store import open_store

    cfg = load_config(config)
    store = open_store(cfg, create=False)
    store.check_writable()
    last = (store.batch_ids() or [0])[-1]
    with store.capture_lock():
        pos = store.drop_from(start)
    typer.echo(f"dropped batches {start}..{last}; the next capture resumes at {json.dumps(pos, sort_keys=True)}")


@store_app.command("restart")
def restart(
    config: str = typer.Option(..., "--config", "-c", help="The deployment config file."),
    start: str = typer.Option(..., "--from", help="Where capture starts again: FILE:POS (a transaction's start), "
                              "'FILE:POS gtid=SET', or now."),
) -> None:
    """Start the store again elsewhere (a wrong --from): record the new start and move every group past
    the stored batches. Only while nothing of the store reached a target (else: sluice bootstrap --force)."""
    from pipeline.ops.restart import restart as run_restart

    cfg = load_config(config)
    out = run_restart(cfg, start)
    was = json.dumps(out["old"], sort_keys=True) if out["old"] else "none"
    moved = ", ".join(f"{g} {a} -> {b}" for g, (a, b) in sorted(out["cursors"].items()) if a != b)
    typer.echo(f"capture starts at {json.dumps(out['start'], sort_keys=True)} (was {was})"
               + (f"; cursors past the stored batches: {moved}" if moved else "")
               + f"; next: sluice capture --config {config} --once")
