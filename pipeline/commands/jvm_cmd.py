"""``sluice jvm build|options``: the Spark driver JVM's class-data-sharing archive and options."""

from __future__ import annotations

from pathlib import Path

import typer

from pipeline.commands.app import app
from sluice_common.errors import UsageError

jvm_app = typer.Typer(help="The Spark driver JVM: class-data-sharing archive and Java options (docs/job.md).",
                      no_args_is_help=True)
app.add_typer(jvm_app, name="jvm")


def _home(spark_home: str | None) -> Path:
    from pipeline.job.jvm import spark_home as default_home

    home = Path(spark_home) if spark_home else default_home()
    if not (home / "jars").is_dir():
        raise UsageError(f"{home} is not a Spark installation (it has no jars/ folder)")
    return home


@jvm_app.command("build")
def build(
    spark_home: str = typer.Option(None, "--spark-home", help="The Spark installation the driver runs from "
                                   "(default: SPARK_HOME, else pyspark's)."),
    force: bool = typer.Option(False, "--force", help="Build it again even if it exists."),
) -> None:
    """Build the class-data-sharing archive for this JVM and Spark (once; scripts/bootstrap does it)."""
    from pipeline.job.jvm import build_archive

    path = build_archive(_home(spark_home), force=force)
    if path is None:
        raise UsageError("no java found (JAVA_HOME or PATH): Spark needs Java 17")
    typer.echo(str(path))


@jvm_app.command("options")
def options(
    spark_home: str = typer.Option(None, "--spark-home", help="The Spark installation the driver runs from."),
    small: bool = typer.Option(False, "--small", help="Also C1-only JIT, for a run of at most spark.smallRows rows."),
) -> None:
    """Print the driver Java options, e.g. for spark-submit --driver-java-options "$(sluice jvm options)"."""
    from pipeline.job.jvm import driver_java_options, join_options

    typer.echo(join_options(driver_java_options(small, _home(spark_home))))
