"""The deployment config file (``sluice.yml``), parsed into frozen typed objects.

One file describes a deployment: the binlog source, the batch store, the source data
sources that mappings name (``srcDataSources``, as in canal's launcher), the adapter groups
(``groups[].outerAdapters``, as canal's ``canalAdapters[].groups``) and Spark settings.
Any string value may use ``${VAR}`` or ``${VAR:-default}``; a few keys can be overridden
from the environment (see ``ENV_OVERRIDES``). Passwords come from ``password``,
``passwordFile`` or ``passwordEnv`` and are held as :class:`Secret`, which never prints.
Every error names the file and the key.
"""

from __future__ import annotations

import math
import os
import re
import zoneinfo
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from pipeline.mapping.loader import StrictLoader, read_text
from sluice_common.errors import ConfigError
from sluice_common.secrets import Secret, resolve_password

ENV_OVERRIDES = {
    "SLUICE_SOURCE_HOST": ("source", "host"),
    "SLUICE_SOURCE_PORT": ("source", "port"),
    "SLUICE_SOURCE_USER": ("source", "user"),
    "SLUICE_SOURCE_PASSWORD": ("source", "password"),
    "SLUICE_STORE_PATH": ("store", "path"),
    "SLUICE_SPARK_MASTER": ("spark", "master"),
    "SLUICE_KAFKA_BOOTSTRAP": ("store", "kafka", "bootstrap.servers"),
}
#: pymysql ``ssl`` keys accepted in ``source.ssl`` (a key password is not supported: use an unencrypted key file),
#: and ``disabled`` (true: never TLS, pymysql's ``ssl_disabled``; alone)
SSL_KEYS = ("ca", "capath", "cert", "key", "cipher", "check_hostname", "verify_mode", "disabled")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
#: ssl keys whose value is a file path or a cipher list (a string), and the verify modes pymysql
#: knows by name (any other word silently means its default: no verification without a CA)
SSL_PATHS = ("ca", "capath", "cert", "key", "cipher")
VERIFY_MODES = ("required", "optional", "none")
_WHOLE = re.compile(r"\s*[+-]?[0-9]+\s*")
_NUMBER = re.compile(r"\s*[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\s*")


def _whole(value: Any) -> Any:
    """A whole number: an int, or its digits as text (an environment override is text). YAML's
    true/false (also yes/no/on/off) is a bool, which Python would take as 1/0: refused, as are
    fractions and floats."""
    if isinstance(value, bool) or isinstance(value, float):
        raise ValueError(f"must be a whole number, got {str(value).lower()}")
    if isinstance(value, str):
        if not _WHOLE.fullmatch(value):
            raise ValueError(f"must be a whole number, got {value[:40]!r}")
        return int(value)
    return value


def _seconds(value: Any) -> Any:
    """A number of seconds: an int or float, or a decimal number as text; not a bool."""
    if isinstance(value, bool):
        raise ValueError(f"must be a number of seconds, got {str(value).lower()}")
    if isinstance(value, str):
        if not _NUMBER.fullmatch(value):
            raise ValueError(f"must be a number of seconds, got {value[:40]!r}")
        return float(value)
    return value


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError(f"must be a finite number of seconds, got {value}")
    return value


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


#: a whole number (a bool or a float is refused; digits as text, e.g. from an environment override, are taken)
Int = Annotated[int, BeforeValidator(_whole)]
#: a finite number of seconds (a bool, .inf and .nan are refused)
Seconds = Annotated[float, BeforeValidator(_seconds), AfterValidator(_finite)]
#: a string with something in it (a host, a path, a URL, a Spark master)
Text = Annotated[str, AfterValidator(_not_blank)]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class TableFilter(_Frozen):
    """canal-style table filter: regexes over ``db.table`` (comma-separated or a list)."""

    include: tuple[str, ...] = (".*\\..*",)
    exclude: tuple[str, ...] = ()

    @field_validator("include", "exclude", mode="before")
    @classmethod
    def _split(cls, v: Any, info: ValidationInfo) -> Any:
        if isinstance(v, str):
            v = [p.strip() for p in v.split(",") if p.strip()]
        if v is not None and not isinstance(v, (list, tuple)):
            raise ValueError("must be a regex, a comma-separated string of regexes, or a list of them")
        if info.field_name == "include" and not v:
            raise ValueError("names no table: capture would store nothing (leave the key out to capture every "
                             "table, or write the regexes of the tables to capture)")
        for pattern in v or ():
            if not isinstance(pattern, str):
                raise ValueError(f"{pattern!r} is not a regex (a string)")
            try:
                re.compile(pattern)
            except re.error as e:
                raise ValueError(f"bad regex {pattern!r}: {e}") from None
        return v

    def text(self) -> str:
        """``include a, b; exclude c`` (for messages)."""
        return f"include {', '.join(self.include)}" + (f"; exclude {', '.join(self.exclude)}" if self.exclude else "")

    def matches(self, database: str, table: str) -> bool:
        """True if ``database.table`` is included and not excluded."""
        name = f"{database}.{table}"
        if not any(re.fullmatch(p, name, re.IGNORECASE) for p in self.include):
            return False
        return not any(re.fullmatch(p, name, re.IGNORECASE) for p in self.exclude)


class SourceConfig(_Frozen):
    """The MySQL/MariaDB server whose binlog is captured."""

    name: str = Field("default", pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    host: Text = "127.0.0.1"
    port: Int = Field(3306, ge=1, le=65535)
    user: str = "root"
    password: Secret = Secret("")
    serverId: Int = Field(6401, ge=1, le=2**32 - 1)
    flavor: Literal["auto", "mariadb", "mysql"] = "auto"
    filter: TableFilter = TableFilter()
    #: how capture asks the server for its start: binlog file/pos (auto, file) or the stored GTID (gtid)
    resumeBy: Literal["auto", "gtid", "file"] = "auto"
    heartbeatSeconds: Seconds = Field(5.0, gt=0)
    connectTimeout: Seconds = Field(10.0, gt=0)
    #: pymysql's ssl dict (SSL_KEYS; docs/security.md), or ``{disabled: true}`` (plain text); each value is
    #: checked below, so that an error names ``source.ssl`` and the key, never a type of a union
    ssl: dict[str, Any] | None = None
    #: the source host's operating-system zone by name (what its ``SYSTEM`` time zone is), needed only
    #: to replay into a mirror a DDL statement that ran in a SYSTEM zone with daylight saving time
    #: (pipeline/job/zones.py); checked against the source's offsets
    systemTimeZone: str | None = None

    @field_validator("systemTimeZone")
    @classmethod
    def _zone(cls, v: str | None) -> str | None:
        if v is None:
            return v
        try:
            zoneinfo.ZoneInfo(v)
        except (ValueError, zoneinfo.ZoneInfoNotFoundError):
            raise ValueError(f"{v!r} is no time zone name this machine knows (an IANA name such as "
                             "Europe/Berlin, from /usr/share/zoneinfo)") from None
        return v

    @field_validator("ssl")
    @classmethod
    def _ssl(cls, v: dict[str, Any] | None) -> dict[str, str | bool] | None:
        for k, value in (v or {}).items():
            if k not in SSL_KEYS:
                raise ValueError(f"unknown ssl key {k!r} (known: {', '.join(SSL_KEYS)})")
            if k in SSL_PATHS and (not isinstance(value, str) or not value.strip()):
                raise ValueError(f"ssl.{k} must be a file path{' or cipher list' if k == 'cipher' else ''} "
                                 f"(a string), got {repr(value)[:40]}")
            if k == "verify_mode" and (not isinstance(value, str) or value.strip().lower() not in VERIFY_MODES):
                raise ValueError(f"ssl.verify_mode must be one of {', '.join(VERIFY_MODES)}, got {repr(value)[:40]}")
            if k == "verify_mode":
                v = {**v, k: value.strip().lower()}  # pymysql compares the lower-cased text as it is
            if k in ("check_hostname", "disabled") and not isinstance(value, bool):
                flag = str(value).strip().lower()
                if flag not in ("true", "false", "yes", "no", "1", "0"):
                    raise ValueError(f"ssl.{k} must be true or false, got {repr(value)[:40]}")
                v = {**v, k: flag in ("true", "yes", "1")}  # pymysql would take the string "false" as true
        if v and "disabled" in v:
            others = [k for k in v if k != "disabled"]
            if v["disabled"] and others:
                raise ValueError(f"ssl.disabled: true (never TLS) excludes the other ssl keys ({', '.join(others)})")
            if not v["disabled"]:  # the default: TLS when the server offers it
                v = {k: v[k] for k in others}
        return v


class BatchLimits(_Frozen):
    """When a batch is cut: whole transactions up to these limits."""

    maxRows: Int = Field(20000, ge=1)
    maxBytes: Int = Field(32 * 1024 * 1024, ge=1024)
    maxSeconds: Seconds = Field(5.0, gt=0)


class KafkaStoreConfig(_Frozen):
    """The Kafka change log (``store.kind: kafka``): topics and partitioning as canal's MQ mode
    (``canal.mq.topic``, ``dynamicTopic``, ``partitionsNum``, ``partitionHash``); docs/kafka.md."""

    bootstrap_servers: Text = Field(alias="bootstrap.servers", min_length=1)
    #: the default topic (canal.mq.topic); unset: the source's name
    topic: str | None = Field(None, pattern=r"^[A-Za-z0-9._-]{1,200}$")
    #: canal.mq.dynamicTopic: ``topic:regex`` or ``regex`` items separated by ``,`` or ``;``
    dynamicTopic: str | None = None
    #: canal.mq.partitionsNum: partitions of each topic capture creates
    partitionsNum: Int = Field(1, ge=1, le=10000)
    #: canal.mq.partitionHash: ``db.table:pk1^pk2``, ``regex:$pk$`` or ``db.table`` (table hash) items
    partitionHash: str | None = None
    #: canal.mq.database.hash: mix the database name into a row's partition hash (canal's default)
    databaseHash: bool = True
    #: who writes the topics: ``sluice`` (Sluice's capture) or ``canal`` (canal-server; Sluice only reads)
    writtenBy: Literal["sluice", "canal"] = "sluice"
    #: the topic of the batch records (positions, offsets); unset: ``<topic>.sluice-batches``
    batchTopic: str | None = Field(None, pattern=r"^[A-Za-z0-9._-]{1,249}$")
    replicationFactor: Int = Field(1, ge=1, le=32)
    #: more Kafka client settings (librdkafka names), for the producer and the consumers
    properties: dict[str, str] = {}

    @field_validator("properties", mode="before")
    @classmethod
    def _strings(cls, v: Any) -> Any:
        if isinstance(v, dict):
            return {str(k): str(x).lower() if isinstance(x, bool) else str(x) for k, x in v.items() if x is not None}
        return v


class StoreConfig(_Frozen):
    """Where batches live: files (one folder per source below ``path``) or Kafka topics. With
    Kafka, ``path`` still holds the driver's own files (locks, run log, dead letters)."""

    kind: Literal["files", "kafka"] = "files"
    path: Text = ".sluice/store"
    batch: BatchLimits = BatchLimits()
    retain: Int = Field(0, ge=0)
    kafka: KafkaStoreConfig | None = None

    @model_validator(mode="after")
    def _kafka_section(self) -> StoreConfig:
        if self.kind == "kafka" and self.kafka is None:
            raise ValueError("store.kind is kafka but there is no store.kafka section (bootstrap.servers, topic, ...)")
        return self


class DataSource(_Frozen):
    """A database connection mappings name by key (``dataSourceKey``)."""

    url: Text
    username: str | None = None
    password: Secret = Secret("")

    @field_validator("url")
    @classmethod
    def _parsable(cls, v: str) -> str:
        try:
            _ = urlsplit("//" + v.strip().removeprefix("jdbc:").partition("://")[2]).port
        except ValueError as e:  # a bad port or an unclosed IPv6 bracket: refused here, named by key
            raise ValueError(f"is not a valid URL: {e}") from None
        return v


class OuterAdapter(_Frozen):
    """One target of a group (canal's ``outerAdapters`` entry)."""

    name: Literal["rdb", "es", "es7", "es8", "opensearch", "hbase", "logger"]
    key: Text | None = None
    hosts: str | None = None
    properties: dict[str, Any] = {}


class GroupConfig(_Frozen):
    """A consumer group: its own ack cursor, adapters and mapping files."""

    groupId: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    outerAdapters: tuple[OuterAdapter, ...] = ()
    mappings: tuple[Text, ...] = ()
    #: canal's ``destination`` (instance or topic): only mapping files with this destination (or none) and
    #: this groupId (or none) belong to the group, as in canal's adapter (set for canal configs)
    destination: str | None = None


class SparkConfig(_Frozen):
    """How the apply job runs."""

    master: Text = "local[*]"
    #: partitions of a round with more than ``smallRows`` rows
    partitions: Int = Field(8, ge=1)
    #: a run or round with at most this many pending rows is small: one partition (no shuffle,
    #: no sort), and a driver JVM with C1-only JIT when ``sluice run``/``sync`` start it (0: none)
    smallRows: Int = Field(10000, ge=0)
    #: a sync applies and acks its pending batches in rounds of at most this many rows (a round
    #: takes at least one batch; pipeline/job/rounds.py); 0: rounds are not bounded (each takes
    #: ``--max-batches`` batches, as a single round took everything before rounds were bounded)
    roundRows: Int = Field(100000, ge=0)
    #: ... and of about this many seconds at the rate recent rounds reached
    roundSeconds: Seconds = Field(10.0, gt=0)
    #: a segment whose keys all compare exactly (any number of partitions), from a files store: each task
    #: reads the round's files and keeps its own keys (no shuffle; pipeline/job/scan.py); false: Spark
    #: reads, splits and shuffles the rows (pipeline/job/plan.py)
    scan: bool = True
    conf: dict[str, str] = {}


class MetricsConfig(_Frozen):
    """Where each ``sluice run`` writes its metrics (paths relative to the config file; unset: not written)."""

    #: Prometheus text format, for node-exporter's textfile collector (a ``.prom`` file)
    textfile: Text | None = None
    #: the same numbers as one JSON document
    json_: Text | None = Field(None, alias="json")
    #: runs kept in the store's run log (``<store>/runs.jsonl``)
    keepRuns: Int = Field(1000, ge=10)


class Config(_Frozen):
    """A whole deployment."""

    source: SourceConfig = SourceConfig()
    store: StoreConfig = StoreConfig()
    srcDataSources: dict[str, DataSource] = {}
    groups: tuple[GroupConfig, ...] = ()
    spark: SparkConfig = SparkConfig()
    metrics: MetricsConfig = MetricsConfig()
    #: the file this was read from (for error messages and relative paths)
    file: str = Field("<config>", exclude=True)

    @field_validator("groups")
    @classmethod
    def _unique_groups(cls, groups: tuple[GroupConfig, ...]) -> tuple[GroupConfig, ...]:
        seen = set()
        for g in groups:
            if g.groupId in seen:
                raise ValueError(f"groupId {g.groupId!r} appears twice")
            seen.add(g.groupId)
        return groups

    def store_dir(self) -> Path:
        """The batch store folder of this source (relative paths: to the config file)."""
        base = Path(self.store.path)
        if not base.is_absolute() and self.file not in ("<config>", ""):
            base = Path(self.file).resolve().parent / base
        return base / self.source.name

    def path(self, value: str) -> Path:
        """A path from the config, relative to the config file's folder."""
        p = Path(value)
        if not p.is_absolute() and self.file not in ("<config>", ""):
            p = Path(self.file).resolve().parent / p
        return p

    def group(self, group_id: str) -> GroupConfig:
        """The group with this id, or a ConfigError listing the known ones."""
        for g in self.groups:
            if g.groupId == group_id:
                return g
        known = ", ".join(g.groupId for g in self.groups) or "none"
        raise ConfigError(self.file, "groups", f"no group {group_id!r} (known: {known})")


def _interpolate(value: Any, file: str, key: str) -> Any:
    if isinstance(value, dict):
        return {k: _interpolate(v, file, f"{key}.{k}" if key else str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate(v, file, f"{key}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, str):
        def sub(m: re.Match) -> str:
            var, default = m.group(1), m.group(2)
            if var in os.environ:
                return os.environ[var]
            if default is not None:
                return default
            raise ConfigError(file, key, f"environment variable {var} is not set",
                              hint=f"export {var}=... or write ${{{var}:-default}}")
        return _VAR.sub(sub, value)
    return value


def _apply_passwords(raw: dict, file: str) -> None:
    """Turn password/passwordFile/passwordEnv into one ``password`` Secret per section."""
    sections = [("source", raw.get("source"))]
    sources = raw.get("srcDataSources")
    if isinstance(sources, dict):  # anything else is refused by validation, naming the key
        sections += [(f"srcDataSources.{k}", v) for k, v in sources.items()]
    for where, sec in sections:
        if isinstance(sec, dict):
            sec["password"] = resolve_password(sec, file, where)


def _error_key(loc: tuple) -> str:
    return ".".join(str(p) if not isinstance(p, int) else f"[{p}]" for p in loc).replace(".[", "[")


def parse_config(raw: Any, file: str = "<config>", env: dict[str, str] | None = None) -> Config:
    """Validate a loaded YAML document into a Config; errors name ``file`` and the key."""
    env = os.environ if env is None else env
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(file, None, f"expected a mapping at the top, got {type(raw).__name__}")
    raw = _interpolate(raw, file, "")
    from pipeline.canal_conf import is_canal, translate

    if is_canal(raw):  # canal's client-adapter application.yml, MQ mode (pipeline/canal_conf.py)
        raw = translate(raw, file)
    for var, (section, *keys) in ENV_OVERRIDES.items():
        if var in env:
            sec = raw.setdefault(section, {})
            if not isinstance(sec, dict):
                raise ConfigError(file, section, "expected a mapping")
            for k in keys[:-1]:
                if not isinstance(sec.get(k), dict):
                    break
                sec = sec[k]
            else:
                sec[keys[-1]] = env[var]
            key = keys[-1]
            if key == "password":
                sec.pop("passwordFile", None)
                sec.pop("passwordEnv", None)
    _apply_passwords(raw, file)
    try:
        return Config.model_validate({**raw, "file": file})
    except ValidationError as e:
        err = e.errors()[0]
        more = f" (and {len(e.errors()) - 1} more problem(s))" if len(e.errors()) > 1 else ""
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key (check the spelling; see docs/config.md)"
        raise ConfigError(file, _error_key(err["loc"]) or None, msg + more) from None


def load_config(path: str | os.PathLike) -> Config:
    """Read and validate a config file."""
    file = str(path)
    text = read_text(Path(path), file, "config")
    try:
        raw = yaml.load(text, Loader=StrictLoader)  # noqa: S506 - a SafeLoader subclass (duplicate keys refused)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise ConfigError(file, None, f"{where}not valid YAML ({getattr(e, 'problem', e)})") from None
    except RecursionError:
        raise ConfigError(file, None, "not a usable YAML document: it is nested too deeply") from None
    if raw is None:  # an empty file (or only comments): every default would point at a server nobody meant
        raise ConfigError(file, None, "the file is empty (no source, store or groups)",
                          hint="start from examples/sluice.yml; docs/config.md lists every key")
    try:
        return parse_config(raw, file)
    except RecursionError:
        raise ConfigError(file, None, "a value is nested too deeply") from None
