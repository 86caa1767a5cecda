"""The RDB adapter's face for ``sluice verify``: a connection to read the target with.

A relational target holds copies of the source tables, so ``sluice verify`` compares them
completely, chunk by chunk, with checksums both sides compute (pipeline/ops/verify_rdb.py,
which speaks to each side through a plain DB-API connection and its dialect name). This
module gives that connection for a target, from the adapter's own pool (client.py).
"""

from __future__ import annotations

from typing import Any

from adapters.rdb.client import engine_for
from adapters.rdb.config import RdbTarget


def read_connection(target: RdbTarget) -> Any:
    """A DB-API connection to ``target`` from its pool (the caller closes it); its dialect is
    ``target.dialect``."""
    return engine_for(target).raw_connection()
