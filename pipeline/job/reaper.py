"""Every exit of a process that started a Spark JVM ends that JVM and its Python workers.

PySpark's gateway JVM normally ends by itself once this process is gone: it reads its stdin (a
pipe from this process) and exits at end of file. One path escapes that: a signal (SIGTERM, which
Sluice turns into ``KeyboardInterrupt``, or SIGINT) that arrives while PySpark is still launching
the gateway. ``launch_gateway`` then removes the folder the JVM is to write its connection file
into, the JVM's start fails on the missing folder after its py4j server thread is running, and
that JVM never reads stdin: it stays, with ~0.4 GB, under any supervisor that signals only the
main process.

:func:`install` (called by :func:`pipeline.job.session.get_spark` before a JVM is launched)
registers an ``atexit`` hook, which runs on every exit path short of SIGKILL (a normal end,
``sys.exit``, an exception, SIGTERM/SIGINT). The hook closes the stdin of a gateway that started
(the JVM ends as usual, without a wait here) and ends every other child process tree: SIGTERM,
then SIGKILL after :data:`GRACE_SECONDS`. Python workers are the JVM's children: the PySpark
daemon ends them when the JVM is gone, and the trees collected at the start are killed too.
After SIGKILL of this process nothing can run here; a JVM that started reads end of file then,
and one still launching finds its folder (nobody removed it) and ends the same way.
"""

from __future__ import annotations

import atexit
import os
import signal
import time
from pathlib import Path

from sluice_common.logs import get_logger

log = get_logger("spark")

GRACE_SECONDS = 5.0
_installed = False


def install() -> None:
    """Register the exit hook once per process."""
    global _installed
    if not _installed:
        atexit.register(end_children)
        _installed = True


def children(pid: int) -> list[int]:
    """The live child processes of ``pid`` (Linux ``/proc``; [] where there is none)."""
    out = []
    try:
        entries = list(Path("/proc").iterdir())
    except OSError:
        return out
    for p in entries:
        if not p.name.isdigit():
            continue
        try:
            fields = (p / "stat").read_text().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(p.name))
    return out


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants, parents first."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop(0)
        out.append(p)
        todo.extend(children(p))
    return out


def end_children(grace: float = GRACE_SECONDS) -> None:
    """The exit hook (see the module docstring); never raises."""
    try:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second signal must not cut the cleanup short
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread
        pass
    try:
        gateway = _gateway_pid()
        doomed = [p for c in children(os.getpid()) if c != gateway for p in tree(c)]
        if not doomed:
            return
        log.info("ending the Spark JVM this process started", pids=",".join(map(str, doomed)))
        _signal(doomed, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while any(_alive(p) for p in doomed) and time.monotonic() < deadline:
            time.sleep(0.1)
        _signal([p for p in doomed if _alive(p)], signal.SIGKILL)
    except Exception as e:  # noqa: BLE001 - on the way out: say it, do not mask the exit code
        log.warning("ending child processes failed", error=str(e))


def _gateway_pid() -> int | None:
    """The pid of the gateway JVM PySpark launched and connected to (its stdin closed here)."""
    try:
        from pyspark import SparkContext

        proc = getattr(SparkContext._gateway, "proc", None) if SparkContext._gateway is not None else None
    except Exception:  # noqa: BLE001 - no pyspark state: nothing launched
        return None
    if proc is None:
        return None
    try:
        if proc.stdin is not None:
            proc.stdin.close()  # end of file: the JVM ends by itself
    except OSError:
        pass
    return proc.pid


def _signal(pids: list[int], sig: int) -> None:
    for p in pids:
        try:
            os.kill(p, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0]
    except (OSError, IndexError):
        return False
    if state == "Z":  # our own child, dead: collect it
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        return False
    return True
