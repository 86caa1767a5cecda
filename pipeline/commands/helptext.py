"""What every command's ``--help`` ends with: examples, and the exit codes it can end with (the
table in docs/operations.md, ``sluice_common.exitcodes``); and readable placeholders (``FILE``, ``N``)
instead of the type names typer shows (``<str>``, ``<list[str]>``, ``<int range>``)."""

from __future__ import annotations

from typing import Any

from sluice_common import exitcodes

MEANING = {exitcodes.OK: "done", exitcodes.FAILED: "failed", exitcodes.CONFIG: "usage, config or mapping error",
           exitcodes.LOCKED: "another job holds a lock", exitcodes.NOTHING: "nothing to do",
           exitcodes.DIFFERENT: "differences found", exitcodes.INTERRUPTED: "interrupted"}
#: every command ends with these (docs/operations.md: "all")
ALL = (exitcodes.OK, exitcodes.FAILED, exitcodes.CONFIG, exitcodes.INTERRUPTED)
#: the commands that also end with 3, 4 or 5 (the table's "which commands" column)
MORE = {exitcodes.LOCKED: ("capture", "sync", "run", "etl", "bootstrap", "deadletter replay", "store set-cursor",
                           "store recapture"),
        exitcodes.NOTHING: ("run",), exitcodes.DIFFERENT: ("verify", "repair", "store verify")}

EXAMPLES = {
    "capture": ["sluice capture --config sluice.yml", "sluice capture --config sluice.yml --follow",
                "sluice capture --config sluice.yml --once --from mysql-bin.000003:4"],
    "sync": ["sluice sync --config sluice.yml --group g1", "sluice sync --config sluice.yml --group g1 --json"],
    "run": ["sluice run --config /etc/sluice/shop.yml", "sluice run --config shop.yml --group es-orders --json",
            "sluice run --config shop.yml --follow --interval 5"],
    "status": ["sluice status --config sluice.yml", "sluice status --config sluice.yml --json --no-source"],
    "verify": ["sluice verify --config sluice.yml", "sluice verify --config sluice.yml --mapping mappings/t.yml "
               "--recheck 30"],
    "report": ["sluice report --config sluice.yml --out /var/www/sluice.html --runs 100"],
    "etl": ["sluice etl --config sluice.yml --group g1 --mapping mappings/t.yml",
            "sluice etl --config sluice.yml --group g1 --all --params '2024-01-01;5'"],
    "bootstrap": ["sluice bootstrap --config sluice.yml"],
    "repair": ["sluice repair --config sluice.yml --group g1 --table shop.orders",
               "sluice repair --config sluice.yml --group g1 --mapping mappings/orders.yml --dry-run"],
    "package": ["sluice package --out dist"],
    "deadletter list": ["sluice deadletter list --config sluice.yml --group g1"],
    "deadletter replay": ["sluice deadletter replay --config sluice.yml --group g1 --mapping mappings/t.yml"],
    "store status": ["sluice store status --config sluice.yml"],
    "store set-cursor": ["sluice store set-cursor --config sluice.yml --group g1 --to 0"],
    "store verify": ["sluice store verify --config sluice.yml"],
    "store recapture": ["sluice store recapture --config sluice.yml --from 42"],
    "jvm build": ["sluice jvm build"],
    "jvm options": ['spark-submit --driver-java-options "$(sluice jvm options)" ...'],
}
#: placeholders by option (``(command, option)`` first, then the option alone)
METAVARS = {"--config": "FILE", "--group": "GROUP", "--mapping": "FILE", "--master": "URL", "--out": "PATH",
            ("package", "--out"): "DIR", "--spark-home": "DIR", "--params": "'A;B'", "--log-level": "LEVEL",
            "--interval": "SECONDS", "--recheck": "SECONDS", "--nothing-exit-code": "CODE", "--to": "BATCH",
            ("store recapture", "--from"): "BATCH", ("capture", "--from"): "FILE:POS|now"}


def codes(name: str) -> tuple[int, ...]:
    """The exit codes command ``name`` (e.g. ``store verify``) can end with."""
    return tuple(sorted({*ALL, *(c for c, names in MORE.items() if name in names)}))


def epilog(name: str) -> str:
    """Examples and exit codes, each line kept as it is (click's ``\\b`` marker)."""
    lines = ["\b", "Examples:", *(f"  {e}" for e in EXAMPLES.get(name, ())), ""] if name in EXAMPLES else []
    return "\n".join([*lines, "\b", "Exit codes (docs/operations.md):",
                      *(f"  {c:<4} {MEANING[c]}" for c in codes(name))])


def apply(group: Any, prefix: str = "") -> None:
    """Give every command of the (click) ``group`` its epilog and placeholders."""
    if not prefix:  # `sluice --help`: the first commands to try, and every code
        group.epilog = "\n".join(["\b", "Examples:", "  sluice run --config sluice.yml", "  sluice status --config "
                                  "sluice.yml", "  sluice verify --config sluice.yml", "", "\b",
                                  "Exit codes (docs/operations.md):", *(f"  {c:<4} {m}" for c, m in MEANING.items())])
        _placeholders(group, "")
    for name, cmd in getattr(group, "commands", {}).items():
        full = f"{prefix}{name}"
        if hasattr(cmd, "commands"):
            apply(cmd, f"{full} ")
            continue
        cmd.epilog = epilog(full)
        _placeholders(cmd, full)


def _placeholders(cmd: Any, full: str) -> None:
    for p in cmd.params:
        if getattr(p, "is_flag", False) or not getattr(p, "opts", None):
            continue
        long = max(p.opts, key=len)
        found = METAVARS.get((full, long)) or METAVARS.get(long)
        counted = isinstance(p.default, int) or long.endswith(("partitions", "batches", "rounds", "runs", "size",
                                                              "sample", "keys"))
        p.metavar = found or ("N" if counted else long.lstrip("-").upper().replace("-", "_"))
