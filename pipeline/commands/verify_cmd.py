"""``sluice verify``: compare source tables with their targets (RDB: chunked checksums)."""

from __future__ import annotations

import json
import shlex
import sys

import typer

from pipeline.commands.app import app
from pipeline.config import load_config
from sluice_common import exitcodes


@app.command("verify")
def verify(
    config: str = typer.Option(..., "--config", "-c", help="The deployment config file."),
    mapping: list[str] = typer.Option(None, "--mapping", "-m", help="Only this mapping file (repeatable; "
                                      "default: every mapping of the chosen groups)."),
    group: list[str] = typer.Option(None, "--group", "-g", help="Only these groups (repeatable)."),
    chunk_size: int = typer.Option(1000, "--chunk-size", min=1, help="RDB: rows per checksum chunk."),
    sample: int = typer.Option(200, "--sample", min=0, help="ES/HBase: documents/rows compared."),
    recheck: float = typer.Option(0.0, "--recheck", min=0, help="Compare a differing table again after this "
                                  "many seconds (tells replication delay from real differences)."),
    max_keys: int = typer.Option(20, "--max-keys", min=0, help="Differing keys listed per table."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Compare each mapping's source and target; exit 0 all equal, 5 differences, 1 a table could not
    be compared, 2 a mapping does not fit its tables."""
    from pipeline.ops.verify import exit_code
    from pipeline.ops.verify import verify as run_verify

    cfg = load_config(config)
    results = run_verify(cfg, groups=group or None, files=mapping or None, chunk=chunk_size, sample=sample,
                         recheck=recheck)
    out = [{**r.as_dict(max_keys), "repair": _repair_command(config, r.repair_args())} for r in results]
    code = exit_code(results)
    differing = sum(r.differing for r in results)
    if as_json:
        typer.echo(json.dumps({"ok": code == 0, "exit": code, "differing_rows": differing,
                               "errors": sum(1 for r in results if r.error), "tables": out}, default=str))
    else:
        for r in out:
            _print(r)
        typer.echo(_verdict(out, differing, code))
    sys.exit(code)


def _print(r: dict) -> None:
    if r["error"]:
        typer.echo(f"ERROR {r['source']} -> {r['target']} ({r['mapping']}): could not compare: {r['error']}")
        return
    state = "OK  " if r["ok"] else "DIFF"
    extra = f", sampled {r['sampled']}" if r["sampled"] is not None else ""
    typer.echo(f"{state} {r['source']} -> {r['target']}: {r['source_rows']} / {r['target_rows']} rows, "
               f"{r['differing_rows']} differing ({r['missing']} missing, {r['extra']} extra, "
               f"{r['changed']} changed) in {r['differing_chunks']} of {r['chunks']} chunks{extra}; "
               f"{r['method']}; {r['seconds']} s")
    for what in ("missing", "extra", "changed"):
        if r["keys"][what]:
            more = r[what] - len(r["keys"][what])
            typer.echo(f"     {what}: {', '.join(json.dumps(k, default=str) for k in r['keys'][what])}"
                       + (f" ... (+{more})" if more > 0 else ""))
    if r["changed_columns"]:
        typer.echo(f"     changed columns: {', '.join(f'{c} ({n})' for c, n in r['changed_columns'].items())}")
    if r["note"]:
        typer.echo(f"     note: {r['note']}")
    if r["repair"]:
        typer.echo(f"     repair: {r['repair']}")


def _repair_command(config: str, args: list[str]) -> str | None:
    """``sluice repair --config C --group G --table db.t`` (``--mapping FILE`` for ES/HBase)."""
    if not args:
        return None
    return " ".join(shlex.quote(a) for a in ["sluice", "repair", "--config", config, *args])


def _verdict(out: list[dict], differing: int, code: int) -> str:
    errors = sum(1 for r in out if r["error"])
    equal = sum(1 for r in out if r["ok"])
    differ = len(out) - equal - errors
    verdict = {exitcodes.OK: "all equal", exitcodes.DIFFERENT: "DIFFERENCES"}.get(code, "ERRORS")
    return (f"{len(out)} tables: {equal} equal, {differ} differ ({differing} differing rows), "
            f"{errors} could not be compared: {verdict} (exit {code})")
