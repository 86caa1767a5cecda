"""Fault-injection hooks of the crash tests, read from the environment (all off unless set).

``SLUICE_TEST_PAUSE_AFTER_ROWS`` (+ ``SLUICE_TEST_PAUSE_MARKER``) pauses a partition mid-apply
(:mod:`pipeline.job.chunks`); ``SLUICE_TEST_PAUSE_BEFORE_DDL`` pauses the driver at the first barrier
DDL of a run, ``SLUICE_TEST_PAUSE_BEFORE_ACK`` before a round's ack (:mod:`pipeline.job.driver`).
"""

from __future__ import annotations

import json
import os
import time


def fault_hooks() -> dict:
    """Fault-injection settings for the crash tests, from the environment (off by default)."""
    rows = os.environ.get("SLUICE_TEST_PAUSE_AFTER_ROWS")
    if not rows:
        return {}
    return {"pause_after_rows": int(rows), "pause_marker": os.environ.get("SLUICE_TEST_PAUSE_MARKER")}


def pause_before_ddl() -> None:
    """Fault-injection hook of the crash tests (off unless ``SLUICE_TEST_PAUSE_BEFORE_DDL`` names a
    marker file): before the first barrier DDL of the run -- the DML before it committed, nothing
    acked -- write the marker (this pid) and wait 120 s, or until ``<marker>.go`` exists."""
    marker = os.environ.get("SLUICE_TEST_PAUSE_BEFORE_DDL")
    if marker:
        _pause(marker, f"{os.getpid()}\n")


def pause_before_ack(round_no: int, batch_ids: list[int]) -> None:
    """Fault-injection hook of the crash tests (off unless ``SLUICE_TEST_PAUSE_BEFORE_ACK`` is
    ``round_no`` and ``SLUICE_TEST_PAUSE_MARKER`` names a marker file): every partition of every
    segment of this run's ``round_no``-th round committed (dead letters durable), nothing of it
    acked, the rounds before it acked. The marker holds this pid and the round's batch ids as
    JSON; then as :func:`pause_before_ddl`."""
    marker = os.environ.get("SLUICE_TEST_PAUSE_MARKER")
    if marker and os.environ.get("SLUICE_TEST_PAUSE_BEFORE_ACK") == str(round_no):
        _pause(marker, json.dumps({"pid": os.getpid(), "round": round_no, "batches": batch_ids}) + "\n")


def _pause(marker: str, text: str) -> None:
    """Write ``text`` to ``marker`` (whole before it appears; once per marker) and wait 120 s, or
    until ``<marker>.go`` exists."""
    tmp = f"{marker}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    try:
        os.link(tmp, marker)
    except FileExistsError:
        return
    finally:
        os.unlink(tmp)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not os.path.exists(marker + ".go"):
        time.sleep(0.2)
