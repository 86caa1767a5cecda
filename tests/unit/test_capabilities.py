"""Adapters and change logs say what they do beyond their contract in one record (issue #41 step 2),
and the pipeline asks that record: no ``hasattr`` on a writer or a store, no adapter names compared
except at the sites listed below, which may only shrink. No services needed."""

from __future__ import annotations

import ast
import dataclasses
import importlib
from pathlib import Path

import pytest

from adapters.base import Capabilities
from adapters.registry import CONFIG_MODULES, KINDS, capabilities
from pipeline.store.changelog import StoreCapabilities

REPO = Path(__file__).resolve().parents[2]
#: what ``hasattr`` may still look at in pipeline/: none of them is a writer or a store
HASATTR_OK = {"spark", "cmd", "module"}
ADAPTER_NAMES = {*KINDS, *KINDS.values()}
#: ``kind == "<adapter>"`` still decided by name, per function, with why (belongs behind a factory entry point)
KIND_DEBTS: dict[tuple[str, str], str] = {}


@pytest.mark.parametrize("package", sorted(set(KINDS.values()) | set(CONFIG_MODULES.values())))
def test_every_factory_declares_its_capabilities(package):
    factory = importlib.import_module(f"adapters.{package}.factory")
    caps = getattr(factory, "CAPABILITIES", None)
    assert isinstance(caps, Capabilities), f"adapters/{package}/factory.py declares no CAPABILITIES"
    with pytest.raises(dataclasses.FrozenInstanceError):
        caps.lineage = not caps.lineage  # type: ignore[misc]


@pytest.mark.parametrize("name", sorted(KINDS))
def test_the_registry_hands_out_each_kinds_capabilities(name):
    kind = KINDS[name]
    assert capabilities(kind) is importlib.import_module(f"adapters.{kind}.factory").CAPABILITIES
    if name in CONFIG_MODULES:  # a client variant is its kind's adapter, and says the same
        assert importlib.import_module(f"adapters.{CONFIG_MODULES[name]}.factory").CAPABILITIES == capabilities(kind)


@pytest.mark.parametrize("kind", sorted(set(KINDS.values())))
def test_each_declared_capability_is_there_to_use(kind):
    """A capability names writer members; the factory's writer has exactly those (what hasattr found)."""
    from adapters.rdb.config import RdbTarget
    from adapters.registry import make_writer

    target = RdbTarget(dialect="sqlite", database=":memory:") if kind == "rdb" else None
    caps, w = capabilities(kind), make_writer(kind, target, ())  # unopened: nothing connects
    assert hasattr(w, "track") == caps.lineage, kind
    assert hasattr(w, "track_position") == caps.positions, kind
    assert hasattr(w, "recorded_positions") == hasattr(w, "record_position") == caps.positions, kind
    assert hasattr(w, "source_charsets") == caps.source_charsets, kind
    assert hasattr(w, "check_key_collations") == caps.key_collations, kind


def test_every_change_log_declares_its_capabilities():
    from pipeline.store.canal.store import CanalTopicStore
    from pipeline.store.files.store import BatchStore
    from pipeline.store.kafka.store import KafkaStore

    for cls in (BatchStore, KafkaStore, CanalTopicStore):
        assert isinstance(cls.__dict__.get("capabilities"), StoreCapabilities), cls.__name__
        assert cls.capabilities.checks_plan == callable(getattr(cls, "check_plan", None)), cls.__name__


def _functions(tree: ast.AST):
    """(function name, node) of every node, named by the innermost function around it."""
    def walk(node, name):
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else name
            yield inner, child
            yield from walk(child, inner)
    yield from walk(tree, "<module>")


def _sites():
    for path in sorted(REPO.glob("pipeline/**/*.py")):
        rel = str(path.relative_to(REPO))
        for func, node in _functions(ast.parse(path.read_text())):
            yield rel, func, node


def test_the_pipeline_asks_no_writer_or_store_with_hasattr():
    bad = [f"{rel}:{node.lineno}: {ast.unparse(node)}" for rel, _, node in _sites()
           if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "hasattr"
           and not (isinstance(node.args[0], ast.Name) and node.args[0].id in HASATTR_OK)]
    assert not bad, "ask the capabilities record (adapters.registry.capabilities, store.capabilities):\n" + \
        "\n".join(bad)


def _is_kind(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == "kind") or (isinstance(node, ast.Attribute)
                                                                 and node.attr == "kind")


def _names(node: ast.AST) -> set[str]:
    elts = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
    return {e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}


def test_the_pipeline_decides_by_capability_not_by_adapter_name():
    found = {}
    for rel, func, node in _sites():
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(_is_kind(o) for o in operands) and any(_names(o) & ADAPTER_NAMES for o in operands):
                found.setdefault((rel, func), f"{rel}:{node.lineno}: {ast.unparse(node)}")
    new = {k: v for k, v in found.items() if k not in KIND_DEBTS}
    assert not new, "declare it in adapters.base.Capabilities and ask that:\n" + "\n".join(new.values())
    gone = set(KIND_DEBTS) - set(found)
    assert not gone, f"gone: take off KIND_DEBTS {sorted(gone)}"
