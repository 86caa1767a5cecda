"""Apache Kafka 4.1 in KRaft mode (one node that is broker and controller, no ZooKeeper) on
private loopback ports (stdlib only).

There is no Kafka tarball on Maven Central, so the runtime is assembled like HBase's: a small
pom under the cache depends on ``kafka_2.13`` (the broker), ``kafka-tools`` (the command-line
tools: ``kafka-consumer-groups``, ``kafka-topics``, ...) and a log4j2 SLF4J binding, and
``mvn dependency:copy-dependencies`` copies the closure into ``lib/``. The log directory is
formatted once (``kafka.tools.StorageTool format``) and kept across stop/start/restart in the
same services dir, so a restart is a real broker restart with its data (the fault tests rely
on it). ``<home>/bin/kafka-consumer-groups`` and ``kafka-topics`` run the tools against it.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

from scripts.svc import base

KAFKA_VERSION = os.environ.get("SLUICE_KAFKA_VERSION", "4.1.1")
LOG4J2_VERSION = "2.24.3"  # what kafka 4.1 declares
HEAP = os.environ.get("SLUICE_KAFKA_HEAP", "512m")
START_TIMEOUT = 120.0
HOST = "127.0.0.1"
TOOLS = {"kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
         "kafka-topics": "org.apache.kafka.tools.TopicCommand",
         "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
         "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand"}

LOG4J2_PROPERTIES = """\
# written by scripts/svc/kafka.py: everything to stdout (the service log file)
status = warn
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_OUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{ISO8601} %-5p [%t] %c{1}: %.1000m%n
rootLogger = INFO,console
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.org.name = org.apache.kafka
logger.org.level = WARN
logger.state.name = state.change.logger
logger.state.level = WARN
"""

# A real round trip: the broker answers metadata and has registered itself.
PROBE = """\
import sys
from confluent_kafka.admin import AdminClient
a = AdminClient({"bootstrap.servers": sys.argv[1], "socket.timeout.ms": 5000})
md = a.list_topics(timeout=float(sys.argv[2]))
assert md.brokers, "no broker registered"
print(len([t for t in md.topics if not t.startswith("__")]))
"""


def _pom() -> str:
    deps = [("org.apache.kafka", "kafka_2.13", KAFKA_VERSION), ("org.apache.kafka", "kafka-tools", KAFKA_VERSION),
            ("org.apache.logging.log4j", "log4j-slf4j-impl", LOG4J2_VERSION)]
    body = "".join(f"    <dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version>"
                   "</dependency>\n" for g, a, v in deps)
    return ("<project>\n  <modelVersion>4.0.0</modelVersion>\n"
            "  <groupId>sluice.local</groupId><artifactId>kafka-runtime</artifactId>"
            f"<version>{KAFKA_VERSION}</version><packaging>pom</packaging>\n"
            f"  <dependencies>\n{body}  </dependencies>\n</project>\n")


def dist(ctx: base.Ctx) -> Path:
    """Where the broker's jars are cached."""
    return ctx.cache / f"kafka-{KAFKA_VERSION}"


def classpath(ctx: base.Ctx) -> str:
    """The broker's (and the tools') class path."""
    return os.pathsep.join(str(p) for p in sorted((dist(ctx) / "lib").glob("*.jar")))


def _java() -> str:
    java = Path(base.JAVA17_HOME) / "bin" / "java"
    return str(java) if java.exists() else "java"


def _cluster_id() -> str:
    """A Kafka Uuid: 16 random bytes, URL-safe base64 without padding.

    Like Kafka's own Uuid.randomUuid, never one that starts with '-': the storage tool's
    argument parser would take it for an option (1 in 64 ids; it failed a CI run).
    """
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def _probe(ctx: base.Ctx, port: int, timeout: float) -> int:
    proc = base.run([ctx.venv_python, "-c", PROBE, f"{HOST}:{port}", str(timeout)], check=False,
                    timeout=timeout + 10)
    if proc.returncode != 0:
        raise base.ServiceError(f"kafka probe failed: {(proc.stdout or '').strip()[-1500:]}")
    return int(proc.stdout.strip().splitlines()[-1])


class Kafka(base.Service):
    name = "kafka"

    def install(self, ctx: base.Ctx) -> None:
        d = dist(ctx)
        pom = _pom()
        stamp = d / ".complete"
        digest = hashlib.sha256(pom.encode()).hexdigest()
        if stamp.exists() and stamp.read_text().strip() == digest and any((d / "lib").glob("kafka_2.13-*.jar")):
            return
        if shutil.which("mvn") is None:
            raise base.ServiceError("Maven (mvn) is needed to fetch the Kafka jars")
        base.log(f"kafka: resolving Apache Kafka {KAFKA_VERSION} jars with Maven")
        d.mkdir(parents=True, exist_ok=True)
        (d / "pom.xml").write_text(pom)
        tmp = d / ".lib.partial"
        shutil.rmtree(tmp, ignore_errors=True)
        base.run(["mvn", "-q", "-B", "-f", str(d / "pom.xml"), "dependency:copy-dependencies",
                  f"-DoutputDirectory={tmp}", "-DincludeScope=runtime"], timeout=1800)
        if not any(tmp.glob("kafka_2.13-*.jar")):
            raise base.ServiceError(f"Maven left no Kafka broker jar in {tmp}")
        shutil.rmtree(d / "lib", ignore_errors=True)
        tmp.rename(d / "lib")
        stamp.write_text(digest + "\n")

    def _jvm(self, ctx: base.Ctx, home: Path, heap: str) -> list[str]:
        return [_java(), f"-Xmx{heap}", f"-Xms{heap}", "-XX:+UseG1GC", "-Djava.net.preferIPv4Stack=true",
                "-Djava.awt.headless=true", f"-Djava.io.tmpdir={home / 'tmp'}",
                f"-Dlog4j2.configurationFile={home / 'conf' / 'log4j2.properties'}",
                "-cp", classpath(ctx)]

    def _env(self, home: Path) -> dict:
        return {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8",
                "HOME": str(home / "tmp"), "JAVA_HOME": base.JAVA17_HOME, "MALLOC_ARENA_MAX": "4"}

    def _properties(self, home: Path, port: int, cport: int) -> str:
        props = {
            "process.roles": "broker,controller",
            "node.id": 1,
            "controller.quorum.voters": f"1@{HOST}:{cport}",
            "listeners": f"PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{cport}",
            "advertised.listeners": f"PLAINTEXT://{HOST}:{port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(home / "data"),
            "num.partitions": 1,
            "default.replication.factor": 1,
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 4,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "transaction.state.log.num.partitions": 4,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            "group.initial.rebalance.delay.ms": 0,
            "auto.create.topics.enable": "false",
            # the retention test shrinks a topic's retention: let the broker look often
            "log.retention.check.interval.ms": 2000,
            "log.segment.delete.delay.ms": 0,
            "num.network.threads": 2,
            "num.io.threads": 4,
            "num.recovery.threads.per.data.dir": 1,
        }
        return "# written by scripts/svc/kafka.py on every start\n" + "".join(f"{k}={v}\n" for k, v in props.items())

    def _tools(self, ctx: base.Ctx, home: Path, port: int) -> None:
        """Wrapper scripts for the command-line tools, bound to this broker."""
        bindir = home / "bin"
        bindir.mkdir(parents=True, exist_ok=True)
        for name, cls in TOOLS.items():
            script = bindir / name
            log4j = home / "conf" / "log4j2.properties"
            script.write_text("#!/bin/sh\n# written by scripts/svc/kafka.py: Kafka's tool against the suite's broker\n"
                              f"exec {_java()} -Xmx256m -Dlog4j2.configurationFile={log4j}"
                              f" -cp '{classpath(ctx)}' {cls} --bootstrap-server {HOST}:{port} \"$@\"\n")
            script.chmod(0o755)

    def start(self, ctx: base.Ctx) -> dict:
        home = ctx.home(self.name)
        port = ctx.port(self.name)
        cport = ctx.port(self.name, "controller_port")
        while cport == port:
            cport = ctx.port(self.name, "controller_port")
        for sub in ("conf", "tmp", "data"):
            (home / sub).mkdir(parents=True, exist_ok=True)
        conf = home / "conf"
        (conf / "server.properties").write_text(self._properties(home, port, cport))
        (conf / "log4j2.properties").write_text(LOG4J2_PROPERTIES)
        env = self._env(home)
        if not (home / "data" / "meta.properties").exists():
            shutil.rmtree(home / "data", ignore_errors=True)
            base.run([*self._jvm(ctx, home, "256m"), "kafka.tools.StorageTool", "format", "-t", _cluster_id(),
                      "-c", str(conf / "server.properties")], env=env, timeout=120)
        self._tools(ctx, home, port)
        logf = home / "kafka.log"
        began = time.time()
        pid = base.spawn([*self._jvm(ctx, home, HEAP), "kafka.Kafka", str(conf / "server.properties")], logf,
                         env=env, cwd=home)
        try:
            self._wait_ready(ctx, port, began + START_TIMEOUT, pid, logf)
        except BaseException:
            base.stop_pid(pid)
            raise
        base.log(f"kafka: ready in {time.time() - began:.0f}s")
        return {"host": HOST, "port": port, "controller_port": cport, "pid": pid, "version": KAFKA_VERSION,
                "bootstrap": f"{HOST}:{port}", "home": str(home), "bin": str(home / "bin")}

    def _wait_ready(self, ctx: base.Ctx, port: int, deadline: float, pid: int, logf: Path) -> None:
        last = ""
        while time.time() < deadline:
            if not base.pid_alive(pid):
                raise base.ServiceError(f"kafka: the broker (pid {pid}) died while starting; log tail ({logf}):\n"
                                        f"{base.tail(logf)}")
            if base.port_open(port):
                try:
                    _probe(ctx, port, max(5.0, min(30.0, deadline - time.time())))
                    return
                except (base.ServiceError, subprocess.TimeoutExpired) as e:
                    last = str(e)
            time.sleep(1)
        why = (last.splitlines() or ["port closed"])[-1]
        raise base.ServiceError(f"kafka: not ready after {START_TIMEOUT:.0f}s ({why}); log tail ({logf}):\n"
                                f"{base.tail(logf)}")

    def stop(self, ctx: base.Ctx, info: dict) -> None:
        """SIGTERM is Kafka's clean shutdown (it closes and flushes every log); SIGKILL if it hangs."""
        base.stop_pid(info.get("pid"), timeout=60)

    def check(self, ctx: base.Ctx, info: dict) -> str:
        if not base.pid_alive(info.get("pid")):
            raise base.ServiceError(f"kafka: broker pid {info.get('pid')} is not running")
        n = _probe(ctx, info["port"], 20)
        return f"Kafka {info.get('version', KAFKA_VERSION)} (KRaft), {n} topics"


SERVICE = Kafka()
