"""The native extension must be built from the checkout's ``native/`` sources (pipeline/native.py)."""

from __future__ import annotations

import shutil
from types import SimpleNamespace

import pytest

from pipeline import native as native_mod
from pipeline.native import NATIVE, check_built_from, source_hash
from sluice_common.errors import ConfigError
from tests.support.prereq import missing


def _built():
    try:
        import sluice_binlog
    except ImportError:
        missing("the native capture extension is not built (scripts/bootstrap)")
    return sluice_binlog


def _copy(tmp_path):
    native = tmp_path / "native"
    shutil.copytree(NATIVE, native, ignore=shutil.ignore_patterns("target"))
    return native


def test_the_built_extension_is_the_checkouts():
    built = _built()
    assert built.SOURCE_HASH == source_hash(NATIVE)
    check_built_from(built, NATIVE)


def test_an_extension_from_other_sources_is_refused_naming_the_fix(tmp_path):
    native = _copy(tmp_path)
    built = SimpleNamespace(SOURCE_HASH=source_hash(native), __file__="/x/sluice_binlog.so")
    check_built_from(built, native)  # the same sources
    (native / "src" / ".#lib.rs").symlink_to(tmp_path / "gone")  # an editor's lock link: not a source
    check_built_from(built, native)
    (native / "src" / "lib.rs").write_text((native / "src" / "lib.rs").read_text() + "\n// changed\n")
    with pytest.raises(ConfigError) as e:
        check_built_from(built, native)
    assert "stale" in str(e.value) and "scripts/bootstrap" in e.value.hint
    with pytest.raises(ConfigError) as e:
        check_built_from(SimpleNamespace(), native)  # built before SOURCE_HASH existed
    assert "before source hashes were recorded" in str(e.value)
    (native / "build.rs").unlink()
    with pytest.raises(ConfigError) as e:
        source_hash(native)
    assert "build.rs" in str(e.value) and "git checkout -- native" in e.value.hint


def test_a_process_checks_once_so_a_later_pull_does_not_stop_it(tmp_path, monkeypatch):
    """A follower keeps the extension and the Python code it started with: sources changed on disk
    afterwards (a ``git pull``) refuse the next process, not this one's next capture round."""
    built = _built()
    native = _copy(tmp_path)
    monkeypatch.setattr(native_mod, "NATIVE", native)
    monkeypatch.setattr(native_mod, "_checked", [])
    assert native_mod.load() is built
    (native / "src" / "lib.rs").write_text((native / "src" / "lib.rs").read_text() + "\n// pulled\n")
    assert native_mod.load() is built
    monkeypatch.setattr(native_mod, "_checked", [])  # a new process
    with pytest.raises(ConfigError):
        native_mod.load()


def test_without_sources_there_is_nothing_to_compare(tmp_path):
    check_built_from(SimpleNamespace(), tmp_path)  # an installed wheel: no native/ beside the package
