"""The change log's kinds are one family of siblings with one file set (pipeline/store/README.md),
as the adapters are (tests/unit/test_adapter_file_set.py). No services."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from types import SimpleNamespace

import pytest

from pipeline.store import changelog
from pipeline.store.changelog import StoreCapabilities

STORE = Path(__file__).resolve().parents[2] / "pipeline" / "store"
#: kind -> its store class
FAMILY = {"files": "BatchStore", "kafka": "KafkaStore", "canal": "CanalTopicStore"}
FILE_SET = ("__init__.py", "store.py", "status.py")


def _store_class(kind: str) -> type:
    return getattr(importlib.import_module(f"pipeline.store.{kind}.store"), FAMILY[kind])


def test_every_subpackage_of_the_store_is_a_listed_kind():
    found = {p.parent.name for p in STORE.glob("*/__init__.py")}
    assert found == set(FAMILY) == set(changelog.KINDS)


@pytest.mark.parametrize("kind", sorted(FAMILY))
def test_each_kind_has_the_file_set(kind):
    missing = [f for f in FILE_SET if not (STORE / kind / f).is_file()]
    assert not missing, f"pipeline/store/{kind}/ lacks {missing}"
    package = importlib.import_module(f"pipeline.store.{kind}")
    cls = _store_class(kind)
    assert cls.__module__ == f"pipeline.store.{kind}.store"
    assert isinstance(cls.__dict__.get("capabilities"), StoreCapabilities), cls.__name__
    params = inspect.signature(package.open_log).parameters
    assert list(params) == ["cfg", "create"] and params["create"].kind is inspect.Parameter.KEYWORD_ONLY
    assert FAMILY[kind] in inspect.getsource(package.open_log), f"{kind}.open_log does not open {FAMILY[kind]}"
    assert list(inspect.signature(importlib.import_module(f"pipeline.store.{kind}.status").status).parameters) \
        == ["store"]


@pytest.mark.parametrize("kind", sorted(FAMILY))
def test_kinds_are_siblings_not_subclasses_of_each_other(kind):
    for other in set(FAMILY) - {kind}:
        assert not issubclass(_store_class(kind), _store_class(other)), (kind, other)


@pytest.mark.parametrize("kind,written_by,expected", [("files", None, "files"), ("kafka", "sluice", "kafka"),
                                                      ("kafka", "canal", "canal")])
def test_open_store_picks_the_kind_the_config_names(kind, written_by, expected):
    cfg = SimpleNamespace(store=SimpleNamespace(kind=kind, kafka=SimpleNamespace(writtenBy=written_by)))
    assert changelog.kind_of(cfg) == expected
