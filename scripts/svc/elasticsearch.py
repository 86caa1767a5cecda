"""Elasticsearch 8.x, single node, on private loopback ports (stdlib only).

The only Elasticsearch server build on Maven Central is the *integ-test-zip* distribution
(``org.elasticsearch.distribution.integ-test-zip:elasticsearch:<ver>:zip``): the server with
just four modules (transport-netty4, x-pack-core, x-pack-security, apm). It lacks, among
others, parent-join, reindex, rest-root, mapper-extras, analysis-common, lang-painless and
ingest-common, and those are not published for 8.x anywhere on Maven Central (see the
Elasticsearch section of the services docs). The server refuses to run as root, so it runs as a
dedicated system user; its config dir is a copy under the service home (ES writes its
keystore there).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import time
import urllib.request
import zipfile
from pathlib import Path

from scripts.svc import base

ES_VERSION = os.environ.get("SLUICE_ES_VERSION", "8.19.21")
ARTIFACT = "org.elasticsearch.distribution.integ-test-zip:elasticsearch:{v}:zip"
USER = "sluice-es"
HEAP = os.environ.get("SLUICE_ES_HEAP", "512m")
START_TIMEOUT = 300.0


def _get(url: str, timeout: float = 5.0) -> dict:
    """GET a JSON document."""
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read().decode())


def _distribution(ctx: base.Ctx) -> Path:
    return ctx.cache / "elasticsearch" / f"elasticsearch-{ES_VERSION}"


def _unzip(archive: Path, dest: Path) -> None:
    """Extract ``archive`` so that its single top folder becomes ``dest``, keeping the Unix
    modes (zipfile drops them), atomically: a half-done extraction is never seen as done."""
    tmp = dest.parent / f".{dest.name}.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            path = Path(zf.extract(info, tmp))
            mode = (info.external_attr >> 16) & 0o777
            if mode and not info.is_dir():
                path.chmod(mode)
    # whatever root's umask: the service user must read every file and enter every folder
    for root, dirs, files in os.walk(tmp):
        for d in dirs:
            p = os.path.join(root, d)
            os.chmod(p, os.stat(p).st_mode & 0o777 | 0o755)
        for f in files:
            p = os.path.join(root, f)
            os.chmod(p, os.stat(p).st_mode & 0o777 | 0o444)
    tops = list(tmp.iterdir())
    if len(tops) != 1 or not tops[0].is_dir():
        raise base.ServiceError(f"unexpected layout in {archive}: {[p.name for p in tops]}")
    tops[0].rename(dest)
    tmp.rmdir()


def _ensure_user(name: str = USER) -> pwd.struct_passwd:
    """The unprivileged system user a server runs as (Elasticsearch and OpenSearch refuse root)."""
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    if os.geteuid() != 0:
        raise base.ServiceError(f"need root to create the system user {name}")
    base.log(f"creating system user {name}")
    base.run(["useradd", "--system", "--user-group", "--no-create-home",
              "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", name])
    return pwd.getpwnam(name)


def _chown_tree(path: Path, uid: int, gid: int) -> None:
    os.chown(path, uid, gid)
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            os.chown(os.path.join(root, name), uid, gid, follow_symlinks=False)


def _make_reachable(path: Path) -> None:
    """Let other users traverse every parent folder of ``path`` (add o+x where missing)."""
    for p in [path, *path.parents]:
        mode = p.stat().st_mode
        if not mode & 0o001:
            p.chmod(mode | 0o001)


class Elasticsearch(base.Service):
    name = "elasticsearch"

    def install(self, ctx: base.Ctx) -> None:
        dist = _distribution(ctx)
        if not (dist / "bin" / "elasticsearch").exists():
            dl = ctx.cache / "elasticsearch" / "download"
            archive = dl / f"elasticsearch-{ES_VERSION}.zip"
            if not archive.exists():
                base.log(f"elasticsearch: fetching {ARTIFACT.format(v=ES_VERSION)}")
                base.maven_fetch(ARTIFACT.format(v=ES_VERSION), dl)
            base.log(f"elasticsearch: unpacking into {dist}")
            _unzip(archive, dist)
            archive.unlink()  # the unpacked tree is the cache; Maven's ~/.m2 keeps the zip
        _ensure_user()
        # the distribution stays root-owned; the service user only needs to read it
        _make_reachable(dist)

    def start(self, ctx: base.Ctx) -> dict:
        dist = _distribution(ctx)
        user = _ensure_user()
        port = ctx.port(self.name, "port")
        tport = ctx.port(self.name, "transport_port")
        if tport == port:  # ctx.port does not know about the one just picked
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                tport = s.getsockname()[1]
        home = ctx.home(self.name)
        for sub in ("config", "logs", "tmp"):
            base.reset_dir(home / sub)
        (home / "data").mkdir(parents=True, exist_ok=True)  # indices persist across stop/start
        conf, logs = home / "config", home / "logs"
        shutil.copytree(dist / "config", conf, dirs_exist_ok=True)
        settings = {
            "cluster.name": "sluice",
            "node.name": "sluice-es",
            "discovery.type": "single-node",
            "network.host": "127.0.0.1",
            "http.port": port,
            "transport.port": tport,
            "path.data": str(home / "data"),
            "path.logs": str(logs),
            # the distribution ships x-pack-security: turn it off (plain HTTP, no auth)
            "xpack.security.enabled": False,
            # a nearly full disk must not turn test indices read-only
            "cluster.routing.allocation.disk.threshold_enabled": False,
            # vm.max_map_count is 65530 here (ES wants 262144): read index files with NIO,
            # so a suite that creates many indices cannot run out of map areas
            "node.store.allow_mmap": False,
        }
        (conf / "elasticsearch.yml").write_text(
            "# written by scripts/svc/elasticsearch.py on every start\n"
            + "".join(f"{k}: {json.dumps(v)}\n" for k, v in settings.items()))
        (conf / "jvm.options.d" / "sluice.options").write_text(
            f"-Xms{HEAP}\n-Xmx{HEAP}\n-XX:ErrorFile={logs}/hs_err_pid%p.log\n"
            f"-XX:HeapDumpPath={logs}\n")
        _chown_tree(home, user.pw_uid, user.pw_gid)
        _make_reachable(home)

        env = {
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "LANG": "C.UTF-8",
            "HOME": str(home / "tmp"),
            "ES_JAVA_HOME": base.JAVA17_HOME,
            "ES_PATH_CONF": str(conf),
            "ES_TMPDIR": str(home / "tmp"),
        }
        logfile = logs / "console.log"
        t0 = time.time()
        pid = base.spawn([str(dist / "bin" / "elasticsearch")], logfile, env=env, cwd=logs,
                         user=USER)
        url = f"http://127.0.0.1:{port}"

        def healthy() -> bool:
            health = _get(f"{url}/_cluster/health?wait_for_status=yellow&timeout=1s")
            return health.get("status") in ("green", "yellow")

        try:
            base.wait_until("elasticsearch", healthy, START_TIMEOUT, logfile, pid=pid)
        except base.ServiceError:
            base.stop_pid(pid)
            raise
        node = next(iter(_get(f"{url}/_nodes/_local/process,plugins")["nodes"].values()))
        info = {
            "host": "127.0.0.1",
            "port": port,
            "transport_port": tport,
            "pid": pid,
            "server_pid": node["process"]["id"],
            "version": node["version"],
            "url": url,
            "modules": sorted(m["name"] for m in node.get("modules", [])),
            "plugins": sorted(p["name"] for p in node.get("plugins", [])),
            "user": USER,
            "home": str(home),
            "log": str(logs / "sluice.log"),
            "startup_seconds": round(time.time() - t0, 1),
        }
        return info

    def stop(self, ctx: base.Ctx, info: dict) -> None:
        # the launcher (runuser -> CLI JVM -> server JVM) first, then the server JVM itself
        super().stop(ctx, info)
        port = info.get("port")
        deadline = time.time() + 30
        while port and base.port_open(port) and time.time() < deadline:
            time.sleep(0.5)

    def check(self, ctx: base.Ctx, info: dict) -> str:
        url = info.get("url") or f"http://127.0.0.1:{info['port']}"
        try:
            health = _get(f"{url}/_cluster/health", timeout=5)
            nodes = _get(f"{url}/_nodes/_local?filter_path=nodes.*.version", timeout=5)
        except (OSError, ValueError) as e:
            raise base.ServiceError(f"elasticsearch at {url} unreachable: {e}") from e
        version = next(iter(nodes.get("nodes", {}).values()), {}).get("version", "?")
        return f"Elasticsearch {version}, cluster {health.get('status')}"


SERVICE = Elasticsearch()

