"""``sluice sync`` (apply pending batches with Spark) and ``sluice package`` (files for spark-submit)."""

from __future__ import annotations

import json
import shlex
import shutil
import zipfile
from pathlib import Path

import typer

from pipeline import __version__
from pipeline.commands.app import app
from pipeline.config import load_config
from pipeline.ops.summary import sync_lines
from pipeline.store import open_store
from sluice_common.logs import get_logger

log = get_logger("sync")
ENTRY = '''"""spark-submit entry of Sluice: the same arguments as `sluice sync`, or `run ...` / `sync ...`."""
import sys

from pipeline.cli import main

args = sys.argv[1:]
sys.exit(main(args if args[:1] in (["run"], ["sync"]) else ["sync", *args]))
'''


@app.command("sync")
def sync(
    config: str = typer.Option(..., "--config", "-c", help="The deployment config file."),
    group: str = typer.Option(..., "--group", "-g", help="The consumer group (groupId) to apply."),
    max_batches: int = typer.Option(50, "--max-batches", min=1, help="Batches per Spark round."),
    partitions: int | None = typer.Option(None, "--partitions", min=1, help="Partitions (default: spark.partitions)."),
    master: str = typer.Option(None, "--master", help="Spark master (default: spark.master, local[*])."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Apply the group's pending batches through Spark; ack only when every partition committed."""
    from pipeline.job.driver import run_sync
    from pipeline.job.group import load_group
    from pipeline.job.session import get_spark, store_jars
    from sluice_common import stopping

    stopping.interrupt_on_sigterm()  # exit 130, the JVM ended: nothing acked is lost either way
    cfg = load_config(config)
    plan = load_group(cfg, group)  # an unknown group, a broken mapping file: before anything else
    store = open_store(cfg, create=False)
    store.check_writable()
    with store.apply_lock(group):  # a group another job applies: refused before Spark starts
        plan.check(store)  # source and targets answer, mappings fit their tables
        pending = store.pending(group)
        rows = sum(b.rows for b in pending)
        small = rows <= cfg.spark.smallRows  # a short run: the JVM gets C1-only JIT (pipeline/job/jvm.py)
        # Spark starts in this thread, after the checks: started in a thread (as `sluice run` does),
        # Ctrl-C during the job ended the sync with exit 1 "Answer from Java side is empty" instead
        # of 130 (test_operator_rows), so the JVM's start does not overlap the checks here.
        spark = get_spark(cfg.spark, f"sluice-sync-{group}", master, store_jars(cfg), small=small) if pending else None
        summary = run_sync(cfg, group, spark, max_batches=max_batches, partitions=partitions, plan=plan,
                           locked=True)
    out = summary.as_dict()
    if as_json:
        typer.echo(json.dumps(out))
    else:
        typer.echo("\n".join(sync_lines(group, out)))


@app.command("package")
def package(out: str = typer.Option("dist", "--out", help="Output folder.")) -> None:
    """Build the --py-files zip and the entry script for spark-submit, and print the command."""
    root = Path(__file__).resolve().parents[2]
    dest = Path(out)
    dest.mkdir(parents=True, exist_ok=True)
    zpath = dest / f"sluice-{__version__}.zip"
    with zipfile.ZipFile(zpath, "w", zipfile.ZIP_DEFLATED) as z:
        for pkg in ("pipeline", "adapters", "sluice_common"):
            for f in sorted((root / pkg).rglob("*.py")):
                z.write(f, f.relative_to(root).as_posix())
    entry = dest / "sluice_submit.py"
    entry.write_text(ENTRY)
    shutil.copymode(__file__, entry)
    jars = _connector_jars(dest / "jars")
    q = shlex.quote  # a folder with spaces: the printed command still runs as printed
    typer.echo(f"wrote {zpath} and {entry}; run:\n"
               f"  spark-submit --master spark://HOST:7077 --py-files {q(str(zpath))} "
               + (f"--jars {q(','.join(jars))} " if jars else "")
               + f"{q(str(entry))} --config sluice.yml --group g1")


def _connector_jars(dest: Path) -> list[str]:
    """Spark's Kafka connector (for ``store.kind: kafka``), copied for ``spark-submit --jars`` when
    scripts/bootstrap cached it; none otherwise (then ``--packages`` brings it)."""
    from pipeline.store.kafka.sparkjars import connector_dir

    found = sorted(connector_dir().glob("*.jar"))
    if not found:
        return []
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for jar in found:
        shutil.copy2(jar, dest / jar.name)
        out.append(str(dest / jar.name))
    return out
