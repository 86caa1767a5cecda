"""canal's own Kafka client (canal.client 1.1.7 from Maven Central) for the interop tests.

The jars are resolved once with Maven into ``$SLUICE_CACHE/canal-client-1.1.7/lib`` (as the
services assemble HBase and Kafka), and ``tests/support/canal/ReadFlat.java`` -- a few lines around
``KafkaCanalConnector`` in flatMessage mode -- is compiled next to them.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VERSION = "1.1.7"
POM = f"""<project><modelVersion>4.0.0</modelVersion><groupId>sluice.local</groupId>
<artifactId>canal-client-runtime</artifactId><version>{VERSION}</version><packaging>pom</packaging><dependencies>
<dependency><groupId>com.alibaba.otter</groupId><artifactId>canal.client</artifactId><version>{VERSION}</version></dependency>
<dependency><groupId>com.alibaba.otter</groupId><artifactId>canal.protocol</artifactId><version>{VERSION}</version></dependency>
<dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-clients</artifactId><version>3.9.2</version></dependency>
<dependency><groupId>org.slf4j</groupId><artifactId>slf4j-api</artifactId><version>1.7.36</version></dependency>
<dependency><groupId>com.alibaba</groupId><artifactId>fastjson</artifactId><version>1.2.83</version></dependency>
</dependencies></project>
"""


def home() -> Path:
    cache = Path(os.environ.get("SLUICE_CACHE", REPO / ".sluice" / "cache"))
    return cache / f"canal-client-{VERSION}"


def classpath() -> str:
    """Resolve (once) canal's client jars and compile ReadFlat; the class path to run it."""
    d = home()
    src = REPO / "tests" / "support" / "canal" / "ReadFlat.java"
    cls = d / "classes"
    digest = hashlib.sha256(POM.encode()).hexdigest()
    if not (d / ".complete").exists() or (d / ".complete").read_text().strip() != digest:
        d.mkdir(parents=True, exist_ok=True)
        (d / "pom.xml").write_text(POM)
        shutil.rmtree(d / "lib", ignore_errors=True)
        subprocess.run(["mvn", "-q", "-B", "-f", str(d / "pom.xml"), "dependency:copy-dependencies",
                        f"-DoutputDirectory={d / 'lib'}", "-DincludeScope=runtime"], check=True, timeout=1800,
                       capture_output=True)
        (d / ".complete").write_text(digest + "\n")
    if not (cls / "ReadFlat.class").exists() or (cls / "ReadFlat.class").stat().st_mtime < src.stat().st_mtime:
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
