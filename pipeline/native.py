"""The ``sluice_binlog`` extension (``native/``, Rust + PyO3), loaded on its own.

Three parts of Sluice use it and none goes through another: capture's decoder
(pipeline/capture/native.py), the Kafka store's native producer
(pipeline/store/kafka/txnative.py) and its record placement (pipeline/store/kafka/routing.py).
``SLUICE_CAPTURE_NATIVE=0`` turns it off for all three (capture then runs on the pure-Python
decoder, the Kafka store on confluent-kafka and Python's placement).

An extension built from other sources than the checkout's ``native/`` (a ``git pull`` without
``scripts/bootstrap``) would decode by older rules without a word: its ``SOURCE_HASH`` (native/build.rs)
must be the hash of the checkout's sources, or loading it is refused, naming the fix. Checked once per
process: a process that runs on (``--follow``) keeps the extension and the Python code it started
with, which match each other whatever a later ``git pull`` changes on disk.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from types import ModuleType

from sluice_common.errors import ConfigError

NATIVE = Path(__file__).resolve().parents[1] / "native"


def load() -> ModuleType | None:
    """The ``sluice_binlog`` extension, or None if it is not built or turned off; ConfigError if it
    was built from other sources than the checkout's."""
    if os.environ.get("SLUICE_CAPTURE_NATIVE", "1").lower() in ("0", "false", "no", "off"):
        return None
    try:
        import sluice_binlog
    except ImportError:
        return None
    if not _checked:
        check_built_from(sluice_binlog, NATIVE)
        _checked.append(True)
    return sluice_binlog


_checked: list[bool] = []  # the extension was checked against the sources (once per process)


def check_built_from(module: ModuleType, native: Path) -> None:
    """Refuse ``module`` unless its ``SOURCE_HASH`` is the hash of the sources in ``native`` (no
    sources there, e.g. an installed wheel: nothing to compare with)."""
    want = source_hash(native)
    if want is None:
        return
    built = getattr(module, "SOURCE_HASH", None)
    if built != want:
        raise ConfigError(
            str(getattr(module, "__file__", "sluice_binlog")), None,
            f"the native extension sluice_binlog was built from other sources than {native} "
            f"({'built before source hashes were recorded' if built is None else 'stale'}): capture would "
            "decode by the rules of those sources",
            hint="run scripts/bootstrap (it rebuilds the extension), then start the command again (running "
                 "followers and captures too), or set SLUICE_CAPTURE_NATIVE=0 to use the pure-Python decoder")


def source_hash(native: Path) -> str | None:
    """sha256 of ``Cargo.toml``, ``Cargo.lock``, ``pyproject.toml``, ``build.rs`` and the files
    ``src/*.rs`` (by name; not dot files, not subfolders: the crate has none), as build.rs hashes them;
    None without a ``native/`` source tree."""
    if not (native / "Cargo.toml").is_file():
        return None
    src = sorted((p for p in (native / "src").glob("*.rs") if not p.name.startswith(".") and p.is_file()),
                 key=lambda p: p.name)
    h = hashlib.sha256()
    for f in [native / "Cargo.toml", native / "Cargo.lock", native / "pyproject.toml", native / "build.rs", *src]:
        try:
            h.update(f.read_bytes())
        except OSError as e:
            raise ConfigError(str(f), None, f"cannot read the native extension's source to check the built "
                              f"extension against it: {e.strerror or e}",
                              hint="restore native/ from git (git checkout -- native), or set "
                                   "SLUICE_CAPTURE_NATIVE=0 to use the pure-Python decoder") from None
    return h.hexdigest()
