"""Every third-party package that ``pipeline/``, ``adapters/`` and ``sluice_common/`` import is declared in
pyproject.toml, so a fresh ``pip install`` has it even when no other dependency brings it
(typer 0.26 stopped bringing click, and ``sluice`` crashed on its first usage error)."""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OURS = {"pipeline", "adapters", "sluice_common", "sluice_binlog"}  # sluice_binlog: native/, built by scripts/bootstrap


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _imported_top_levels() -> dict[str, str]:
    """``{top-level module: first file importing it}`` for absolute imports in our packages."""
    found: dict[str, str] = {}
    for pkg in sorted(OURS):
        for f in sorted((REPO / pkg).rglob("*.py")):
            for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"), str(f))):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                for n in names:
                    found.setdefault(n.split(".")[0], str(f.relative_to(REPO)))
    return found


def _declared() -> set[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return {_norm(re.split(r"[\s\[<>=!~;]", d, maxsplit=1)[0]) for d in project["dependencies"]}


def test_every_imported_package_is_declared():
    dists = md.packages_distributions()
    declared = _declared()
    missing = []
    for module, where in sorted(_imported_top_levels().items()):
        if module in OURS or module in sys.stdlib_module_names:
            continue
        names = {_norm(d) for d in dists.get(module, [])}
        assert names, f"{where} imports {module}, which no installed distribution provides"
        if not names & declared:
            missing.append(f"{module} ({', '.join(sorted(names))}, imported by {where})")
    assert not missing, "imported but not declared in pyproject.toml dependencies: " + "; ".join(missing)


def test_the_cli_does_not_import_click():
    """typer >= 0.26 vendors click: importing click (undeclared) is what crashed usage errors."""
    assert "click" not in _imported_top_levels()
