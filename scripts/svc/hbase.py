"""HBase 2.6 standalone (HMaster + in-process RegionServer + embedded ZooKeeper) plus the
Thrift1 gateway that happybase speaks, on private loopback ports (stdlib only).

There is no HBase tarball on Maven Central, so the runtime is assembled from the module jars:
a small pom under the cache depends on hbase-server / hbase-zookeeper (``-hadoop3`` builds,
which pull Hadoop 3 in), hbase-thrift, libthrift and a log4j2 backend, and
``mvn dependency:copy-dependencies`` copies the whole closure into ``lib/``. Maven Central
carries hbase-thrift only up to 2.6.1 and only in the default (Hadoop 2) flavour, so that
one jar comes from 2.6.1 with all of its dependencies excluded; the rest of the classpath is
the 2.6.x ``-hadoop3`` line (see docs/services.md, "HBase").

Both JVMs get the module flags HBase's own launcher (bin/hbase) adds on JDK 11+. Data is
ephemeral: the root dir and ZooKeeper state are wiped on every start.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from pathlib import Path
from xml.sax.saxutils import escape

from scripts.svc import base

HBASE_VERSION = os.environ.get("SLUICE_HBASE_VERSION", "2.6.4-hadoop3")
#: newest hbase-thrift on Maven Central (it stops at 2.6.1 and has no -hadoop3 flavour)
THRIFT_MODULE_VERSION = os.environ.get("SLUICE_HBASE_THRIFT_VERSION", "2.6.1")
LIBTHRIFT_VERSION = "0.14.1"  # what hbase-thrift 2.6.x declares
LOG4J2_VERSION = "2.17.2"  # what hbase-logging 2.6.x declares (the tarball ships it)
SLF4J_VERSION = "1.7.33"  # the slf4j-api HBase 2.6.x resolves to
MASTER_HEAP = os.environ.get("SLUICE_HBASE_HEAP", "768m")
THRIFT_HEAP = "256m"
START_TIMEOUT = 240.0
HOST = "127.0.0.1"

# The flags bin/hbase adds for JDK >= 11 (kept in sync there with the surefire flags of the
# HBase build, HBASE-28261): netty and HBase's own code reach into NIO buffers, Unsafe,
# reference queues and a few collections reflectively; Hadoop's Kerberos/DNS helpers use
# sun.security.krb5 and sun.net.*.
JDK11_FLAGS = [
    "-Dorg.apache.hbase.thirdparty.io.netty.tryReflectionSetAccessible=true",
    "--add-modules", "jdk.unsupported",
    *[f"--add-opens=java.base/{pkg}=ALL-UNNAMED" for pkg in (
        "java.io", "java.nio", "sun.nio.ch", "java.lang", "jdk.internal.ref",
        "java.lang.reflect", "java.util", "java.util.concurrent")],
    "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports=java.security.jgss/sun.security.krb5=ALL-UNNAMED",
    "--add-exports=java.base/sun.net.dns=ALL-UNNAMED",
    "--add-exports=java.base/sun.net.util=ALL-UNNAMED",
]

# Jars the standalone runtime does not need: log4j 1 (reload4j) bindings that would fight
# the log4j2 backend, and netty-all (pulled by hadoop-mapreduce-client-core) which would put
# a second, newer unshaded netty next to the one ZooKeeper uses.
_EXCLUDE = [("ch.qos.reload4j", "reload4j"), ("org.slf4j", "slf4j-reload4j"),
            ("org.slf4j", "slf4j-log4j12"), ("log4j", "log4j"), ("io.netty", "netty-all")]


def _dep(group: str, artifact: str, version: str, excludes: list[tuple[str, str]]) -> str:
    ex = "".join(f"<exclusion><groupId>{g}</groupId><artifactId>{a}</artifactId></exclusion>"
                 for g, a in excludes)
    return (f"    <dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
            f"<version>{version}</version>"
            + (f"<exclusions>{ex}</exclusions>" if ex else "") + "</dependency>\n")


def _pom() -> str:
    """The throw-away project whose dependency closure is the HBase runtime."""
    deps = [
        _dep("org.apache.hbase", "hbase-server", HBASE_VERSION, _EXCLUDE),
        # MiniZooKeeperCluster (the embedded ZooKeeper of standalone mode) lives here
        _dep("org.apache.hbase", "hbase-zookeeper", HBASE_VERSION, _EXCLUDE),
        _dep("org.apache.hbase", "hbase-hadoop2-compat", HBASE_VERSION, _EXCLUDE),
        # only the jar itself: its own pom would drag in HBase 2.6.1 and Hadoop 2.10
        _dep("org.apache.hbase", "hbase-thrift", THRIFT_MODULE_VERSION, [("*", "*")]),
        _dep("org.apache.thrift", "libthrift", LIBTHRIFT_VERSION,
             [("org.apache.tomcat.embed", "tomcat-embed-core")]),
        _dep("org.apache.logging.log4j", "log4j-api", LOG4J2_VERSION, []),
        _dep("org.apache.logging.log4j", "log4j-core", LOG4J2_VERSION, []),
        _dep("org.apache.logging.log4j", "log4j-slf4j-impl", LOG4J2_VERSION, []),
        _dep("org.apache.logging.log4j", "log4j-1.2-api", LOG4J2_VERSION, []),
        # java.util.logging -> slf4j, used by HBase's JulToSlf4jInitializer (set below)
        _dep("org.slf4j", "jul-to-slf4j", SLF4J_VERSION, []),
    ]
    return ("<project>\n  <modelVersion>4.0.0</modelVersion>\n"
            "  <groupId>sluice.local</groupId><artifactId>hbase-runtime</artifactId>"
            f"<version>{HBASE_VERSION}</version><packaging>pom</packaging>\n"
            "  <dependencies>\n" + "".join(deps) + "  </dependencies>\n</project>\n")


def _dist(ctx: base.Ctx) -> Path:
    return ctx.cache / f"hbase-{HBASE_VERSION}"


def _jars(ctx: base.Ctx) -> list[Path]:
    return sorted((_dist(ctx) / "lib").glob("*.jar"))


def _java() -> str:
    java = Path(base.JAVA17_HOME) / "bin" / "java"
    return str(java) if java.exists() else "java"


def _classpath(ctx: base.Ctx, conf: Path) -> str:
    return os.pathsep.join([str(conf), *map(str, _jars(ctx))])


def _site_xml(props: dict[str, object]) -> str:
    body = "".join(f"  <property><name>{escape(k)}</name><value>{escape(str(v))}</value>"
                   "</property>\n" for k, v in props.items())
    return ('<?xml version="1.0"?>\n<!-- written by scripts/svc/hbase.py on every start -->\n'
            f"<configuration>\n{body}</configuration>\n")


LOG4J2_PROPERTIES = """\
# written by scripts/svc/hbase.py: everything to stdout (the service log file)
status = warn
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_OUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{ISO8601} %-5p [%t] %c{2}: %.1000m%n
rootLogger = INFO,console
logger.zookeeper.name = org.apache.zookeeper
logger.zookeeper.level = WARN
logger.hadoop.name = org.apache.hadoop
logger.hadoop.level = WARN
logger.hbase.name = org.apache.hadoop.hbase
logger.hbase.level = INFO
logger.metrics.name = org.apache.hadoop.metrics2
logger.metrics.level = ERROR
"""

# A real round trip through Thrift -> RegionServer: list tables, create a probe table,
# write and read a cell, drop it. Prints the number of (non-probe) tables.
PROBE = """\
import os, sys, happybase
host, port, full = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
c = happybase.Connection(host, port, timeout=int(sys.argv[4]))
tables = c.tables()
if full:
    name = b"sluice_probe_%d" % os.getpid()
    if name in tables:
        c.delete_table(name, disable=True)
    c.create_table(name, {"f": {}})
    t = c.table(name)
    t.put(b"r", {b"f:q": b"ok"})
    assert t.row(b"r") == {b"f:q": b"ok"}, t.row(b"r")
    c.delete_table(name, disable=True)
    tables = [x for x in c.tables() if x != name]
print(len(tables))
"""


def _probe(ctx: base.Ctx, port: int, full: bool, timeout: float) -> int:
    """Run PROBE with the project's venv (happybase); return the table count."""
    try:
        proc = base.run([ctx.venv_python, "-c", PROBE, HOST, str(port), "1" if full else "0",
                         str(int(timeout * 1000))], check=False, timeout=timeout + 5)
    except subprocess.TimeoutExpired as e:
        raise base.ServiceError(f"thrift probe timed out after {timeout:.0f}s") from e
    if proc.returncode != 0:
        raise base.ServiceError(f"thrift probe failed: {(proc.stdout or '').strip()[-1500:]}")
    return int(proc.stdout.strip().splitlines()[-1])


def _distinct_ports(ctx: base.Ctx, keys: list[str]) -> dict[str, int]:
    """One private port per key, all different from each other."""
    ports: dict[str, int] = {}
    for key in keys:
        p = ctx.port("hbase", key)
        while p in ports.values():
            p = ctx.port("hbase", key)
        ports[key] = p
    return ports


class HBase(base.Service):
    name = "hbase"

    def install(self, ctx: base.Ctx) -> None:
        dist = _dist(ctx)
        pom = _pom()
        stamp = dist / ".complete"
        digest = hashlib.sha256(pom.encode()).hexdigest()
        if stamp.exists() and stamp.read_text().strip() == digest and _jars(ctx):
            return
        if shutil.which("mvn") is None:
            raise base.ServiceError("Maven (mvn) is needed to fetch the HBase jars")
        base.log(f"hbase: resolving HBase {HBASE_VERSION} + hbase-thrift {THRIFT_MODULE_VERSION}"
                 " jars with Maven")
        dist.mkdir(parents=True, exist_ok=True)
        (dist / "pom.xml").write_text(pom)
        tmp = dist / ".lib.partial"
        shutil.rmtree(tmp, ignore_errors=True)
        base.run(["mvn", "-q", "-B", "-f", str(dist / "pom.xml"), "dependency:copy-dependencies",
                  f"-DoutputDirectory={tmp}", "-DincludeScope=runtime"], timeout=1800)
        if not any(tmp.glob("hbase-server-*.jar")) or not any(tmp.glob("hbase-thrift-*.jar")):
            raise base.ServiceError(f"Maven left no HBase jars in {tmp}")
        shutil.rmtree(dist / "lib", ignore_errors=True)
        tmp.rename(dist / "lib")
        stamp.write_text(digest + "\n")
        size = sum(p.stat().st_size for p in _jars(ctx)) / 2**20
        base.log(f"hbase: {len(_jars(ctx))} jars, {size:.0f} MiB in {dist / 'lib'}")

    def _jvm(self, ctx: base.Ctx, conf: Path, heap: str, proc_name: str) -> list[str]:
        return [_java(), f"-Dproc_{proc_name}", f"-Xmx{heap}", "-XX:+UseG1GC",
                '-XX:OnOutOfMemoryError=kill -9 %p', *JDK11_FLAGS,
                "-Djava.net.preferIPv4Stack=true",
                f"-Djava.io.tmpdir={conf.parent / 'tmp'}",
                f"-Dlog4j2.configurationFile={conf / 'log4j2.properties'}",
                "-Dzookeeper.admin.enableServer=false",  # no ZooKeeper AdminServer (port 8080)
                "-Djava.util.logging.config.class="
                "org.apache.hadoop.hbase.logging.JulToSlf4jInitializer",
                "-cp", _classpath(ctx, conf)]

    def _env(self, home: Path) -> dict:
        return {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "LANG": "C.UTF-8", "HOME": str(home / "tmp"), "JAVA_HOME": base.JAVA17_HOME,
                "MALLOC_ARENA_MAX": "4"}

    def start(self, ctx: base.Ctx) -> dict:
        home = ctx.home(self.name)
        ports = _distinct_ports(ctx, ["port", "zk_port", "master_port", "rs_port"])
        for sub in ("conf", "root", "zk", "tmp"):
            base.reset_dir(home / sub)
        conf = home / "conf"
        site = {
            "hbase.cluster.distributed": "false",
            "hbase.rootdir": (home / "root").as_uri(),
            "hbase.tmp.dir": str(home / "tmp"),
            "hbase.local.dir": str(home / "tmp" / "local"),
            "hadoop.tmp.dir": str(home / "tmp" / "hadoop"),
            # WALs on the local file system, which has no hflush/hsync capability
            "hbase.unsafe.stream.capability.enforce": "false",
            # the embedded ZooKeeper (MiniZooKeeperCluster binds it to loopback)
            "hbase.zookeeper.quorum": HOST,
            "hbase.zookeeper.property.clientPort": ports["zk_port"],
            "hbase.zookeeper.property.dataDir": str(home / "zk"),
            "hbase.zookeeper.property.maxClientCnxns": 300,
            # RPC ports, loopback only, and the name the servers advertise
            "hbase.master.port": ports["master_port"],
            "hbase.regionserver.port": ports["rs_port"],
            "hbase.master.ipc.address": HOST,
            "hbase.regionserver.ipc.address": HOST,
            "hbase.master.hostname": HOST,
            "hbase.unsafe.regionserver.hostname": HOST,
            # no web UIs
            "hbase.master.info.port": -1,
            "hbase.regionserver.info.port": -1,
            "hbase.thrift.info.port": -1,
            # the Thrift1 gateway: buffered transport + binary protocol (happybase's defaults)
            "hbase.regionserver.thrift.port": ports["port"],
            "hbase.regionserver.thrift.ipaddress": HOST,
            "hbase.regionserver.thrift.framed": "false",
            "hbase.regionserver.thrift.compact": "false",
            "hbase.regionserver.thrift.server.type": "threadpool",
            # a small box: fewer RPC handler threads and a smaller block cache
            "hbase.regionserver.handler.count": 10,
            "hbase.master.handler.count": 10,
            "hfile.block.cache.size": 0.2,
            # start serving as soon as the (only) RegionServer has checked in
            "hbase.master.wait.on.regionservers.mintostart": 1,
            "hbase.master.wait.on.regionservers.timeout": 1000,
        }
        (conf / "hbase-site.xml").write_text(_site_xml(site))
        (conf / "log4j2.properties").write_text(LOG4J2_PROPERTIES)
        env = self._env(home)
        master_log, thrift_log = home / "master.log", home / "thrift.log"
        for f in (master_log, thrift_log):
            f.unlink(missing_ok=True)

        began = time.time()
        master_pid = base.spawn(
            [*self._jvm(ctx, conf, MASTER_HEAP, "master"),
             "org.apache.hadoop.hbase.master.HMaster", "start"],
            master_log, env=env, cwd=home)
        thrift_pid = None
        try:
            # the embedded ZooKeeper is up first; the Thrift server needs it to find the master
            base.wait_until("hbase: embedded ZooKeeper", lambda: base.port_open(ports["zk_port"]),
                            120, master_log, pid=master_pid)
            thrift_pid = base.spawn(
                [*self._jvm(ctx, conf, THRIFT_HEAP, "thrift"),
                 "org.apache.hadoop.hbase.thrift.ThriftServer",
                 "-b", HOST, "-p", str(ports["port"]), "-threadpool", "start"],
                thrift_log, env=env, cwd=home)
            self._wait_ready(ctx, ports["port"], began + START_TIMEOUT, master_pid, thrift_pid,
                             master_log, thrift_log)
        except BaseException:
            self.stop(ctx, {"master_pid": master_pid, "thrift_pid": thrift_pid})
            raise
        base.log(f"hbase: ready in {time.time() - began:.0f}s")
        return {"host": HOST, **ports, "master_pid": master_pid, "thrift_pid": thrift_pid,
                "version": HBASE_VERSION, "thrift_module_version": THRIFT_MODULE_VERSION,
                "home": str(home)}

    def _wait_ready(self, ctx: base.Ctx, port: int, deadline: float, master_pid: int,
                    thrift_pid: int, master_log: Path, thrift_log: Path) -> None:
        """Until the deadline: a Thrift round trip (create/put/get/drop) must succeed."""
        last = ""
        while time.time() < deadline:
            for what, pid, logf in (("HMaster", master_pid, master_log),
                                    ("Thrift server", thrift_pid, thrift_log)):
                if not base.pid_alive(pid):
                    raise base.ServiceError(f"hbase: the {what} (pid {pid}) died while starting;"
                                            f" log tail ({logf}):\n{base.tail(logf)}")
            if base.port_open(port):
                try:
                    _probe(ctx, port, True, max(5.0, min(60.0, deadline - time.time())))
                    return
                except Exception as e:  # noqa: BLE001 - not ready yet: keep polling
                    last = str(e)
            time.sleep(1)
        why = last.splitlines()[-1] if last else "thrift port never opened"
        raise base.ServiceError(
            f"hbase: not ready after {START_TIMEOUT:.0f}s ({why}); master log tail "
            f"({master_log}):\n{base.tail(master_log)}\n"
            f"thrift log tail ({thrift_log}):\n{base.tail(thrift_log, 15)}")

    def stop(self, ctx: base.Ctx, info: dict) -> None:
        """Thrift first, then the HMaster. SIGTERM is a clean stop for HBase: its shutdown hook
        stops the RegionServer (closing, i.e. flushing, every region), the master and the
        embedded ZooKeeper in about two seconds; SIGKILL only if that hangs."""
        base.stop_pid(info.get("thrift_pid"), timeout=20)
        base.stop_pid(info.get("master_pid"), timeout=60)
        for key, pid in info.items():  # anything else recorded
            if key.endswith("pid") and key not in ("thrift_pid", "master_pid"):
                base.stop_pid(pid)

    def check(self, ctx: base.Ctx, info: dict) -> str:
        for key in ("master_pid", "thrift_pid"):
            if not base.pid_alive(info.get(key)):
                raise base.ServiceError(f"hbase: {key} {info.get(key)} is not running")
        n = _probe(ctx, info["port"], False, 20)
        version = info.get("version", HBASE_VERSION).removesuffix("-hadoop3")
        return f"HBase {version}, thrift ok, {n} tables"


SERVICE = HBase()
