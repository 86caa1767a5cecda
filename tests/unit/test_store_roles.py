"""The change log's roles (pipeline/store/changelog.py, issue #41 step 1): each role is small, every
kind has every member of every role, and each caller types against the role it uses. No services."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path
from typing import Protocol

import pytest

from pipeline.store.canal.store import CanalTopicStore
from pipeline.store.changelog import AdminLog, CaptureLog, ChangeLog, GroupLog, LogBase, StoreCapabilities
from pipeline.store.files.store import BatchStore
from pipeline.store.kafka.store import KafkaStore

REPO = Path(__file__).resolve().parents[2]
ROLES = (CaptureLog, GroupLog, AdminLog)
KINDS = (BatchStore, KafkaStore, CanalTopicStore)
#: the role each caller holds a change log as (its annotations name it; none names ChangeLog)
CALLERS = {"pipeline/capture/runner.py": "CaptureLog", "pipeline/capture/batcher.py": "CaptureLog",
           "pipeline/capture/writer.py": "CaptureLog", "pipeline/capture/fresh.py": "CaptureLog",
           "pipeline/job/driver.py": "GroupLog", "pipeline/ops/follow.py": "GroupLog",
           "pipeline/ops/deadletter.py": "GroupLog", "pipeline/ops/status.py": "AdminLog"}


def members(role: type) -> set[str]:
    """A role's own members and those of the roles it extends (methods, properties, attributes)."""
    out: set[str] = set()
    for cls in role.__mro__:
        if cls in (Protocol, object) or not getattr(cls, "_is_protocol", False):
            continue
        out |= {n for n in vars(cls) if not n.startswith("_")}
        out |= set(vars(cls).get("__annotations__", {}))
    return out


def _set_attributes(kind: type) -> set[str]:
    """The attributes a kind's methods set (``self.x = ...``; ``__init__`` and what it calls), up its
    class chain."""
    out: set[str] = set()
    for cls in kind.__mro__:
        if cls is object:
            continue
        tree = ast.parse(inspect.getsource(cls))
        out |= {t.attr for node in ast.walk(tree) if isinstance(node, ast.Assign | ast.AnnAssign)
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"}
    return out


def test_each_role_is_small_and_changelog_is_just_the_roles():
    for role in ROLES:
        assert len(members(role) - members(LogBase)) <= 13, (role.__name__, sorted(members(role)))
    assert members(ChangeLog) == set().union(*map(members, ROLES))
    assert not {n for n in vars(ChangeLog) if not n.startswith("_")}, "ChangeLog adds nothing of its own"


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_every_kind_has_every_member_of_every_role(kind):
    have = {n for n in dir(kind) if not n.startswith("_")} | _set_attributes(kind)
    missing = members(ChangeLog) - have
    assert not missing, f"{kind.__name__} lacks {sorted(missing)}"
    assert isinstance(kind.__dict__.get("capabilities"), StoreCapabilities), kind.__name__
    for name in members(ChangeLog):
        if callable(getattr(ChangeLog, name, None)) and not isinstance(getattr(ChangeLog, name), property):
            assert callable(getattr(kind, name)), (kind.__name__, name)


def test_the_capture_role_is_what_capture_calls():
    """Every ``store.x`` / ``self.store.x`` capture reaches is in CaptureLog (or the base)."""
    used: set[str] = set()
    for path in (REPO / "pipeline/capture").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and _is_store(node.value):
                used.add(node.attr)
    assert {"append_lines", "capture_lock", "last_position"} <= used, sorted(used)  # the scan sees capture's calls
    assert used - members(CaptureLog) == set(), sorted(used - members(CaptureLog))


def _is_store(node: ast.expr) -> bool:
    """``store`` or ``self.store``."""
    return (isinstance(node, ast.Name) and node.id == "store") or (
        isinstance(node, ast.Attribute) and node.attr == "store" and isinstance(node.value, ast.Name)
        and node.value.id == "self")


@pytest.mark.parametrize("path,role", sorted(CALLERS.items()))
def test_each_caller_types_against_its_role(path, role):
    text = (REPO / path).read_text()
    assert re.search(rf"\b{role}\b", text), f"{path} does not name {role}"
    assert not re.search(r"\b(ChangeLog|BatchStore|KafkaStore)\b", text), f"{path} names a whole store"
