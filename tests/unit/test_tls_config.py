"""TLS settings of the MySQL source (``source.ssl``), the RDB targets (``tls.*`` and JDBC URL
parameters) and Elasticsearch/OpenSearch (``security.*``): parsed, refused with the key named, and turned
into the driver's TLS arguments. No TLS server is needed."""

from __future__ import annotations

import ssl
import subprocess
from types import SimpleNamespace

import certifi
import pytest

from adapters.es.factory import target_from_adapter as es_target
from adapters.opensearch.factory import target_from_adapter as os_target
from adapters.rdb import RdbTarget
from adapters.rdb.dialects import connect_args
from pipeline.config import parse_config
from sluice_common.errors import ConfigError

pytestmark = pytest.mark.unit
F, K = "sluice.yml", "groups[0].outerAdapters[0]"
CA = certifi.where()


@pytest.fixture(scope="module")
def client_pem(tmp_path_factory) -> tuple[str, str]:
    """A throw-away self-signed client certificate and key (PEM)."""
    d = tmp_path_factory.mktemp("pem")
    cert, key = d / "client.crt", d / "client.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=sluice",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return str(cert), str(key)


# ---- source.ssl ------------------------------------------------------------------------------

def test_source_ssl_keys_and_flags():
    cfg = parse_config({"source": {"ssl": {"ca": "/etc/ca.pem", "cert": "/c", "key": "/k", "check_hostname": "false",
                                           "verify_mode": "required"}}}, F, env={})
    assert cfg.source.ssl == {"ca": "/etc/ca.pem", "cert": "/c", "key": "/k", "check_hostname": False,
                              "verify_mode": "required"}
    assert parse_config({"source": {"ssl": {"check_hostname": True}}}, F, env={}).source.ssl == {"check_hostname": True}
    assert parse_config({}, F, env={}).source.ssl is None


def test_source_ssl_disabled_is_plain_text_not_even_tried():
    """``source.ssl: {disabled: true}`` (a trusted network, like a replica's default MASTER_SSL=0):
    pymysql's ``ssl_disabled``, on every source connection; ``disabled: false`` is the default."""
    from pipeline.source.connect import settings

    cfg = parse_config({"source": {"ssl": {"disabled": "yes"}}}, F, env={})
    assert cfg.source.ssl == {"disabled": True}
    kw = settings(cfg.source)
    assert kw["ssl_disabled"] is True and "ssl" not in kw
    default = parse_config({"source": {"ssl": {"disabled": False, "ca": "/etc/ca.pem"}}}, F, env={})
    assert default.source.ssl == {"ca": "/etc/ca.pem"} and "ssl_disabled" not in settings(default.source)


@pytest.mark.parametrize("ssl_section, problem", [
    ({"disabled": True, "ca": "/x"}, "ssl.disabled: true (never TLS) excludes the other ssl keys (ca)"),
    ({"disabled": "maybe"}, "ssl.disabled must be true or false"),
    ({"cafile": "/x"}, "unknown ssl key 'cafile'"),
    ({"password": "pw"}, "unknown ssl key 'password'"),
    ({"check_hostname": "maybe"}, "must be true or false"),
    ("yes", "valid dictionary"),
])
def test_source_ssl_is_refused_by_key(ssl_section, problem):
    with pytest.raises(ConfigError) as err:
        parse_config({"source": {"ssl": ssl_section}}, F, env={})
    assert err.value.key == "source.ssl" and problem in str(err.value)


def test_source_ssl_reaches_pymysql_as_a_verifying_context(client_pem):
    import pymysql.connections

    cert, key = client_pem
    cfg = parse_config({"source": {"ssl": {"ca": CA, "cert": cert, "key": key}}}, F, env={})
    ctx = pymysql.connections.Connection._create_ssl_ctx(None, dict(cfg.source.ssl))
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    off = parse_config({"source": {"ssl": {"ca": CA, "check_hostname": "no"}}}, F, env={})
    assert not pymysql.connections.Connection._create_ssl_ctx(None, dict(off.source.ssl)).check_hostname


def test_source_ssl_reaches_every_source_connection(monkeypatch, client_pem):
    """One home builds the arguments: the capture/pre-flight/etl/verify connections and the search
    adapters' join re-queries (for ``source`` and a data source on the same server) carry ``source.ssl``."""
    import pymysql

    from adapters.es import requery
    from adapters.es.config import sources_of
    from pipeline.source.connect import connect, settings

    cert, key = client_pem
    ssl_cfg = {"ca": CA, "cert": cert, "key": key}
    cfg = parse_config({"source": {"host": "db1", "port": 3307, "ssl": ssl_cfg},
                        "srcDataSources": {"same": {"url": "jdbc:mysql://db1:3307/shop"},
                                           "other": {"url": "jdbc:mysql://db2:3306/crm"}}}, F, env={})
    assert settings(cfg.source)["ssl"] == ssl_cfg
    assert "ssl" not in settings(parse_config({}, F, env={}).source)
    seen: list[dict] = []
    monkeypatch.setattr(pymysql, "connect", lambda **kw: seen.append(kw) or SimpleNamespace(close=lambda: None))
    connect(cfg.source)
    named, default = sources_of(cfg)
    dbs = dict(named)
    for db in (default, dbs["same"], dbs["other"]):
        requery._connect(db)
    assert [kw.get("ssl") for kw in seen] == [ssl_cfg, ssl_cfg, ssl_cfg, None]
    assert all(kw["autocommit"] and kw["charset"] == "utf8mb4" for kw in seen)


# ---- RDB targets ------------------------------------------------------------------------------

def _rdb(**props) -> RdbTarget:
    return RdbTarget.from_properties({"jdbc.url": "jdbc:mysql://db:3306/d", **props}, F, K)


def test_rdb_tls_properties(client_pem):
    cert, key = client_pem
    t = _rdb(**{"tls.mode": "verify-full", "tls.ca": CA, "tls.cert": cert, "tls.key": key})
    assert (t.tls.mode, t.tls.ca, t.tls.cert, t.tls.key) == ("verify-full", CA, cert, key)
    ctx = connect_args(t)["ssl"]
    assert isinstance(ctx, ssl.SSLContext) and ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert _rdb(**{"tls.ca": CA}).tls.mode == "verify-full"          # a CA alone means: verify
    ca_only = connect_args(_rdb(**{"tls.mode": "verify-ca", "tls.ca": CA}))["ssl"]
    assert ca_only.verify_mode == ssl.CERT_REQUIRED and not ca_only.check_hostname
    req = connect_args(_rdb(**{"tls.mode": "require"}))["ssl"]
    assert req.verify_mode == ssl.CERT_NONE                          # encrypted, not verified
    assert connect_args(_rdb(**{"tls.mode": "disable"}))["ssl_disabled"] is True
    assert "ssl" not in connect_args(_rdb())                         # prefer: the driver's own choice


def test_rdb_tls_for_postgresql(client_pem):
    cert, key = client_pem
    t = RdbTarget.from_properties({"jdbc.url": "jdbc:postgresql://db/d", "tls.mode": "verify-ca", "tls.ca": CA,
                                   "tls.cert": cert, "tls.key": key}, F, K)
    args = connect_args(t)
    assert (args["sslmode"], args["sslrootcert"], args["sslcert"], args["sslkey"]) == ("verify-ca", CA, cert, key)


@pytest.mark.parametrize("url, mode", [
    ("jdbc:mysql://h/d?useSSL=false", "disable"),
    ("jdbc:mysql://h/d?useSSL=true", "require"),
    ("jdbc:mysql://h/d?useSSL=true&verifyServerCertificate=true", "verify-ca"),
    ("jdbc:mysql://h/d?sslMode=VERIFY_IDENTITY", "verify-full"),
    ("jdbc:mariadb://h/d?sslMode=REQUIRED", "require"),
    ("jdbc:postgresql://h/d?sslmode=verify-full", "verify-full"),
    ("jdbc:postgresql://h/d?ssl=true", "require"),
    ("jdbc:postgresql://h/d?sslmode=allow", "prefer"),
])
def test_rdb_tls_from_jdbc_url(url, mode):
    assert RdbTarget.from_properties({"jdbc.url": url}, F, K).tls.mode == mode


@pytest.mark.parametrize("props, key", [
    ({"tls.mode": "strict"}, "tls.mode"),
    ({"tls.ca": ["/a"]}, "tls.ca"),
    ({"tls.mode": "require", "tls.cert": 5}, "tls.cert"),
])
def test_rdb_bad_tls_names_the_key(props, key):
    with pytest.raises(ConfigError) as err:
        _rdb(**props)
    assert err.value.key == f"{K}.properties.{key}"


# ---- Elasticsearch ------------------------------------------------------------------------------

def _es(hosts: str, **props):
    return es_target(SimpleNamespace(name="es8", key="es1", hosts=hosts, properties=props), F, K)


def test_es_tls_settings(client_pem):
    cert, key = client_pem
    t = _es("https://es1:9200,https://es2:9200", **{"security.ca.path": CA, "security.cert.path": cert,
                                                    "security.key.path": key, "security.auth": "elastic:pw"})
    kw = t.client_kwargs()
    assert kw["ca_certs"] == CA and kw["client_cert"] == cert and kw["client_key"] == key
    assert "verify_certs" not in kw and kw["basic_auth"] == ("elastic", "pw")
    assert "pw" not in t.label and "pw" not in repr(t.password)
    from elasticsearch import Elasticsearch

    Elasticsearch(**kw).close()                                      # the client accepts them
    off = _es("https://es:9200", **{"security.verify": "false"}).client_kwargs()
    assert off["verify_certs"] is False and "ca_certs" not in off
    assert _es("https://es:9200", **{"security.verify": True}).verify_certs is True


def test_opensearch_tls_settings(client_pem):
    """The same keys become opensearch-py's arguments (``http_auth``, ``use_ssl``, ``timeout``)."""
    cert, key = client_pem
    props = {"security.ca.path": CA, "security.cert.path": cert, "security.key.path": key,
             "security.auth": "admin:pw"}
    t = os_target(SimpleNamespace(name="opensearch", key="os1", hosts="https://os1:9200", properties=props), F, K)
    kw = t.client_kwargs()
    assert kw["ca_certs"] == CA and kw["client_cert"] == cert and kw["client_key"] == key and kw["use_ssl"]
    assert kw["verify_certs"] is True and kw["http_auth"] == ("admin", "pw") and kw["timeout"] == 60.0
    assert "pw" not in t.label and "pw" not in repr(t.password)
    from opensearchpy import OpenSearch

    OpenSearch(**kw).close()                                         # the client accepts them
    off = os_target(SimpleNamespace(name="opensearch", key="os1", hosts="https://os:9200",
                                    properties={"security.verify": "false"}), F, K).client_kwargs()
    assert off["verify_certs"] is False and off["ssl_show_warn"] is False and "ca_certs" not in off
    with pytest.raises(ConfigError) as err:
        os_target(SimpleNamespace(name="opensearch", key="os1", hosts="os:9200",
                                  properties={"security.ca.path": CA}), F, K)
    assert err.value.key == f"{K}.properties.security.ca.path"


@pytest.mark.parametrize("hosts, props, key, problem", [
    ("es:9200", {"security.ca.path": CA}, "security.ca.path", "not all https://"),
    ("https://a:9200,b:9200", {"security.cert.path": "/c"}, "security.cert.path", "not all https://"),
    ("https://es:9200", {"security.key.path": "/k"}, "security.key.path", "without security.cert.path"),
    ("https://es:9200", {"security.verify": "sometimes"}, "security.verify", "true or false"),
    ("https://es:9200", {"security.ca.path": 7}, "security.ca.path", "file path"),
])
def test_es_bad_tls_names_the_key(hosts, props, key, problem):
    with pytest.raises(ConfigError) as err:
        _es(hosts, **props)
    assert err.value.key == f"{K}.properties.{key}" and problem in str(err.value)

