"""OpenSearch 2.19, single node, on private loopback ports, with the modules a search index needs
(stdlib only).

Maven Central has the *integ-test-zip* distribution of OpenSearch
(``org.opensearch.distribution.integ-test-zip:opensearch:<ver>:zip``): the server with one module,
``transport-netty4``. Unlike Elasticsearch 8, OpenSearch publishes its modules there as plain jars
(``org.opensearch.plugin:<name>[-client]``), so :func:`install` assembles the modules a
change-replication target needs into the distribution's ``modules/`` folder, as the full
distribution lays them out:

* ``parent-join`` (join fields, ``has_child``/``has_parent``), ``reindex`` (``_update_by_query``,
  ``_delete_by_query``, ``_reindex``), ``lang-painless`` (scripts), ``analysis-common`` (language
  analyzers, ngram, ...; it extends lang-painless), and ``transport-netty4`` (HTTP; in the zip
  already, assembled the same way if a version lacks it);
* each module's jars are the closure of its Maven artifact (``mvn dependency:copy-dependencies``
  of a small pom, e.g. antlr4 and asm for painless, the REST client for reindex) less the server
  itself and every jar the server's ``lib/`` already holds (OpenSearch refuses duplicate classes);
* each gets the ``plugin-descriptor.properties`` the build would have written and the
  ``plugin-security.policy`` of the OpenSearch sources (painless defines classes; reindex opens
  sockets).

The server refuses to run as root, so it runs as a dedicated system user on JDK 17 (the
integ-test zip bundles no JDK); its config dir is a copy under the service home. Data persists
across stop/start in the same services dir, as Elasticsearch's does.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from scripts.svc import base
from scripts.svc.elasticsearch import _chown_tree, _ensure_user, _get, _make_reachable, _unzip

OS_VERSION = os.environ.get("SLUICE_OS_VERSION", "2.19.6")
ARTIFACT = "org.opensearch.distribution.integ-test-zip:opensearch:{v}:zip"
USER = "sluice-os"
HEAP = os.environ.get("SLUICE_OS_HEAP", "512m")
START_TIMEOUT = 300.0


@dataclass(frozen=True)
class Module:
    """One module folder: the Maven artifact it comes from and its plugin descriptor."""

    name: str
    artifact: str  # artifactId under org.opensearch.plugin (version: OS_VERSION)
    classname: str
    description: str
    extends: tuple[str, ...] = ()
    policy: str = ""


PAINLESS_POLICY = """grant {
  // needed to generate runtime classes
  permission java.lang.RuntimePermission "createClassLoader";
  // needed to find the classloader to load whitelisted classes from
  permission java.lang.RuntimePermission "getClassLoader";
};
"""
REINDEX_POLICY = """grant {
  // reindex opens socket connections using the rest client
  permission java.net.SocketPermission "*", "connect";
};
grant codeBase "${codebase.opensearch-rest-client}" {
  // rest client uses system properties which gets the default proxy
  permission java.net.NetPermission "getProxySelector";
};
grant codeBase "${codebase.httpasyncclient}" {
  // rest client uses system properties which gets the default proxy
  permission java.net.NetPermission "getProxySelector";
};
"""
NETTY_POLICY = """grant {
  permission java.io.FilePermission "/proc/sys/net/core/somaxconn", "read";
  permission java.net.SocketPermission "*", "accept,connect";
  permission java.lang.RuntimePermission "*", "setContextClassLoader";
  permission java.lang.RuntimePermission "getClassLoader";
  permission java.util.PropertyPermission "sun.nio.ch.bugLevel", "write";
};
"""

#: in dependency order (a module's ``extends`` come first); names as in the full distribution
MODULES = (
    Module("transport-netty4", "transport-netty4-client", "org.opensearch.transport.Netty4Plugin",
           "Netty 4 based transport implementation", policy=NETTY_POLICY),
    Module("lang-painless", "lang-painless", "org.opensearch.painless.PainlessPlugin",
           "An easy, safe and fast scripting language for OpenSearch", policy=PAINLESS_POLICY),
    Module("analysis-common", "analysis-common", "org.opensearch.analysis.common.CommonAnalysisPlugin",
           'Adds "built in" analyzers to OpenSearch.', extends=("lang-painless",)),
    Module("parent-join", "parent-join-client", "org.opensearch.join.ParentJoinPlugin",
           "This module adds the support parent-child queries to OpenSearch"),
    Module("reindex", "reindex-client", "org.opensearch.index.reindex.ReindexPlugin",
           "The Reindex module adds APIs to reindex from one index to another or update documents in place.",
           policy=REINDEX_POLICY),
)
_JAR_NAME = re.compile(r"^(?P<name>.+?)-\d[^-]*(?:-[^-]+)*\.jar$")


def _distribution(ctx: base.Ctx) -> Path:
    return ctx.cache / "opensearch" / f"opensearch-{OS_VERSION}"


def _stem(jar: str) -> str:
    """``httpcore-nio-4.4.16.jar`` -> ``httpcore-nio`` (the artifact, without its version)."""
    m = _JAR_NAME.match(jar)
    return m.group("name") if m else jar.removesuffix(".jar")


def _module_pom(mod: Module) -> str:
    """A throw-away project whose dependency closure is the module's jars, without the server
    (painless' SPI depends on the whole ``org.opensearch:opensearch`` server jar)."""
    return ("<project>\n  <modelVersion>4.0.0</modelVersion>\n"
            f"  <groupId>sluice.local</groupId><artifactId>opensearch-module-{mod.name}</artifactId>"
            f"<version>{OS_VERSION}</version><packaging>pom</packaging>\n  <dependencies>\n"
            f"    <dependency><groupId>org.opensearch.plugin</groupId><artifactId>{mod.artifact}</artifactId>"
            f"<version>{OS_VERSION}</version><exclusions><exclusion><groupId>org.opensearch</groupId>"
            "<artifactId>opensearch</artifactId></exclusion></exclusions></dependency>\n"
            "  </dependencies>\n</project>\n")


def _descriptor(mod: Module) -> str:
    return "".join(f"{k}={v}\n" for k, v in (
        ("description", mod.description), ("version", OS_VERSION), ("name", mod.name),
        ("classname", mod.classname), ("java.version", "11"), ("opensearch.version", OS_VERSION),
        ("custom.foldername", ""), ("extended.plugins", ",".join(mod.extends)),
        ("has.native.controller", "false")))


def _stamp(mod: Module) -> str:
    """What a module folder was assembled from; a change re-assembles it."""
    text = _module_pom(mod) + _descriptor(mod) + mod.policy
    return hashlib.sha256(text.encode()).hexdigest()


def _assemble(ctx: base.Ctx, dist: Path, mod: Module) -> list[str]:
    """Build ``modules/<name>/`` (atomically: a ``.partial`` folder renamed at the end)."""
    work = ctx.cache / "opensearch" / "modules" / mod.name
    work.mkdir(parents=True, exist_ok=True)
    (work / "pom.xml").write_text(_module_pom(mod))
    resolved = work / "lib"
    shutil.rmtree(resolved, ignore_errors=True)
    base.log(f"opensearch: resolving module {mod.name} (org.opensearch.plugin:{mod.artifact}:{OS_VERSION})")
    base.run(["mvn", "-q", "-B", "dependency:copy-dependencies", "-DincludeScope=runtime",
              f"-DoutputDirectory={resolved}"], cwd=work, timeout=1800)
    provided = {_stem(j.name) for j in (dist / "lib").glob("*.jar")}
    for parent in mod.extends:  # classes of an extended module are visible: no second copy
        provided |= {_stem(j.name) for j in (dist / "modules" / parent).glob("*.jar")}
    jars = sorted(j for j in resolved.glob("*.jar") if _stem(j.name) not in provided)
    if not any(_stem(j.name) == mod.artifact for j in jars):
        raise base.ServiceError(f"opensearch: module {mod.name}: {mod.artifact} was not resolved")
    target = dist / "modules" / mod.name
    tmp = target.with_name(f".{mod.name}.partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for j in jars:
        shutil.copy2(j, tmp / j.name)
    (tmp / "plugin-descriptor.properties").write_text(_descriptor(mod))
    if mod.policy:
        (tmp / "plugin-security.policy").write_text(mod.policy)
    (tmp / ".sluice-stamp").write_text(_stamp(mod))
    for p in tmp.iterdir():
        p.chmod(0o644)
    tmp.chmod(0o755)
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)
    return [j.name for j in jars]


def _module_ok(dist: Path, mod: Module) -> bool:
    folder = dist / "modules" / mod.name
    if not (folder / "plugin-descriptor.properties").exists():
        return False
    stamp = folder / ".sluice-stamp"
    return not stamp.exists() or stamp.read_text() == _stamp(mod)  # no stamp: the zip's own module


class OpenSearch(base.Service):
    name = "opensearch"

    def install(self, ctx: base.Ctx) -> None:
        dist = _distribution(ctx)
        if not (dist / "bin" / "opensearch").exists():
            dl = ctx.cache / "opensearch" / "download"
            archive = dl / f"opensearch-{OS_VERSION}.zip"
            if not archive.exists():
                base.log(f"opensearch: fetching {ARTIFACT.format(v=OS_VERSION)}")
                base.maven_fetch(ARTIFACT.format(v=OS_VERSION), dl)
            base.log(f"opensearch: unpacking into {dist}")
            _unzip(archive, dist)
            archive.unlink()  # the unpacked tree is the cache; Maven's ~/.m2 keeps the zip
        for mod in MODULES:
            if not _module_ok(dist, mod):
                jars = _assemble(ctx, dist, mod)
                base.log(f"opensearch: module {mod.name}: {', '.join(jars)}")
        _ensure_user(USER)
        _make_reachable(dist)

    def start(self, ctx: base.Ctx) -> dict:
        dist = _distribution(ctx)
        user = _ensure_user(USER)
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
        # jvm.options names logs/gc.log, logs/hs_err and the heap-dump dir relative to the
        # distribution (the launcher cds there, and it is root-owned): point them at the home
        jvm = conf / "jvm.options"
        jvm.write_text(jvm.read_text().replace("file=logs/", f"file={logs}/")
                       .replace("ErrorFile=logs/", f"ErrorFile={logs}/")
                       .replace("HeapDumpPath=data", f"HeapDumpPath={logs}"))
        settings = {
            "cluster.name": "sluice-os",
            "node.name": "sluice-os",
            "discovery.type": "single-node",
            "network.host": "127.0.0.1",
            "http.port": port,
            "transport.port": tport,
            "path.data": str(home / "data"),
            "path.logs": str(logs),
            # a nearly full disk must not turn test indices read-only
            "cluster.routing.allocation.disk.threshold_enabled": False,
            # vm.max_map_count is 65530 here (OpenSearch wants 262144): read index files with NIO
            "node.store.allow_mmap": False,
        }
        (conf / "opensearch.yml").write_text(
            "# written by scripts/svc/opensearch.py on every start\n"
            + "".join(f"{k}: {json.dumps(v)}\n" for k, v in settings.items()))
        (conf / "jvm.options.d").mkdir(exist_ok=True)
        (conf / "jvm.options.d" / "sluice.options").write_text(f"-Xms{HEAP}\n-Xmx{HEAP}\n")
        _chown_tree(home, user.pw_uid, user.pw_gid)
        _make_reachable(home)
        env = {
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "LANG": "C.UTF-8",
            "HOME": str(home / "tmp"),
            "OPENSEARCH_JAVA_HOME": base.JAVA17_HOME,
            "OPENSEARCH_PATH_CONF": str(conf),
            "OPENSEARCH_TMPDIR": str(home / "tmp"),
        }
        logfile = logs / "console.log"
        t0 = time.time()
        pid = base.spawn([str(dist / "bin" / "opensearch")], logfile, env=env, cwd=logs, user=USER)
        url = f"http://127.0.0.1:{port}"

        def healthy() -> bool:
            health = _get(f"{url}/_cluster/health?wait_for_status=yellow&timeout=1s")
            return health.get("status") in ("green", "yellow")

        try:
            base.wait_until("opensearch", healthy, START_TIMEOUT, logfile, pid=pid)
            node = next(iter(_get(f"{url}/_nodes/_local/process,plugins")["nodes"].values()))
            modules = sorted(m["name"] for m in node.get("modules", []))
            missing = [m.name for m in MODULES if m.name not in modules]
            if missing:
                raise base.ServiceError(f"opensearch started without module(s) {', '.join(missing)} "
                                        f"(loaded: {', '.join(modules)}); log: {logs / 'sluice-os.log'}")
        except base.ServiceError:
            base.stop_pid(pid)
            raise
        return {
            "host": "127.0.0.1",
            "port": port,
            "transport_port": tport,
            "pid": pid,
            "server_pid": node["process"]["id"],
            "version": node["version"],
            "url": url,
            "modules": modules,
            "plugins": sorted(p["name"] for p in node.get("plugins", [])),
            "user": USER,
            "home": str(home),
            "log": str(logs / "sluice-os.log"),
            "startup_seconds": round(time.time() - t0, 1),
        }

    def stop(self, ctx: base.Ctx, info: dict) -> None:
        # the launcher (runuser -> server JVM) first, then the server JVM itself
        super().stop(ctx, info)
        port = info.get("port")
        deadline = time.time() + 30
        while port and base.port_open(port) and time.time() < deadline:
            time.sleep(0.5)

    def check(self, ctx: base.Ctx, info: dict) -> str:
        url = info.get("url") or f"http://127.0.0.1:{info['port']}"
        try:
            health = _get(f"{url}/_cluster/health", timeout=5)
            root = _get(f"{url}/", timeout=5)
        except (OSError, ValueError) as e:
            raise base.ServiceError(f"opensearch at {url} unreachable: {e}") from e
        version = root.get("version", {}).get("number", "?")
        return f"OpenSearch {version}, cluster {health.get('status')}"


SERVICE = OpenSearch()
