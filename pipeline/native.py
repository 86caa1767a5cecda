"""The ``sluice_binlog`` extension (``native/``, Rust + PyO3), loaded on its own.

Two parts of Sluice use it and neither goes through the other: capture's decoder
(pipeline/capture/native.py) and the Kafka store's native producer
(pipeline/store/kafka/txnative.py). ``SLUICE_CAPTURE_NATIVE=0`` turns it off for both (capture then
runs on the pure-Python decoder, the Kafka store on confluent-kafka).
"""

from __future__ import annotations

import os
from types import ModuleType


def load() -> ModuleType | None:
    """The ``sluice_binlog`` extension, or None if it is not built or turned off."""
    if os.environ.get("SLUICE_CAPTURE_NATIVE", "1").lower() in ("0", "false", "no", "off"):
        return None
    try:
        import sluice_binlog
    except ImportError:
        return None
    return sluice_binlog
