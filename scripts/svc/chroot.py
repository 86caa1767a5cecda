"""Oracle MySQL's binaries in a Debian sid chroot, built once with debootstrap and cached outside
the clone (stdlib only).

Debian 12 packages no Oracle MySQL; Debian sid's ``mysql-server-core`` / ``mysql-client-core``
(9.7.x) need sid's newer glibc, so they are installed into a minimal sid tree::

    debootstrap --variant=minbase --include=mysql-server-core,mysql-client-core sid DIR MIRROR

(about 70 s and 650 MB; the mirror is the machine's own Debian mirror from its apt sources, or
``$SLUICE_DEBIAN_MIRROR``). The tree lives in ``$SLUICE_MYSQL_CHROOT`` (default
``/var/cache/sluice/mysql-sid``), outside any clone, so every worktree and every CI run of a fresh
clone on the machine reuses it. It is built under a file lock into ``DIR.partial-<pid>``, checked
(``mysqld --version`` runs), stamped, and only then renamed to ``DIR``: a half-built tree is never
used, and a tree whose stamp names other packages is built again.

The binaries run on the host, not inside a chroot: :func:`command` starts them through the tree's
own dynamic loader with the tree's libraries (``ld-linux-x86-64.so.2 --library-path ...``), so
data directories, sockets and logs stay wherever the caller puts them.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import time
from pathlib import Path

from scripts.svc.base import ServiceError, apt_install, log, run

PACKAGES = ("mysql-server-core", "mysql-client-core")
SUITE = "sid"
DEFAULT_DIR = Path("/var/cache/sluice/mysql-sid")
STAMP = ".sluice-chroot.json"
LIBDIR = "usr/lib/x86_64-linux-gnu"


def chroot_dir() -> Path:
    """Where the tree is (``$SLUICE_MYSQL_CHROOT`` or the default)."""
    return Path(os.environ.get("SLUICE_MYSQL_CHROOT") or DEFAULT_DIR)


def debian_mirror() -> str:
    """``$SLUICE_DEBIAN_MIRROR``, else the first Debian (not security) mirror in the apt sources."""
    if os.environ.get("SLUICE_DEBIAN_MIRROR"):
        return os.environ["SLUICE_DEBIAN_MIRROR"].rstrip("/")
    uris: list[str] = []
    sources = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    for f in sources:
        if not f.is_file() or not f.name.endswith((".list", ".sources")):
            continue
        text = f.read_text(errors="replace")
        if f.name.endswith(".sources"):  # deb822: "URIs: a b" within a "Types: deb" stanza
            for stanza in re.split(r"\n\s*\n", text):
                if re.search(r"(?mi)^Types:.*\bdeb\b", stanza):
                    m = re.search(r"(?mi)^URIs:\s*(.+)$", stanza)
                    uris += m.group(1).split() if m else []
        else:
            uris += re.findall(r"(?m)^\s*deb\s+(?:\[[^\]]*\]\s+)?(\S+)", text)
    for uri in uris:
        if re.search(r"/debian/?$", uri):
            return uri.rstrip("/")
    raise ServiceError("no Debian mirror in /etc/apt/sources.list*: set SLUICE_DEBIAN_MIRROR "
                       "(e.g. http://deb.debian.org/debian) for the MySQL chroot")


def _recipe() -> dict:
    return {"suite": SUITE, "variant": "minbase", "packages": list(PACKAGES)}


def is_built(root: Path) -> bool:
    """True if ``root`` is a complete tree built from this module's recipe."""
    stamp = root / STAMP
    try:
        return json.loads(stamp.read_text()).get("recipe") == _recipe()
    except (OSError, ValueError):
        return False


def command(root: Path, binary: str, *args: str) -> list[str]:
    """The command line that runs the tree's ``binary`` (e.g. ``usr/sbin/mysqld``) on the host."""
    return [str(root / LIBDIR / "ld-linux-x86-64.so.2"), "--library-path", str(root / LIBDIR),
            str(root / binary), *args]


def ensure() -> Path:
    """The tree, built first if missing or built from another recipe (locked, atomic)."""
    root = chroot_dir()
    if is_built(root):
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f".{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worktree may be building it right now
        if is_built(root):
            return root
        _build(root)
    return root


def _build(root: Path) -> None:
    apt_install("debootstrap")
    for stale in root.parent.glob(f"{root.name}.partial-*"):  # an interrupted build's leftovers
        shutil.rmtree(stale, ignore_errors=True)
    work = root.parent / f"{root.name}.partial-{os.getpid()}"
    mirror = debian_mirror()
    log(f"mysql: building a Debian {SUITE} tree with {', '.join(PACKAGES)} in {root} from {mirror} "
        "(once per machine, about 70 s)")
    t0 = time.time()
    proc = run(["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE, str(work), mirror],
               check=False, timeout=1800)
    if proc.returncode != 0:
        shutil.rmtree(work, ignore_errors=True)
        raise ServiceError(f"mysql: debootstrap of Debian {SUITE} from {mirror} failed "
                           f"(set SLUICE_DEBIAN_MIRROR to another mirror?):\n{(proc.stdout or '')[-2000:]}")
    for deb in (work / "var/cache/apt/archives").glob("*.deb"):  # 80 MB of packages already unpacked
        deb.unlink()
    out = run(command(work, "usr/sbin/mysqld", "--version"), timeout=60).stdout
    version = "mysqld " + out.split(" Ver ", 1)[-1].strip()  # "mysqld 9.7.4-2 for Linux on x86_64 ((Debian))"
    (work / STAMP).write_text(json.dumps({"recipe": _recipe(), "mirror": mirror, "mysqld": version,
                                          "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, indent=2))
    if root.exists():  # built from another recipe: replaced whole
        old = root.parent / f"{root.name}.old-{os.getpid()}"
        root.rename(old)
        shutil.rmtree(old, ignore_errors=True)
    work.rename(root)
    log(f"mysql: {version} in {root} ({time.time() - t0:.0f} s)")
