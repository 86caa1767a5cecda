"""Frozen, picklable search-server target settings, and the source databases to re-query.

:class:`EsTarget` is one canal ``outerAdapters`` entry with ``name: es``/``es7``/``es8`` (an
Elasticsearch cluster) or ``name: opensearch`` (an OpenSearch cluster, adapters/opensearch);
both are parsed here, with the same keys::

    - name: es8
      key: es1
      hosts: 127.0.0.1:9200            # comma-separated; http:// is assumed, https:// may be given
      properties:
        mode: rest                     # the only mode (ES 8 has no transport client)
        security.auth: user:password   # basic auth (or security.authEnv: VAR holding user:password)
        security.ca.path: /etc/es/ca.crt   # TLS (https:// hosts): the CA that signed the server cert
        security.verify: true          # false: do not verify the server certificate (testing only)
        security.cert.path: /etc/es/client.crt   # client certificate (mutual TLS), PEM
        security.key.path: /etc/es/client.key    # its private key (omit when inside the cert file)
        cluster.name: my-cluster       # when given, check() verifies it

It also carries the source databases (:class:`SourceDb`) that join/computed mappings are
re-queried from: every ``srcDataSources`` entry of the deployment config, and the config's
``source`` section as the fallback for mappings whose ``dataSourceKey`` is absent (or is
``defaultDS`` without such an entry). Passwords are :class:`Secret`: never printed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from sluice_common.errors import ConfigError
from sluice_common.secrets import Secret

DEFAULT_DS = "defaultDS"


@dataclass(frozen=True)
class SourceDb:
    """A MySQL/MariaDB server the mapping SQL is re-run on (``database`` None: not fixed)."""

    host: str
    port: int = 3306
    user: str = "root"
    password: Secret = field(default_factory=lambda: Secret(""))
    database: str | None = None
    connect_timeout: float = 10.0
    name: str = "source"  # the dataSourceKey (or "source"), for messages
    #: the source's TLS settings (``source.ssl`` as sorted items; empty: none), for the same server
    ssl: tuple[tuple[str, Any], ...] = ()

    @property
    def label(self) -> str:
        """user@host:port/db, without the password."""
        return f"{self.user}@{self.host}:{self.port}/{self.database or ''} ({self.name})"

    @classmethod
    def from_url(cls, url: str, username: str | None, password: Secret, name: str, file: str,
                 key: str) -> SourceDb:
        """From canal's ``jdbc:mysql://host:3306/db?...`` (also ``jdbc:mariadb:`` and ``mysql://``)."""
        text = url.strip()
        if text.startswith("jdbc:"):
            text = text[5:]
        scheme, sep, rest = text.partition("://")
        if not sep or scheme.split("+")[0] not in ("mysql", "mariadb"):
            raise ConfigError(file, key, "must be a MySQL/MariaDB URL such as jdbc:mysql://host:3306/db "
                              f"(the search adapter re-queries it), got {url!r}")
        try:
            parts = urlsplit("//" + rest)
            port = parts.port or 3306
        except ValueError as e:  # a bad port, or an unclosed IPv6 bracket
            raise ConfigError(file, key, f"is not a valid URL: {e}") from None
        params = dict(parse_qsl(parts.query))
        user = username or params.get("user") or unquote(parts.username or "") or "root"
        pw = password if password else Secret(params.get("password") or unquote(parts.password or ""))
        db = unquote(parts.path.lstrip("/")) or None
        return cls(parts.hostname or "127.0.0.1", port, user, pw, db, name=name)


def database_of_url(url: str | None) -> str | None:
    """The database named by a data-source URL (``jdbc:mysql://h:3306/db?x`` -> ``db``)."""
    if not url:
        return None
    rest = url.strip().removeprefix("jdbc:").partition("://")[2]
    return unquote(urlsplit("//" + rest).path.lstrip("/")) or None if rest else None


#: target.product -> the server's name in messages
PRODUCTS = {"elasticsearch": "Elasticsearch", "opensearch": "OpenSearch"}


@dataclass(frozen=True)
class EsTarget:
    """One Elasticsearch or OpenSearch cluster; frozen and hashable (it keys the per-process
    client cache). ``product`` picks the client library (adapters/es/api.py)."""

    hosts: tuple[str, ...]
    username: str | None = None
    password: Secret = field(default_factory=lambda: Secret(""))
    ca_path: str | None = None
    verify_certs: bool = True
    cluster_name: str | None = None
    request_timeout: float = 60.0
    #: bytes of one bulk request before it is split (actions stay in order across requests)
    bulk_bytes: int = 8 << 20
    #: in-writer retries of a bulk whose items got 429/503 before TransientError is raised
    item_retries: int = 3
    sources: tuple[tuple[str, SourceDb], ...] = ()
    default_source: SourceDb | None = None
    key: str = ""
    #: client certificate and key for mutual TLS (PEM files)
    client_cert: str | None = None
    client_key: str | None = None
    #: "elasticsearch" (elasticsearch-py) or "opensearch" (opensearch-py)
    product: str = "elasticsearch"

    def written_table(self, spec: Any) -> tuple | None:
        """None: several mappings writing one index is how canal's parent/child joins work, so the
        job's overlap refusals (pipeline/job/conflicts.py) leave Elasticsearch/OpenSearch out."""
        return None

    @property
    def label(self) -> str:
        """The hosts without credentials (for messages and logs)."""
        return ",".join(self.hosts) + (f" ({self.key})" if self.key else "")

    @property
    def product_name(self) -> str:
        """The product's name for messages: Elasticsearch or OpenSearch."""
        return PRODUCTS.get(self.product, self.product)

    def client_kwargs(self) -> dict[str, Any]:
        """Arguments for this product's client class (holds the password: never log it)."""
        from adapters.es.api import client_module

        return client_module(self).client_kwargs(self)

    def source_for(self, mapping: Any) -> SourceDb:
        """The source database of a mapping: ``srcDataSources[dataSourceKey]`` (absent key:
        ``defaultDS``, canal's default); for ``defaultDS`` without an entry, the config's
        ``source`` section; any other unknown key is a ConfigError."""
        key = getattr(mapping, "dataSourceKey", None) or DEFAULT_DS
        found = dict(self.sources).get(key)
        if found is not None:
            return found
        if key == DEFAULT_DS and self.default_source is not None:
            return self.default_source
        known = ", ".join(k for k, _ in self.sources) or "none"
        raise ConfigError(getattr(mapping, "file", "<mapping>"), "dataSourceKey",
                          f"data source {key!r} is not in srcDataSources (known: {known}); the "
                          f"{self.product_name} adapter re-queries the source through it",
                          hint="add it to srcDataSources of the deployment config, or omit dataSourceKey "
                          "to use the config's source section")


def _hosts(text: Any, file: str, key: str, product: str) -> tuple[str, ...]:
    if not text or not isinstance(text, str):
        raise ConfigError(file, key, f"is required: the {PRODUCTS[product]} HTTP address(es), e.g. 127.0.0.1:9200")
    out = []
    for h in (p.strip() for p in text.split(",")):
        if not h:
            continue
        url = h if "://" in h else f"http://{h}"
        try:
            parts = urlsplit(url)
        except ValueError as e:  # an unclosed IPv6 bracket
            raise ConfigError(file, key, f"{h!r} is not an HTTP address: {e}") from None
        if parts.username or parts.password:
            raise ConfigError(file, key, "must not contain credentials; use properties.security.auth")
        try:
            port = parts.port
        except ValueError:
            raise ConfigError(file, key, f"{h!r} has an invalid port") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(file, key, f"{h!r} is not an HTTP address (host:port or https://host:port)")
        out.append(f"{parts.scheme}://{parts.hostname}:{port or 9200}")
    if not out:
        raise ConfigError(file, key, "lists no host")
    return tuple(out)


def _auth(props: dict, file: str, where: str) -> tuple[str | None, Secret]:
    auth = props.get("security.auth")
    if auth in (None, "") and props.get("security.authEnv"):
        var = str(props["security.authEnv"])
        if var not in os.environ:
            raise ConfigError(file, f"{where}.security.authEnv", f"environment variable {var} is not set")
        auth = os.environ[var]
    if auth in (None, ""):
        return None, Secret("")
    text = auth.reveal() if isinstance(auth, Secret) else str(auth)
    user, sep, pw = text.partition(":")
    if not sep or not user:
        raise ConfigError(file, f"{where}.security.auth", "must be user:password")
    return user, Secret(pw)


def sources_of(cfg: Any) -> tuple[tuple[tuple[str, SourceDb], ...], SourceDb | None]:
    """The deployment's ``srcDataSources`` and its ``source`` section as :class:`SourceDb`."""
    if cfg is None:
        return (), None
    file = getattr(cfg, "file", "<config>")
    s = getattr(cfg, "source", None)
    ssl = tuple(sorted((getattr(s, "ssl", None) or {}).items()))
    out = []
    for name, ds in (getattr(cfg, "srcDataSources", None) or {}).items():
        db = SourceDb.from_url(ds.url, ds.username, ds.password, name, file, f"srcDataSources.{name}.url")
        if s is not None and ssl and (db.host, db.port) == (s.host, s.port):  # the source server: its TLS
            db = replace(db, ssl=ssl)
        out.append((name, db))
    default = None if s is None else SourceDb(s.host, s.port, s.user, s.password, None,
                                              float(s.connectTimeout), "source", ssl)
    return tuple(out), default


def target_of(adapter: Any, file: str, key: str, cfg: Any = None, product: str = "elasticsearch") -> EsTarget:
    """The target of one ``outerAdapters`` entry for ``product`` (elasticsearch, opensearch);
    errors name ``file`` and ``key``."""
    props = dict(getattr(adapter, "properties", None) or {})
    where = f"{key}.properties"
    mode = str(props.get("mode", "rest")).lower()
    if mode != "rest":
        why = "Elasticsearch 8 has no transport client" if product == "elasticsearch" else \
            "Sluice talks to OpenSearch over REST only"
        raise ConfigError(file, f"{where}.mode", f"mode {mode!r} is not supported: {why}",
                          hint="use mode: rest and the HTTP port in hosts (e.g. :9200)")
    hosts = _hosts(getattr(adapter, "hosts", None) or props.get("hosts"), file, f"{key}.hosts", product)
    user, password = _auth(props, file, where)
    verify, tls = _tls(props, hosts, file, where)
    try:
        timeout = float(props.get("requestTimeout", 60))
        bulk_bytes = int(props.get("bulkBytes", 8 << 20))
    except (TypeError, ValueError):
        raise ConfigError(file, where, "requestTimeout and bulkBytes must be numbers") from None
    sources, default = sources_of(cfg)
    target = EsTarget(hosts, user, password, tls["security.ca.path"], verify,
                      props.get("cluster.name") or None, timeout, bulk_bytes, sources=sources,
                      default_source=default, key=getattr(adapter, "key", None) or "",
                      client_cert=tls["security.cert.path"], client_key=tls["security.key.path"], product=product)
    return target


def _tls(props: dict, hosts: tuple[str, ...], file: str, where: str) -> tuple[bool, dict[str, str | None]]:
    """``security.verify`` and the TLS file paths; TLS files need https:// hosts."""
    raw_verify = props.get("security.verify", True)
    text = str(raw_verify).strip().lower()
    if text not in ("true", "false", "1", "0", "yes", "no"):
        raise ConfigError(file, f"{where}.security.verify", f"must be true or false, got {raw_verify!r}")
    files: dict[str, str | None] = {}
    for k in ("security.ca.path", "security.cert.path", "security.key.path"):
        v = props.get(k)
        if v is not None and not isinstance(v, str):
            raise ConfigError(file, f"{where}.{k}", "must be a file path")
        files[k] = v or None
    if files["security.key.path"] and not files["security.cert.path"]:
        raise ConfigError(file, f"{where}.security.key.path", "is given without security.cert.path")
    given = [k for k, v in files.items() if v]
    if given and not all(h.startswith("https://") for h in hosts):
        raise ConfigError(file, f"{where}.{given[0]}", "is a TLS setting, but the hosts are not all https://",
                          hint="write the hosts as https://host:9200")
    return text in ("true", "1", "yes"), files


def with_sources(target: EsTarget, *sources: SourceDb, default: SourceDb | None = None) -> EsTarget:
    """A copy with these data sources (tests and tools that build targets by hand)."""
    return replace(target, sources=tuple((s.name, s) for s in sources) or target.sources,
                   default_source=default or target.default_source)
