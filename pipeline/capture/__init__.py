"""The capture stage: binlog -> canal-style Dml records -> transaction-aligned batches.

``run_capture(cfg, follow=..., max_batches=...)`` is the entry point (``sluice capture``).
See docs/capture.md for positions, resume, server checks and the value encoding rules.
"""

from __future__ import annotations

from .position import Position
from .runner import CaptureSummary, run_capture

__all__ = ["CaptureSummary", "Position", "run_capture"]
