"""A missing prerequisite (a tool, a built extension, a privilege): under ``CI=true`` it fails the
test, elsewhere it skips it with the reason, so a developer can run what they have while CI can
never pass by skipping (tests/conftest.py does the same for services)."""

from __future__ import annotations

import os

import pytest


def in_ci() -> bool:
    """``CI`` is set to a true value (``.ci/run`` exports ``CI=true``)."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def missing(reason: str, *, module: bool = False) -> None:
    """Fail (CI) or skip (elsewhere) the test, or with ``module`` the whole module, naming ``reason``."""
    if in_ci():
        pytest.fail(f"{reason} (a prerequisite: CI=true fails instead of skipping)", pytrace=False)
    pytest.skip(reason, allow_module_level=module)
