"""The service contract and the helpers every service module shares (stdlib only).

State lives in one directory, ``$SLUICE_SERVICES_DIR`` (default ``<repo>/.sluice/services``):
``services.json`` records, per running service, its ports, pids and version; each service
keeps its data and log under ``<dir>/<name>/``. Downloads are cached in
``$SLUICE_CACHE`` (default ``<repo>/.sluice/cache``). Both are git-ignored.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
JAVA17_HOME = "/usr/lib/jvm/java-17-openjdk-amd64"


class ServiceError(RuntimeError):
    """A service failed to install or start; the message carries the log tail."""


def log(msg: str) -> None:
    """Print one progress line to stderr."""
    print(f"[services] {msg}", file=sys.stderr, flush=True)


def run(cmd: list[str], *, check: bool = True, env: dict | None = None, cwd: Path | None = None,
        capture: bool = True, input: str | None = None, timeout: float | None = None,
        ) -> subprocess.CompletedProcess:
    """Run a command; on failure raise ServiceError with its output."""
    proc = subprocess.run(cmd, env=env, cwd=cwd, text=True, input=input, timeout=timeout,
                          stdout=subprocess.PIPE if capture else None,
                          stderr=subprocess.STDOUT if capture else None)
    if check and proc.returncode != 0:
        out = (proc.stdout or "")[-4000:]
        raise ServiceError(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{out}")
    return proc


def apt_install(*packages: str) -> None:
    """Install Debian packages that are missing, without letting their init scripts start
    daemons on the standard ports (a policy-rc.d that forbids starts while we install)."""
    missing = [p for p in packages if run(["dpkg-query", "-W", "-f=${Status}", p],
                                          check=False).stdout.strip() != "install ok installed"]
    if not missing:
        return
    if os.geteuid() != 0:
        raise ServiceError(f"need root to apt-get install {' '.join(missing)}")
    log(f"apt-get install {' '.join(missing)}")
    policy = Path("/usr/sbin/policy-rc.d")
    had_policy = policy.exists()
    if not had_policy:
        policy.write_text("#!/bin/sh\nexit 101\n")
        policy.chmod(0o755)
    try:
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        lists = Path("/var/lib/apt/lists")
        if not any(lists.glob("*Packages*")) or time.time() - lists.stat().st_mtime > 86400:
            run(["apt-get", "update", "-qq"], env=env)
        proc = run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing],
                   env=env, check=False)
        if proc.returncode != 0:  # a stale package list: refresh once and retry
            run(["apt-get", "update", "-qq"], env=env)
            run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing], env=env)
    finally:
        if not had_policy:
            policy.unlink(missing_ok=True)


def maven_fetch(artifact: str, dest: Path) -> Path:
    """Copy one Maven Central artifact (``group:artifact:version[:packaging[:classifier]]``)
    into ``dest`` using the machine's Maven (which caches it in ~/.m2)."""
    dest.mkdir(parents=True, exist_ok=True)
    run(["mvn", "-q", "-B", "dependency:copy", f"-Dartifact={artifact}",
         f"-DoutputDirectory={dest}", "-Dmdep.useBaseVersion=true"], timeout=1800)
    return dest


def port_free(port: int) -> bool:
    """True if nothing listens on 127.0.0.1:port and we could bind it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    """True if something accepts TCP connections on host:port."""
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=1):
        return True
    return False


def pid_alive(pid: int | None) -> bool:
    """True if the process exists and is not a zombie."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


def stop_pid(pid: int | None, timeout: float = 30.0) -> None:
    """SIGTERM the process group (or the process), wait, then SIGKILL."""
    if not pid_alive(pid):
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            try:
                os.killpg(pid, sig)
            except (ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.time() + (timeout if sig == signal.SIGTERM else 10)
        while time.time() < deadline:
            if not pid_alive(pid):
                return
            time.sleep(0.2)


def tail(path: Path, lines: int = 40) -> str:
    """The last lines of a log file (or a note that it is missing)."""
    if not path.exists():
        return f"(no log at {path})"
    text = path.read_text(errors="replace").splitlines()
    return "\n".join(text[-lines:])


def wait_until(what: str, probe: Callable[[], bool], timeout: float, logfile: Path,
               pid: int | None = None) -> None:
    """Poll ``probe`` until true; raise ServiceError with the log tail on timeout or death."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        with contextlib.suppress(Exception):
            if probe():
                return
        if pid is not None and not pid_alive(pid):
            raise ServiceError(f"{what}: process {pid} died while starting; log tail "
                               f"({logfile}):\n{tail(logfile)}")
        time.sleep(1)
    raise ServiceError(f"{what}: not ready after {timeout:.0f}s; log tail ({logfile}):\n"
                       f"{tail(logfile)}")


#: pids started by spawn() in this process, so a failed start can stop what it began
SPAWNED: list[int] = []


def spawn(cmd: list[str], logfile: Path, *, env: dict | None = None, cwd: Path | None = None,
          user: str | None = None) -> int:
    """Start a daemon in its own session, output to ``logfile``; return its pid."""
    logfile.parent.mkdir(parents=True, exist_ok=True)
    out = open(logfile, "ab")
    if user:
        cmd = ["runuser", "-u", user, "--", *cmd]
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=env, cwd=cwd, start_new_session=True)
    out.close()
    SPAWNED.append(proc.pid)
    return proc.pid


@dataclass
class Ctx:
    """Where a service keeps things, and the shared state file."""

    services_dir: Path
    cache: Path
    state: dict = field(default_factory=dict)

    @classmethod
    def load(cls) -> Ctx:
        sdir = Path(os.environ.get("SLUICE_SERVICES_DIR", REPO / ".sluice" / "services"))
        cache = Path(os.environ.get("SLUICE_CACHE", REPO / ".sluice" / "cache"))
        sdir.mkdir(parents=True, exist_ok=True)
        cache.mkdir(parents=True, exist_ok=True)
        ctx = cls(sdir.resolve(), cache.resolve())
        if ctx.state_file.exists():
            ctx.state = json.loads(ctx.state_file.read_text() or "{}")
        return ctx

    @property
    def state_file(self) -> Path:
        return self.services_dir / "services.json"

    @property
    def ports_file(self) -> Path:
        """Ports of stopped services, reused by their next start while free."""
        return self.services_dir / "ports.json"

    @property
    def venv_python(self) -> str:
        """The project's virtualenv interpreter (made by scripts/bootstrap)."""
        py = REPO / ".venv" / "bin" / "python"
        return str(py) if py.exists() else sys.executable

    def home(self, name: str) -> Path:
        """The data/log directory of one service."""
        d = self.services_dir / name
        d.mkdir(parents=True, exist_ok=True)
        return d

    def save(self, name: str, info: dict | None) -> None:
        """Record (or with None, forget) a service's runtime info, under a file lock."""
        with open(self.services_dir / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            current = json.loads(self.state_file.read_text() or "{}") if self.state_file.exists() else {}
            if info is None:
                gone = current.pop(name, None) or {}
                ports = {k: v for k, v in gone.items() if k.endswith("port") and isinstance(v, int)}
                if ports:  # remembered so that a start after this stop gets the same ports back
                    known = json.loads(self.ports_file.read_text() or "{}") if self.ports_file.exists() else {}
                    known[name] = ports
                    self.ports_file.write_text(json.dumps(known, indent=2, sort_keys=True))
            else:
                current[name] = info
            tmp = self.state_file.with_suffix(".tmp")
            tmp.write_text(json.dumps(current, indent=2, sort_keys=True))
            tmp.replace(self.state_file)
            self.state = current

    def port(self, name: str, key: str = "port") -> int:
        """A private loopback port for ``name``: the one it had before if still free, else a
        fresh one from the kernel's ephemeral range (never a service's standard port)."""
        prev = self.state.get(name, {}).get(key)
        if not prev and self.ports_file.exists():  # stopped before: its ports from then
            prev = json.loads(self.ports_file.read_text() or "{}").get(name, {}).get(key)
        if prev and port_free(prev):
            return prev
        taken = {v for s in self.state.values() for k, v in s.items()
                 if k.endswith("port") and isinstance(v, int)}
        while True:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                p = s.getsockname()[1]
            if p not in taken:
                return p


class Service:
    """One service: install (idempotent), start (waits for real readiness), stop, check."""

    name: str = ""
    #: other services this one needs running first
    needs: tuple[str, ...] = ()

    def install(self, ctx: Ctx) -> None:
        """Install binaries/packages (idempotent, cached)."""

    def start(self, ctx: Ctx) -> dict:
        """Start and wait for readiness; return the info to record (ports, pids, version)."""
        raise NotImplementedError

    def stop(self, ctx: Ctx, info: dict) -> None:
        """Stop the processes recorded in ``info``."""
        for key, pid in info.items():
            if key.endswith("pid"):
                stop_pid(pid)

    def check(self, ctx: Ctx, info: dict) -> str:
        """Return a one-line health/version string, or raise ServiceError."""
        raise NotImplementedError


def reset_dir(path: Path) -> None:
    """Remove and recreate a directory."""
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True, exist_ok=True)
