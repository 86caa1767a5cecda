"""canal client-adapter configs (``application.yml`` with a ``canal.conf`` section) as Sluice configs.

A canal adapter in MQ mode (``canal.conf.mode: kafka``) consumes the flatMessage topics
canal-server writes; Sluice accepts that file as its deployment config and applies the same
topics with the same mapping files:

=====================================================  ==================================================
canal                                                  Sluice
=====================================================  ==================================================
``mode: kafka``, ``flatMessage: true``                 ``store.kind: kafka``, ``store.kafka.writtenBy: canal``
``consumerProperties.kafka.bootstrap.servers``         ``store.kafka.bootstrap.servers`` (``mqServers`` too)
``consumerProperties.kafka.security.*``/``sasl.*``     ``store.kafka.properties``
``canalAdapters[0].instance`` (the topic)              ``store.kafka.topic``
``canalAdapters[0].groups[].groupId``                  ``groups[].groupId`` (= the Kafka consumer group)
``groups[].outerAdapters``                             ``groups[].outerAdapters`` (the same keys)
``srcDataSources``                                     ``srcDataSources``; the first one is also ``source``
                                                       (pre-flight checks, ``sluice verify``) unless given
mapping files in ``rdb/``, ``es*/``, ``hbase/``        ``groups[].mappings``, those whose ``destination``
beside the file                                        and ``groupId`` match the group (as canal picks them)
=====================================================  ==================================================

Sluice's own top-level keys (``source``, ``store``, ``spark``, ``metrics``) may sit beside
``canal.conf``; Spring Boot's (``server``, ``spring``, ``logging``, ...) are ignored. Errors name
the canal key (``canal.conf.mode``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from sluice_common.errors import ConfigError

KEY = "canal.conf"
SLUICE_KEYS = ("source", "store", "spark", "metrics")
MAPPING_GLOBS = ("rdb/*.yml", "rdb/*.yaml", "es/*.yml", "es6/*.yml", "es7/*.yml", "es8/*.yml", "hbase/*.yml")
_PASS = ("security.", "sasl.", "ssl.", "client.id", "isolation.level")


def is_canal(raw: Any) -> bool:
    return isinstance(raw, dict) and KEY in raw


def _source_from(ds: dict[str, Any]) -> dict[str, Any]:
    url = str(ds.get("url") or "").strip().removeprefix("jdbc:")
    parts = urlsplit("//" + url.partition("://")[2])
    out: dict[str, Any] = {"host": parts.hostname or "127.0.0.1", "port": parts.port or 3306}
    if ds.get("username"):
        out["user"] = unquote(str(ds["username"]))
    for k in ("password", "passwordFile", "passwordEnv"):
        if ds.get(k) is not None:
            out[k] = ds[k]
    return out


def translate(raw: dict[str, Any], file: str) -> dict[str, Any]:
    """The Sluice config (raw dict) that a canal adapter config describes."""
    conf = raw.get(KEY)
    if not isinstance(conf, dict):
        raise ConfigError(file, KEY, "expected a mapping (canal's adapter settings)")
    mode = str(conf.get("mode") or "tcp").strip()
    if mode.lower() != "kafka":
        raise ConfigError(file, f"{KEY}.mode", f"mode {mode!r} is not supported: Sluice reads canal's Kafka topics",
                          hint="set mode: kafka (canal-server with canal.serverMode = kafka), or use Sluice's own "
                          "capture (a Sluice config with a source section)")
    if conf.get("flatMessage") is not None and str(conf.get("flatMessage")).lower() not in ("true", "1", "yes"):
        raise ConfigError(file, f"{KEY}.flatMessage", "flatMessage: false (protobuf messages) is not supported",
                          hint="let canal-server write flatMessage JSON (canal.mq.flatMessage = true)")
    props = conf.get("consumerProperties") or {}
    if not isinstance(props, dict):
        raise ConfigError(file, f"{KEY}.consumerProperties", "expected a mapping")
    servers = props.get("kafka.bootstrap.servers") or conf.get("mqServers")
    if not servers:
        raise ConfigError(file, f"{KEY}.consumerProperties.kafka.bootstrap.servers", "is missing",
                          hint="the Kafka brokers canal-server writes to, e.g. 127.0.0.1:9092")
    adapters = conf.get("canalAdapters")
    if not isinstance(adapters, list) or not adapters:
        raise ConfigError(file, f"{KEY}.canalAdapters", "lists no adapter (instance and groups)")
    if len(adapters) > 1:
        raise ConfigError(file, f"{KEY}.canalAdapters[1]", "one topic per Sluice deployment: this file lists "
                          f"{len(adapters)} instances", hint="write one config file per topic (instance)")
    first = adapters[0] if isinstance(adapters[0], dict) else {}
    topic = str(first.get("instance") or "").strip()
    if not topic:
        raise ConfigError(file, f"{KEY}.canalAdapters[0].instance", "is missing (the topic canal-server writes)")
    base = Path(file).resolve().parent if file not in ("", "<config>") else Path.cwd()
    globs = [g for g in MAPPING_GLOBS if any(base.glob(g))]
    groups = []
    for gi, g in enumerate(first.get("groups") or []):
        if not isinstance(g, dict) or not g.get("groupId"):
            raise ConfigError(file, f"{KEY}.canalAdapters[0].groups[{gi}].groupId", "is missing")
        groups.append({"groupId": str(g["groupId"]), "outerAdapters": g.get("outerAdapters") or [],
                       "mappings": list(g.get("mappings") or globs), "destination": topic})
    extra = {k.removeprefix("kafka."): str(v) for k, v in props.items()
             if k.startswith("kafka.") and k.removeprefix("kafka.").startswith(_PASS) and v not in (None, "")}
    extra.pop("isolation.level", None)  # Sluice always reads committed records
    out: dict[str, Any] = {k: raw[k] for k in SLUICE_KEYS if k in raw}
    store = dict(out.get("store") or {})
    store["kind"] = "kafka"
    store["kafka"] = {**(store.get("kafka") or {}), "bootstrap.servers": str(servers), "topic": topic,
                      "writtenBy": "canal", **({"properties": extra} if extra else {})}
    out["store"] = store
    sources = conf.get("srcDataSources") or {}
    if sources:
        out["srcDataSources"] = sources
    if "source" not in out:
        ds = next(iter(sources.values()), None) if isinstance(sources, dict) else None
        out["source"] = {"name": topic.replace("/", "_")[:64], **(_source_from(ds) if isinstance(ds, dict) else {})}
    out["groups"] = groups
    return out
