"""Run the ``sluice`` CLI as a new user would, and check that a mistake is one clear message."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.deploy import REPO

#: run a command as this unprivileged user (root writes to read-only folders anyway)
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def cli(*args: str, as_nobody: bool = False, env: dict | None = None, timeout: float = 600
        ) -> subprocess.CompletedProcess:
    """``python -m pipeline.cli ARGS`` of this checkout (optionally as ``nobody``), never raising."""
    e = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYSPARK_PYTHON": sys.executable, **(env or {})}
    cmd = [sys.executable, "-m", "pipeline.cli", *args]
    if as_nobody:
        cmd = [*NOBODY, *cmd]
    return subprocess.run(cmd, cwd=REPO, env=e, text=True, capture_output=True, timeout=timeout)


def one_message(proc: subprocess.CompletedProcess, code: int, *needles: str) -> str:
    """Assert exit ``code``, no traceback, exactly one error line (ours or a usage error), and
    every ``needle`` in stderr; return the error line."""
    out = proc.stdout + proc.stderr
    assert proc.returncode == code, f"exit {proc.returncode}, wanted {code}:\n{out[-4000:]}"
    assert "Traceback" not in out and "exc_info" not in out, out[-4000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith(("sluice: error:", "Error:"))]
    assert len(lines) == 1, f"wanted one error line:\n{proc.stderr[-4000:]}"
    for n in needles:
        assert n in proc.stderr, f"{n!r} not in:\n{proc.stderr[-4000:]}"
    return lines[0]
