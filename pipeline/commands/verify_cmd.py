"""``sluice verify``: compare source tables with their targets (RDB: chunked checksums)."""

from __future__ import annotations

import json
import sys

import typer

from pipeline.cli import app
from pipeline.config import load_config


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
    """Compare each mapping's source and target; exit 0 when all equal, 1 when something differs."""
    from pipeline.ops.verify import verify as run_verify

    cfg = load_config(config)
    results = run_verify(cfg, groups=group or None, files=mapping or None, chunk=chunk_size, sample=sample,
                         recheck=recheck)
    out = [r.as_dict(max_keys) for r in results]
    differing = sum(r.differing for r in results)
    ok = all(r.ok for r in results)
    if as_json:
        typer.echo(json.dumps({"ok": ok, "differing_rows": differing, "tables": out}, default=str))
    else:
        for r in out:
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
            if r["error"]:
                typer.echo(f"     error: {r['error']}")
        typer.echo(f"{len(out)} tables, {differing} differing rows: {'all equal' if ok else 'DIFFERENCES'}")
    sys.exit(0 if ok else 1)
