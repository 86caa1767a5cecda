"""Frozen, picklable RDB target settings and the resolved per-table route.

:class:`RdbTarget` is one relational target (one canal ``outerAdapters`` entry with
``name: rdb``): dialect, host, credentials (a :class:`Secret`), pool and TLS settings. It
is built from a SQLAlchemy URL or from canal's ``jdbc.url``/``jdbc.username``/
``jdbc.password`` properties (:meth:`RdbTarget.from_properties`). :class:`RdbTable` is
one route "source table -> target table" as the writer applies it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import parse_qsl, unquote, urlsplit

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from sluice_common.errors import ConfigError
from sluice_common.secrets import Secret, resolve_password

DialectName = Literal["mysql", "mariadb", "postgresql", "sqlite"]
DRIVERS: dict[str, str] = {"mysql": "pymysql", "mariadb": "pymysql", "postgresql": "psycopg", "sqlite": "pysqlite"}
TLS_MODES = ("disable", "prefer", "require", "verify-ca", "verify-full")
#: JDBC URL parameters that mean something here; the rest (useUnicode, serverTimezone, ...) are
#: JDBC-driver tuning that Sluice does itself (utf8mb4, UTC session) and are ignored.
_JDBC_TLS = {"useSSL", "requireSSL", "sslMode", "sslmode", "ssl", "verifyServerCertificate",
             "sslrootcert", "sslcert", "sslkey", "trustCertificateKeyStoreUrl"}


@dataclass(frozen=True)
class TlsOptions:
    """TLS to the target. ``mode``: disable | prefer | require | verify-ca | verify-full."""

    mode: str = "prefer"
    ca: str | None = None
    cert: str | None = None
    key: str | None = None


@dataclass(frozen=True)
class RdbTarget:
    """One relational target; frozen and hashable (it keys the per-process engine cache)."""

    dialect: DialectName
    host: str | None = None
    port: int | None = None
    database: str | None = None  # sqlite: the file path
    username: str | None = None
    password: Secret = field(default_factory=lambda: Secret(""))
    query: tuple[tuple[str, str], ...] = ()  # extra driver URL query (e.g. application_name)
    pool_size: int = 4
    connect_args: tuple[tuple[str, Any], ...] = ()
    tls: TlsOptions = TlsOptions()
    max_statement_bytes: int = 4 << 20  # budget of one multi-row statement (MySQL packet)
    key: str = ""  # canal's outerAdapterKey, for messages
    #: a change's ``mysqlType`` lists every column its table had (Sluice's capture, repair, etl); a
    #: canal-written topic lists only those of the row image (MINIMAL/NOBLOB images carry fewer)
    complete_types: bool = True

    def written_table(self, spec: Any) -> tuple | None:
        """The target table a ``dbMapping`` (``spec``) writes, as the job's overlap refusals compare
        it (pipeline/job/conflicts.py): ``("rdb", dialect, host, port, schema, table)``, a mirrorDb's
        table ``*`` (its whole database); None for another kind of mapping."""
        if not hasattr(spec, "mirrorDb"):
            return None
        schema, name = (spec.target_schema, "*") if spec.mirrorDb else spec.target()
        schema = schema or self.database or ""
        return ("rdb", self.dialect, self.host, self.port, schema.lower(), name.lower())

    def url(self) -> URL:
        """The SQLAlchemy URL, with the password (pass it to create_engine, never to a log)."""
        return URL.create(f"{self.dialect}+{DRIVERS[self.dialect]}", username=self.username,
                          password=self.password.reveal() or None, host=self.host, port=self.port,
                          database=self.database, query=dict(self.query))

    @property
    def label(self) -> str:
        """The URL without any password: safe for messages and logs."""
        url = URL.create(f"{self.dialect}+{DRIVERS[self.dialect]}", username=self.username, host=self.host,
                         port=self.port, database=self.database).render_as_string()
        return f"{url} ({self.key})" if self.key else url

    @classmethod
    def from_url(cls, url: str, *, username: str | None = None, password: Secret | str | None = None,
                 file: str = "<config>", key: str = "url", **kw: Any) -> RdbTarget:
        """From a SQLAlchemy URL (``postgresql+psycopg://u@h:5432/db``, ``sqlite:///x.db``)."""
        try:
            u = make_url(url)
        except ArgumentError:
            raise ConfigError(file, key, "is not a database URL (e.g. mysql+pymysql://user@host:3306/db, "
                              "postgresql+psycopg://user@host/db, sqlite:///file.db)") from None
        name = u.get_backend_name()
        if name not in DRIVERS:
            raise ConfigError(file, key, f"dialect {name!r} is not supported (mysql, mariadb, postgresql, sqlite)")
        pw = password if password is not None else (u.password or "")
        return cls(dialect=name, host=u.host, port=u.port, database=u.database,  # type: ignore[arg-type]
                   username=username or u.username, password=pw if isinstance(pw, Secret) else Secret(str(pw)),
                   query=tuple((k, str(v)) for k, v in u.query.items()), **kw)

    @classmethod
    def from_jdbc(cls, jdbc_url: str, *, username: str | None = None, password: Secret | None = None,
                  file: str = "<config>", key: str = "jdbc.url", **kw: Any) -> RdbTarget:
        """From canal's JDBC URL: ``jdbc:mysql://h:3306/db?...``, ``jdbc:mariadb:``,
        ``jdbc:postgresql://h/db?sslmode=require``, ``jdbc:sqlite:/path/file.db``."""
        text = jdbc_url.strip()
        if not text.startswith("jdbc:"):
            raise ConfigError(file, key, f"must start with 'jdbc:' (e.g. jdbc:mysql://host:3306/db), got {text!r}")
        scheme, _, rest = text[5:].partition(":")
        if scheme == "sqlite":
            return cls(dialect="sqlite", database=rest or None, **kw)
        if scheme not in ("mysql", "mariadb", "postgresql"):
            raise ConfigError(file, key, f"JDBC driver {scheme!r} is not supported by Sluice's rdb adapter "
                              "(mysql, mariadb, postgresql, sqlite)")
        try:
            parts = urlsplit(rest if rest.startswith("//") else "//localhost/" + rest)
        except ValueError as e:  # an unclosed IPv6 bracket
            raise ConfigError(file, key, f"is not a valid JDBC URL: {e}") from None
        if "," in parts.netloc:
            raise ConfigError(file, key, "multi-host JDBC URLs are not supported; give one host")
        try:
            port = parts.port
        except ValueError:
            raise ConfigError(file, key, "has an invalid port") from None
        params = dict(parse_qsl(parts.query, keep_blank_values=True))
        username = username or params.get("user") or unquote(parts.username or "") or None
        if password is None and "password" in params:
            password = Secret(params["password"])
        database = unquote(parts.path.lstrip("/")) or None
        dialect: DialectName = "postgresql" if scheme == "postgresql" else scheme  # type: ignore[assignment]
        tls = _jdbc_tls(dialect, params, kw.pop("tls", None))
        query: dict[str, str] = {}
        if dialect == "postgresql":
            if params.get("currentSchema"):
                query["options"] = f"-c search_path={params['currentSchema']}"
            if params.get("ApplicationName"):
                query["application_name"] = params["ApplicationName"]
        return cls(dialect=dialect, host=parts.hostname, port=port, database=database, username=username,
                   password=password or Secret(""), query=tuple(query.items()), tls=tls, **kw)

    @classmethod
    def from_properties(cls, props: dict, file: str, key: str) -> RdbTarget:
        """From an ``outerAdapters[].properties`` dict: canal's ``jdbc.url``, ``jdbc.username``,
        ``jdbc.password`` (or ``jdbc.passwordEnv``/``jdbc.passwordFile``), or Sluice's ``url``;
        plus optional ``pool.size``, ``tls.mode``/``tls.ca``/``tls.cert``/``tls.key``,
        ``connectArgs`` (a mapping). Errors name ``file`` and ``key``."""
        if not isinstance(props, dict):
            raise ConfigError(file, key, "properties must be a mapping")
        where = f"{key}.properties" if key else "properties"
        pw_section = {k: props.get(f"jdbc.{k}") for k in ("password", "passwordFile", "passwordEnv")}
        if isinstance(pw_section["password"], Secret):
            pw_section["password"] = pw_section["password"].reveal()
        password = resolve_password({k: v for k, v in pw_section.items() if v is not None}, file, f"{where}.jdbc")
        username = props.get("jdbc.username")
        username = None if username in (None, "") else str(username)
        kw: dict[str, Any] = {}
        kw["pool_size"] = _int(props.get("pool.size", props.get("poolSize", 4)), file, f"{where}.pool.size")
        if "maxStatementBytes" in props:
            kw["max_statement_bytes"] = _int(props["maxStatementBytes"], file, f"{where}.maxStatementBytes")
        args = props.get("connectArgs") or {}
        if not isinstance(args, dict):
            raise ConfigError(file, f"{where}.connectArgs", "must be a mapping of driver connect arguments")
        kw["connect_args"] = tuple(sorted((str(k), v) for k, v in args.items()))
        mode = props.get("tls.mode")
        if mode is not None or any(f"tls.{x}" in props for x in ("ca", "cert", "key")):
            mode = str(mode or "verify-full")
            if mode not in TLS_MODES:
                raise ConfigError(file, f"{where}.tls.mode", f"must be one of {', '.join(TLS_MODES)}, got {mode!r}")
            for part in ("ca", "cert", "key"):
                if props.get(f"tls.{part}") is not None and not isinstance(props[f"tls.{part}"], str):
                    raise ConfigError(file, f"{where}.tls.{part}", "must be a file path")
            kw["tls"] = TlsOptions(mode, props.get("tls.ca"), props.get("tls.cert"), props.get("tls.key"))
        if props.get("url"):
            return cls.from_url(str(props["url"]), username=username, password=password or None,
                                file=file, key=f"{where}.url", **kw)
        if not props.get("jdbc.url"):
            raise ConfigError(file, f"{where}.jdbc.url", "is required (e.g. jdbc:mysql://host:3306/db)")
        return cls.from_jdbc(str(props["jdbc.url"]), username=username, password=password or None,
                             file=file, key=f"{where}.jdbc.url", **kw)


def _int(value: Any, file: str, key: str) -> int:
    try:
        n = int(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: .inf in YAML
        n = 0
    if n <= 0 or isinstance(value, bool) or (isinstance(value, float) and value != n):
        raise ConfigError(file, key, f"must be a positive integer, got {value!r}")
    return n


def _jdbc_tls(dialect: str, p: dict[str, str], given: TlsOptions | None) -> TlsOptions:
    if given is not None or not (_JDBC_TLS & p.keys()):
        return given or TlsOptions()
    if dialect == "postgresql":
        mode = p.get("sslmode") or ("require" if p.get("ssl") == "true" else "prefer")
        mode = {"allow": "prefer"}.get(mode, mode)
        return TlsOptions(mode if mode in TLS_MODES else "require", p.get("sslrootcert"), p.get("sslcert"),
                          p.get("sslkey"))
    ssl_mode = p.get("sslMode", "").upper()
    modes = {"DISABLED": "disable", "PREFERRED": "prefer", "REQUIRED": "require", "VERIFY_CA": "verify-ca",
             "VERIFY_IDENTITY": "verify-full"}
    if ssl_mode in modes:
        return TlsOptions(modes[ssl_mode])
    if p.get("useSSL") == "false":
        return TlsOptions("disable")
    if p.get("useSSL") == "true" or p.get("requireSSL") == "true":
        return TlsOptions("verify-ca" if p.get("verifyServerCertificate") == "true" else "require")
    return TlsOptions()


@dataclass(frozen=True)
class RdbTable:
    """One resolved route "source table -> target table".

    ``columns``: ``(source, target)`` pairs, or None for all source columns under their own
    names (mapAll/mirrorDb), then with ``renames`` ``(source, target)`` and without
    ``exclude``. ``pk``: ``(target, source)`` pairs, or None to use the change's
    ``pk_names``. ``on_new_column``: what a source column missing from the target does
    when ``columns`` is None ("fail" or "ignore"). ``mirror_ddl``: replay DDL (mirrorDb).
    """

    target_table: str
    target_schema: str | None = None
    columns: tuple[tuple[str, str], ...] | None = None
    pk: tuple[tuple[str, str], ...] | None = None
    case_insensitive: bool = False
    on_new_column: Literal["fail", "ignore"] = "fail"
    renames: tuple[tuple[str, str], ...] = ()
    exclude: tuple[str, ...] = ()
    mirror_ddl: bool = False
    origin: str = ""  # the mapping file, for messages

    @property
    def qualified(self) -> str:
        return f"{self.target_schema}.{self.target_table}" if self.target_schema else self.target_table

    @classmethod
    def from_mapping(cls, mapping: Any, table: str) -> RdbTable:
        """Resolve a ``pipeline.mapping`` ``Mapping`` (or its ``DbMapping``) for one source table."""
        spec = getattr(mapping, "dbMapping", None) or mapping
        origin = getattr(mapping, "file", "") or getattr(spec, "file", "")
        on_new = str(getattr(spec, "onNewColumn", "fail") or "fail")
        schema, name = spec.target(table)
        common = dict(target_schema=schema, target_table=name, case_insensitive=bool(spec.caseInsensitive),
                      on_new_column="ignore" if on_new == "ignore" else "fail", origin=origin)
        if spec.mirrorDb:
            return cls(**common, mirror_ddl=True)
        pairs = tuple((s, t) for t, s in spec.column_pairs)
        pk = tuple(spec.primary_key)
        if spec.mapAll:
            return cls(**common, pk=pk, renames=tuple(p for p in pairs if p[0] != p[1]),
                       exclude=tuple(spec.excludeColumns))
        return cls(**common, columns=pairs, pk=pk)
