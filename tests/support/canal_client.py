"""canal's own code (1.1.7, from Maven Central) for the interop tests: its Kafka client, and its
server's MQ path.

Each runtime's jars are resolved once with Maven into ``$SLUICE_CACHE/canal-<kind>-1.1.7/lib``
(as the services assemble HBase and Kafka), and its small launcher from ``tests/support/canal/``
is compiled next to them:

* ``client``: ``ReadFlat.java`` -- a few lines around ``KafkaCanalConnector`` in flatMessage mode;
* ``server``: ``EmbeddedCanal.java`` -- an embedded canal instance (``canal.server``,
  ``canal.instance.manager``) reading the source's binlog, published by canal's own
  ``CanalKafkaProducer`` (``connector.kafka``), as canal-server does; canal's launcher
  (``canal.deployer``) is not on Maven Central.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VERSION = "1.1.7"
SRC = REPO / "tests" / "support" / "canal"


def _dep(group: str, artifact: str, version: str = VERSION) -> str:
    return f"<dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId><version>{version}</version>" \
           "</dependency>"


DEPS = {
    "client": [_dep("com.alibaba.otter", "canal.client"), _dep("com.alibaba.otter", "canal.protocol"),
               _dep("org.apache.kafka", "kafka-clients", "3.9.2"), _dep("org.slf4j", "slf4j-api", "1.7.36"),
               _dep("com.alibaba", "fastjson", "1.2.83")],
    # canal-server's own dependency set: kafka-clients 2.4.0, fastjson2, logback come with them
    "server": [_dep("com.alibaba.otter", a) for a in ("canal.server", "canal.instance.manager", "canal.protocol",
                                                        "connector.core", "connector.kafka")],
}
MAIN = {"client": "ReadFlat", "server": "EmbeddedCanal"}


def _pom(kind: str) -> str:
    return f"""<project><modelVersion>4.0.0</modelVersion><groupId>sluice.local</groupId>
<artifactId>canal-{kind}-runtime</artifactId><version>{VERSION}</version><packaging>pom</packaging><dependencies>
{chr(10).join(DEPS[kind])}
</dependencies></project>
"""


def home(kind: str = "client") -> Path:
    cache = Path(os.environ.get("SLUICE_CACHE", REPO / ".sluice" / "cache"))
    return cache / f"canal-{kind}-{VERSION}"


def classpath(kind: str = "client") -> str:
    """Resolve (once) the runtime's jars and compile its launcher; the class path to run it."""
    d = home(kind)
    src = SRC / f"{MAIN[kind]}.java"
    cls = d / "classes"
    pom = _pom(kind)
    digest = hashlib.sha256(pom.encode()).hexdigest()
    if not (d / ".complete").exists() or (d / ".complete").read_text().strip() != digest:
        d.mkdir(parents=True, exist_ok=True)
        (d / "pom.xml").write_text(pom)
        shutil.rmtree(d / "lib", ignore_errors=True)
        subprocess.run(["mvn", "-q", "-B", "-f", str(d / "pom.xml"), "dependency:copy-dependencies",
                        f"-DoutputDirectory={d / 'lib'}", "-DincludeScope=runtime"], check=True, timeout=1800,
                       capture_output=True)
        (d / ".complete").write_text(digest + "\n")
    main = cls / f"{MAIN[kind]}.class"
    if not main.exists() or main.stat().st_mtime < src.stat().st_mtime:
        cls.mkdir(parents=True, exist_ok=True)
        subprocess.run(["javac", "-cp", f"{d / 'lib'}/*", "-d", str(cls), str(src)], check=True, timeout=300,
                       capture_output=True)
    return f"{cls}:{d / 'lib'}/*"


def read_flat(bootstrap: str, topic: str, group: str, expected: int, timeout: float = 300) -> list[list[str]]:
    """canal's client reads ``expected`` records of every partition of ``topic``; the parsed FlatMessages
    (database, table, type, isDdl, rows, id, es, old rows, pkNames), one list per record. canal's
    connector starts a new group at the end (``auto.offset.reset=latest``), so the group's offsets
    are set to the start first."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    parts = c.list_topics(topic, timeout=10).topics[topic].partitions
    c.commit(offsets=[TopicPartition(topic, p, 0) for p in parts], asynchronous=False)
    c.close()
    proc = subprocess.run(["java", "-Xmx256m", "-cp", classpath(), "ReadFlat", bootstrap, topic, "-1", group,
                           str(expected)], capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(f"canal client exit {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    lines = proc.stdout.splitlines()
    assert lines and lines[-1].startswith("DONE\t"), proc.stdout[-2000:] + proc.stderr[-2000:]
    return [ln.split("\t")[1:] for ln in lines if ln.startswith("FLAT\t")]


def embedded_canal(props: dict[str, str], workdir: Path, timeout: float = 180,
                   java_opts: tuple[str, ...] = ()) -> list[list[str]]:
    """Run canal's server path once (EmbeddedCanal.java) with canal's properties ``props`` (plus
    ``sluice.until.*`` / ``sluice.idle.seconds`` / ``sluice.max.seconds``); the BATCH lines it printed
    (batch id, entries, binlog file, end position). Fails with its log's tail unless it exits 0."""
    cp = classpath("server")
    path = workdir / "canal.properties"
    # java.util.Properties escapes: a backslash is written doubled
    path.write_text("".join(f"{k}={str(v).replace(chr(92), chr(92) * 2)}\n" for k, v in props.items()))
    proc = subprocess.run(["java", "-Xmx384m", f"-Dlogback.configurationFile={SRC / 'logback.xml'}", *java_opts,
                           "-cp", cp, "EmbeddedCanal", str(path)], capture_output=True, text=True, timeout=timeout,
                          cwd=workdir)
    (workdir / "canal.log").write_text(proc.stderr)
    lines = proc.stdout.splitlines()
    if proc.returncode != 0 or not lines or not lines[-1].startswith("DONE\t"):
        raise AssertionError(f"EmbeddedCanal exit {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-6000:]}")
    return [ln.split("\t")[1:] for ln in lines if ln.startswith("BATCH\t")]
