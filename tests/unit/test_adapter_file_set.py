"""Conformance: every adapter has the same file set, and factory.py the same signatures
(adapters/README.md). No services needed."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest

ADAPTERS = Path(__file__).resolve().parents[2] / "adapters"
FILE_SET = ("__init__.py", "factory.py", "config.py", "client.py", "plan.py", "writer.py", "chunk.py",
            "errors.py", "values.py", "verify.py")
#: the es adapter with another client (adapters/README.md)
CLIENT_VARIANTS = {"opensearch": ("__init__.py", "factory.py", "config.py", "client.py", "errors.py")}
FACTORY = {"target_from_adapter": ["adapter", "file", "key", "cfg"],
           "make_writer": ["target", "mappings"],
           "make_verifier": ["target", "mappings"],
           "key_rules": ["target", "target_id", "mappings"]}


def _packages() -> list[str]:
    return sorted(p.name for p in ADAPTERS.iterdir() if (p / "__init__.py").is_file())


def test_the_adapters_are_known():
    from adapters.registry import CONFIG_MODULES, KINDS

    assert set(_packages()) == set(KINDS.values()) | set(CONFIG_MODULES.values())


@pytest.mark.parametrize("package", _packages())
def test_each_adapter_has_the_file_set(package):
    want = CLIENT_VARIANTS.get(package, FILE_SET)
    missing = [f for f in want if not (ADAPTERS / package / f).is_file()]
    assert not missing, f"adapters/{package} lacks {', '.join(missing)} (adapters/README.md)"


@pytest.mark.parametrize("package", _packages())
def test_each_factory_has_the_one_signature(package):
    factory = importlib.import_module(f"adapters.{package}.factory")
    for name, params in FACTORY.items():
        assert list(inspect.signature(getattr(factory, name)).parameters) == params, f"{package}.factory.{name}"
    assert inspect.signature(factory.target_from_adapter).parameters["cfg"].default is None


@pytest.mark.parametrize("package", _packages())
def test_the_package_exports_the_factory(package):
    pkg = importlib.import_module(f"adapters.{package}")
    factory = importlib.import_module(f"adapters.{package}.factory")
    for name in FACTORY:
        assert getattr(pkg, name) is getattr(factory, name)
    assert callable(pkg.reset_caches)


def test_no_module_imports_another_packages_private_names():
    import re

    root = ADAPTERS.parent
    pattern = re.compile(r"^\s*from\s+(adapters|pipeline)(\.\w+)*\s+import\s+(.*)$")
    bad = []
    for path in [*ADAPTERS.rglob("*.py"), *(root / "pipeline" / "ops").rglob("verify*.py")]:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            m = pattern.match(line)
            if m and any(name.strip().split(" as ")[0].startswith("_") for name in m.group(3).split(",")):
                bad.append(f"{path.relative_to(root)}:{n}: {line.strip()}")
    assert not bad, "\n".join(bad)
