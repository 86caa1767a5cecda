"""The ``sluice_binlog`` extension (``native/``, Rust + PyO3), loaded on its own.

Two parts of Sluice use it and neither goes through the other: capture's decoder
(pipeline/capture/native.py) and the Kafka store's native producer
(pipeline/store/kafka/txnative.py). ``SLUICE_CAPTURE_NATIVE=0`` turns it off for both (capture then
runs on the pure-Python decoder, the Kafka store on confluent-kafka).

An extension built from other sources than the checkout's ``native/`` (a ``git pull`` without
``scripts/bootstrap``) would decode by older rules without a word: its ``SOURCE_HASH`` (native/build.rs)
must be the hash of the checkout's sources, or loading it is refused, naming the fix.
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
    check_built_from(sluice_binlog, NATIVE)
    return sluice_binlog


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
            hint="run scripts/bootstrap (it rebuilds the extension), or set SLUICE_CAPTURE_NATIVE=0 to use the "
                 "pure-Python decoder")


def source_hash(native: Path) -> str | None:
    """sha256 of ``Cargo.toml``, ``pyproject.toml``, ``build.rs`` and ``src/*.rs`` (by name), as build.rs
    hashes them; None without a ``native/`` source tree."""
    if not (native / "Cargo.toml").is_file():
        return None
    files = [native / "Cargo.toml", native / "pyproject.toml", native / "build.rs",
             *sorted((native / "src").glob("*.rs"), key=lambda p: p.name)]
    h = hashlib.sha256()
    for f in files:
        h.update(f.read_bytes())
    return h.hexdigest()
