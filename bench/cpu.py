"""CPU seconds of a benchmark's timed phases: the whole machine's, and the servers' it drives.

*machine*: every CPU second the machine spent busy during the phase (``/proc/stat``: user, nice,
system, irq, softirq, steal), so nothing the phase caused escapes it: a ``sluice sync``'s JVM and
the Python workers its daemon forks are not reliably counted in ``RUSAGE_CHILDREN`` (the daemon
ends its workers without waiting for them; tried: a sync's tree came to 9 of ~40 CPU seconds).
The machine must be otherwise quiet for it to mean the phase (the load column says whether it
was). A *server* (a MariaDB service) is read from ``/proc/<pid>/stat`` before and after.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

_TICK = os.sysconf("SC_CLK_TCK")


def machine_busy() -> float:
    """CPU seconds the machine has spent busy since boot (all CPUs)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return (user + nice + system + irq + softirq + steal) / _TICK


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of a running process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


class CpuMeter:
    """Per phase: ``{"machine": s, <server>: s, ...}`` in :attr:`phases`."""

    def __init__(self, pids: dict[str, int]):
        self.pids = pids
        self.phases: dict[str, dict[str, float]] = {}

    @contextlib.contextmanager
    def phase(self, name: str, *servers: str) -> Iterator[None]:
        m0, s0 = machine_busy(), {s: process_cpu(self.pids[s]) for s in servers}
        yield
        self.phases[name] = {"machine": machine_busy() - m0,
                             **{s: process_cpu(self.pids[s]) - s0[s] for s in servers}}

    def machine(self, name: str) -> float:
        return self.phases[name]["machine"]
