"""The native extension must be built from the checkout's ``native/`` sources (pipeline/native.py)."""

from __future__ import annotations

import shutil
from types import SimpleNamespace

import pytest

from pipeline.native import NATIVE, check_built_from, source_hash
from sluice_common.errors import ConfigError


def test_the_built_extension_is_the_checkouts():
    import sluice_binlog  # scripts/bootstrap builds it

    assert sluice_binlog.SOURCE_HASH == source_hash(NATIVE)
    check_built_from(sluice_binlog, NATIVE)


def test_an_extension_from_other_sources_is_refused_naming_the_fix(tmp_path):
    native = tmp_path / "native"
    shutil.copytree(NATIVE, native, ignore=shutil.ignore_patterns("target"))
    built = SimpleNamespace(SOURCE_HASH=source_hash(native), __file__="/x/sluice_binlog.so")
    check_built_from(built, native)  # the same sources
    (native / "src" / "lib.rs").write_text((native / "src" / "lib.rs").read_text() + "\n// changed\n")
    with pytest.raises(ConfigError) as e:
        check_built_from(built, native)
    assert "stale" in str(e.value) and "scripts/bootstrap" in e.value.hint
    with pytest.raises(ConfigError) as e:
        check_built_from(SimpleNamespace(), native)  # built before SOURCE_HASH existed
    assert "before source hashes were recorded" in str(e.value)


def test_without_sources_there_is_nothing_to_compare(tmp_path):
    check_built_from(SimpleNamespace(), tmp_path)  # an installed wheel: no native/ beside the package
