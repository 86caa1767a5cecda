"""Imports run one way (issue #41), checked on every module's imports (function-level ones too).

* The store (``pipeline/store``) imports neither its producer nor its consumer: no capture, job,
  ETL, operations, repair or command module, no adapter. Capture, store and job share the batch
  record's schema from ``pipeline/store/records.py`` and the native extension from
  ``pipeline/native.py``.
* ``sluice_common`` (errors, exit codes, logs, secrets, the MySQL type vocabulary, the Dml value rules and connection
  arguments) is below both: it imports neither ``pipeline`` nor ``adapters``.
* Adapters import nothing of ``pipeline``: what they share with it is ``sluice_common``'s.
* ``pipeline`` reaches adapters through their contract (``adapters.base``, ``adapters.registry``).
* No two packages import each other.

What still goes against the direction is listed below, edge by edge, with why: the list may only
shrink (an edge that is gone must be taken off it, a new one fails).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOPS = ("pipeline", "adapters", "sluice_common")
CONTRACT = {"adapters", "adapters.base", "adapters.registry"}
STORE_MAY_NOT = ("pipeline.capture", "pipeline.job", "pipeline.etl", "pipeline.ops", "pipeline.repair",
                 "pipeline.commands", "adapters")

#: adapter -> pipeline module (none left: the join re-query's connection arguments moved to
#: sluice_common/mysqlconn.py, and hbase/plan.py reads the parsed mapping by its attributes, as es does)
ADAPTER_DEBTS: dict[tuple[str, str], str] = {}
#: pipeline module -> adapter module beyond the contract (none left: verify and repair reach their
#: targets through ``make_verifier``, positions through the writer's ``positions`` capability, the
#: key-collation check through its ``key_collations`` capability; issue #41 step 2)
CONTRACT_DEBTS: set[tuple[str, str]] = set()
#: packages that import each other (none left: the commands register on pipeline/commands/app.py's app,
#: which cli runs; capture asks the targets' positions through job/positions.py, and what the job
#: needed of capture, Position and the account name, is pipeline/source's)
CYCLE_DEBTS: dict[frozenset[str], str] = {}


def _module(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, set[str]]:
    """module -> the modules (of pipeline, adapters and sluice_common) it imports."""
    out: dict[str, set[str]] = defaultdict(set)
    for path in sorted(p for top in TOPS for p in REPO.glob(f"{top}/**/*.py")):
        mod = _module(path)
        package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, *([node.module] if node.module else [])])
                # ``from pipeline import capture``: the names that are modules count as imported
                names = [base, *(f"{base}.{a.name}" for a in node.names if _is_module(f"{base}.{a.name}"))]
            else:
                continue
            out[mod].update(n for n in names if n.split(".")[0] in TOPS and n != mod)
    return out


def _is_module(name: str) -> bool:
    path = REPO.joinpath(*name.split("."))
    return path.is_dir() or path.with_suffix(".py").is_file()


def _package(mod: str) -> str:
    """A node of the package graph: ``pipeline.<sub>`` / ``adapters.<sub>`` for subpackages, a
    top-level module (``pipeline.cli``) for itself."""
    parts = mod.split(".")
    if len(parts) >= 2 and (REPO / parts[0] / parts[1]).is_dir():
        return ".".join(parts[:2])
    return ".".join(parts[:2]) if len(parts) >= 2 else mod


def _within(mod: str, prefix: str) -> bool:
    return mod == prefix or mod.startswith(prefix + ".")


def test_the_store_imports_neither_its_producer_nor_its_consumer():
    bad = sorted((m, t) for m, ts in _imports().items() if _within(m, "pipeline.store")
                 for t in ts if any(_within(t, p) for p in STORE_MAY_NOT))
    assert not bad, bad


def test_the_shared_package_imports_neither_pipeline_nor_adapters():
    imports = _imports()
    assert any(_within(m, "sluice_common") for m in imports), "sluice_common's modules were not read"
    bad = sorted((m, t) for m, ts in imports.items() if _within(m, "sluice_common")
                 for t in ts if not _within(t, "sluice_common"))
    assert not bad, bad


def test_adapters_do_not_import_pipeline():
    found = {(m, t) for m, ts in _imports().items() if _within(m, "adapters")
             for t in ts if _within(t, "pipeline")}
    assert found - set(ADAPTER_DEBTS) == set(), sorted(found - set(ADAPTER_DEBTS))
    assert set(ADAPTER_DEBTS) - found == set(), f"gone: take off ADAPTER_DEBTS {sorted(set(ADAPTER_DEBTS) - found)}"


def test_pipeline_reaches_adapters_through_their_contract():
    found = {(m, t) for m, ts in _imports().items() if _within(m, "pipeline")
             for t in ts if _within(t, "adapters") and t not in CONTRACT}
    assert found - CONTRACT_DEBTS == set(), sorted(found - CONTRACT_DEBTS)
    assert CONTRACT_DEBTS - found == set(), f"gone: take off CONTRACT_DEBTS {sorted(CONTRACT_DEBTS - found)}"


def test_no_two_packages_import_each_other():
    edges = {(_package(m), _package(t)) for m, ts in _imports().items() for t in ts}
    edges = {(a, b) for a, b in edges if a != b}
    cycles = {frozenset((a, b)) for a, b in edges if (b, a) in edges}
    assert cycles - set(CYCLE_DEBTS) == set(), sorted(tuple(sorted(c)) for c in cycles - set(CYCLE_DEBTS))
    assert set(CYCLE_DEBTS) - cycles == set(), f"gone: take off CYCLE_DEBTS {set(CYCLE_DEBTS) - cycles}"
