"""Frozen, picklable HBase target settings, built from a canal ``outerAdapters`` entry.

Sluice talks to HBase through its **Thrift1 gateway** (what happybase speaks), not through
ZooKeeper like canal's Java client. The address comes from, in this order:

* ``properties.thrift.host`` / ``properties.thrift.port`` (port default 9090);
* ``hosts: "host:port"`` of the outerAdapters entry (the first one if a list is given);

canal's ``hbase.zookeeper.quorum`` alone is refused with a message saying what to set
(a ZooKeeper address is not a Thrift address). Other properties read:
``thrift.transport`` (buffered | framed), ``thrift.protocol`` (binary | compact),
``thrift.timeout`` (socket timeout, ms, default 60000), ``thrift.idleSeconds``
(reconnect before using a connection idle this long, default 50: the server drops
sockets idle for 60 s), ``thrift.batchMutations`` (mutations per Thrift call, default
20000). Every other property (canal's ``hbase.*``/``zookeeper.*``) is ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sluice_common.errors import ConfigError

DEFAULT_PORT = 9090
TRANSPORTS = ("buffered", "framed")
PROTOCOLS = ("binary", "compact")


@dataclass(frozen=True)
class HbaseTarget:
    """One HBase Thrift1 gateway; frozen and hashable (it keys the per-process connection cache)."""

    host: str
    port: int = DEFAULT_PORT
    transport: str = "buffered"
    protocol: str = "binary"
    timeout_ms: int = 60_000
    idle_seconds: float = 50.0
    batch_mutations: int = 20_000
    key: str = ""  # canal's outerAdapterKey, for messages

    def written_table(self, spec: Any) -> tuple | None:
        """The HBase table an ``hbaseMapping`` (``spec``) writes, as the job's overlap refusals compare
        it (pipeline/job/conflicts.py); None for another kind of mapping."""
        if not hasattr(spec, "hbaseTable"):
            return None
        return ("hbase", self.host, self.port, "", "", spec.hbaseTable)

    @property
    def label(self) -> str:
        """``host:port`` (plus the adapter key): safe for messages and logs."""
        where = f"{self.host}:{self.port}"
        return f"{where} ({self.key})" if self.key else where


def _positive(value: Any, file: str, key: str, kind: type = int) -> Any:
    try:
        n = kind(value)
    except (TypeError, ValueError):
        n = 0
    if isinstance(value, bool) or n <= 0:
        raise ConfigError(file, key, f"must be a positive number, got {value!r}")
    return n


def _split_host(text: str, file: str, key: str) -> tuple[str, int | None]:
    text = text.strip().split(",")[0].strip()
    if not text:
        raise ConfigError(file, key, "is empty; write host:port of the HBase Thrift server")
    host, sep, port = text.rpartition(":")
    if not sep:
        return text, None
    if not host:
        raise ConfigError(file, key, f"{text!r} has no host; write host:port")
    return host, _positive(port, file, key)


def target_of(adapter: Any, file: str, key: str) -> HbaseTarget:
    """The target of one ``outerAdapters`` entry (``name: hbase``); errors name ``file``/``key``."""
    props = dict(getattr(adapter, "properties", None) or {})
    where = f"{key}.properties"
    host, port = None, None
    hosts = getattr(adapter, "hosts", None)
    if props.get("thrift.host"):
        host, port = _split_host(str(props["thrift.host"]), file, f"{where}.thrift.host")
    elif hosts:
        host, port = _split_host(str(hosts), file, f"{key}.hosts")
    elif props.get("hbase.zookeeper.quorum"):
        raise ConfigError(file, f"{where}.hbase.zookeeper.quorum",
                          "is a ZooKeeper address, but Sluice writes to HBase through its Thrift1 gateway",
                          hint="set hosts: <thrift-host>:<port> (or properties thrift.host/thrift.port) to where "
                               "'hbase thrift start' listens")
    else:
        raise ConfigError(file, f"{key}.hosts", "is required: host:port of the HBase Thrift1 server "
                          "(or properties thrift.host/thrift.port)")
    if props.get("thrift.port") is not None:
        port = _positive(props["thrift.port"], file, f"{where}.thrift.port")
    transport = str(props.get("thrift.transport", "buffered")).lower()
    if transport not in TRANSPORTS:
        raise ConfigError(file, f"{where}.thrift.transport", f"must be one of {', '.join(TRANSPORTS)}")
    protocol = str(props.get("thrift.protocol", "binary")).lower()
    if protocol not in PROTOCOLS:
        raise ConfigError(file, f"{where}.thrift.protocol", f"must be one of {', '.join(PROTOCOLS)}")
    kw: dict[str, Any] = {}
    if "thrift.timeout" in props:
        kw["timeout_ms"] = _positive(props["thrift.timeout"], file, f"{where}.thrift.timeout")
    if "thrift.idleSeconds" in props:
        kw["idle_seconds"] = _positive(props["thrift.idleSeconds"], file, f"{where}.thrift.idleSeconds", float)
    if "thrift.batchMutations" in props:
        kw["batch_mutations"] = _positive(props["thrift.batchMutations"], file, f"{where}.thrift.batchMutations")
    return HbaseTarget(host=host, port=port or DEFAULT_PORT, transport=transport, protocol=protocol,
                       key=str(getattr(adapter, "key", None) or ""), **kw)
