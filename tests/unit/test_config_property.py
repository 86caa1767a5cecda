"""Property: whatever a user writes in ``sluice.yml``, the loader answers a Config or ONE
ConfigError that names the file (and the key, when one is at fault); never another exception."""

from __future__ import annotations

import copy
import datetime
import math
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.config import Config, load_config, parse_config
from sluice_common.errors import ConfigError

pytestmark = pytest.mark.unit

SECTIONS = ["source", "store", "srcDataSources", "groups", "spark", "metrics"]
KEYS = [*SECTIONS, "name", "host", "port", "user", "password", "passwordFile", "passwordEnv", "serverId",
        "flavor", "filter", "include", "exclude", "resumeBy", "heartbeatSeconds", "connectTimeout", "ssl",
        "path", "batch", "maxRows", "maxBytes", "maxSeconds", "retain", "url", "username", "groupId",
        "outerAdapters", "mappings", "key", "hosts", "properties", "master", "partitions", "conf",
        "textfile", "json", "keepRuns"]
TEXTS = ["${HOME}", "${NOPE_NOT_SET_42}", "${NOPE_NOT_SET_42:-x}", "${", "$${X}", "a,b", ".*\\..*", "(", "[",
         "/dev/null", "/nonexistent/pw", "\x00", "local[*]", "rdb", "es8", "g1", "65536", "-1", "0"]
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-10**20, max_value=10**20), st.floats(allow_nan=True),
    st.text(max_size=12), st.sampled_from(KEYS + TEXTS), st.binary(max_size=4), st.dates(), st.datetimes())
keys = st.one_of(st.sampled_from(KEYS), st.text(max_size=6), st.integers(), st.booleans(), st.none())
documents = st.recursive(
    scalars, lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=6)),
    max_leaves=30)
tops = st.one_of(documents, st.fixed_dictionaries({}, optional={k: documents for k in SECTIONS}))

VALID: dict = {
    "source": {"name": "shop", "host": "127.0.0.1", "port": 3306, "user": "repl", "password": "pw",
               "filter": {"include": "shop\\..*", "exclude": ["shop\\.tmp_.*"]}, "ssl": {"ca": "/ca.pem"}},
    "store": {"path": "store", "batch": {"maxRows": 100, "maxBytes": 4096, "maxSeconds": 1}, "retain": 2},
    "srcDataSources": {"defaultDS": {"url": "jdbc:mysql://127.0.0.1:3306/shop", "username": "u",
                                     "passwordEnv": "HOME"}},
    "groups": [{"groupId": "g1", "mappings": ["m/*.yml"],
                "outerAdapters": [{"name": "rdb", "key": "k", "properties": {"jdbc.url": "jdbc:mysql://h/d"}}]}],
    "spark": {"master": "local[2]", "partitions": 2, "conf": {"spark.ui.enabled": "false"}},
    "metrics": {"textfile": "m.prom", "json": "m.json", "keepRuns": 20},
}
#: every key path of VALID, e.g. ("source", "filter", "include") or ("groups", 0, "groupId")
PATHS: list[tuple] = []


def _walk(node, path: tuple) -> None:
    if path:
        PATHS.append(path)
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for k, v in items:
        _walk(v, (*path, k))


_walk(VALID, ())


def check(raw, file: str = "c.yml") -> Config | None:
    """parse_config gives a Config or a ConfigError starting with the file name."""
    try:
        cfg = parse_config(raw, file, env={})
    except ConfigError as e:
        assert str(e).startswith(f"{file}: "), str(e)
        assert e.file == file
        return None
    assert isinstance(cfg, Config) and cfg.file == file
    return cfg


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tops)
def test_random_documents_raise_only_config_errors(raw):
    check(raw)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(PATHS), st.one_of(documents, st.sampled_from(TEXTS)))
def test_one_bad_value_in_a_valid_config_names_its_key(path, value):
    raw = copy.deepcopy(VALID)
    node = raw
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    try:
        parse_config(raw, "c.yml", env={})
    except ConfigError as e:
        assert str(e).startswith("c.yml: ")
        top = path[0]
        # the key at fault is named (a password problem names its section's password key)
        assert e.key is not None and e.key.split(".")[0].split("[")[0] == top, (path, str(e))


# ---- every scalar key takes exactly what docs/config.md allows --------------------------------
# The oracle below is the documented rule of each key, written without the loader's code: the
# loader must refuse every value the rule refuses (naming the key) and accept every other one.
_WHOLE_TEXT = re.compile(r"\s*[+-]?[0-9]+\s*")
_NUMBER_TEXT = re.compile(r"\s*[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\s*")


def _whole(lo: int, hi: int | None = None):
    """A whole number (digits as text too), lo..hi; never a bool or a float."""
    def ok(v) -> bool:
        if isinstance(v, str) and _WHOLE_TEXT.fullmatch(v):
            try:
                v = int(v)
            except ValueError:  # whitespace ``\s`` matches and int() does not take (e.g. U+001F)
                return False
        return type(v) is int and v >= lo and (hi is None or v <= hi)
    return ok


def _seconds(v) -> bool:
    """A finite number of seconds > 0 (a decimal number as text too); never a bool."""
    if isinstance(v, str) and _NUMBER_TEXT.fullmatch(v):
        try:
            v = float(v)
        except ValueError:  # whitespace ``\s`` matches and float() does not take (e.g. U+001F)
            return False
    return type(v) in (int, float) and math.isfinite(v) and v > 0


def _text(v) -> bool:
    """A string with something in it."""
    return isinstance(v, str) and v.strip() != ""


def _regexes(required: bool):
    """A regex, a comma-separated string of regexes or a list of them; include needs one at least."""
    def ok(v) -> bool:
        if isinstance(v, str):
            v = [p.strip() for p in v.split(",") if p.strip()]
        if not isinstance(v, list) or (required and not v) or not all(isinstance(p, str) for p in v):
            return False
        try:
            for p in v:
                re.compile(p)
        except re.error:
            return False
        return True
    return ok


def _one_of(*choices: str):
    return lambda v: isinstance(v, str) and v in choices


def _pattern(regex: str):
    return lambda v: isinstance(v, str) and re.fullmatch(regex, v) is not None


def _optional(rule):
    return lambda v: v is None or rule(v)


NAME = r"[A-Za-z0-9_.-]{1,64}"
RULES = {
    ("source", "name"): _pattern(NAME),
    ("source", "host"): _text,
    ("source", "port"): _whole(1, 65535),
    ("source", "user"): lambda v: isinstance(v, str),
    ("source", "password"): lambda v: v is None or (isinstance(v, str | int) and not isinstance(v, bool)),
    ("source", "serverId"): _whole(1, 2**32 - 1),
    ("source", "flavor"): _one_of("auto", "mariadb", "mysql"),
    ("source", "filter", "include"): _regexes(required=True),
    ("source", "filter", "exclude"): _regexes(required=False),
    ("source", "resumeBy"): _one_of("auto", "gtid", "file"),
    ("source", "heartbeatSeconds"): _seconds,
    ("source", "connectTimeout"): _seconds,
    ("source", "ssl", "ca"): _text,
    ("source", "ssl", "verify_mode"): lambda v: isinstance(v, str) and v.strip().lower() in ("required", "optional",
                                                                                           "none"),
    ("store", "path"): _text,
    ("store", "batch", "maxRows"): _whole(1),
    ("store", "batch", "maxBytes"): _whole(1024),
    ("store", "batch", "maxSeconds"): _seconds,
    ("store", "retain"): _whole(0),
    ("srcDataSources", "defaultDS", "username"): _optional(lambda v: isinstance(v, str)),
    ("groups", 0, "groupId"): _pattern(NAME),
    ("groups", 0, "mappings", 0): _text,
    ("groups", 0, "outerAdapters", 0, "name"): _one_of("rdb", "es", "es7", "es8", "hbase", "logger"),
    ("groups", 0, "outerAdapters", 0, "key"): _optional(_text),
    ("spark", "master"): _text,
    ("spark", "partitions"): _whole(1),
    ("spark", "conf", "spark.ui.enabled"): lambda v: isinstance(v, str),
    ("metrics", "textfile"): _optional(_text),
    ("metrics", "json"): _optional(_text),
    ("metrics", "keepRuns"): _whole(10),
}
EDGES = [True, False, None, 0, 1, -1, 9, 10, 1023, 1024, 65535, 65536, 2**32 - 1, 2**32, 1.5, 10.0, 0.0,
         float("inf"), float("-inf"), float("nan"), "", " ", "0", "1", " 7 ", "+3", "-1", "3_306", "1.5", "1e3",
         ".5", "5.", "inf", "nan", "0x10", "١٢", "x", "a b", "local[2]", "g1", "rdb", "hbase", "auto", "mariadb",
         "gtid", "file", "required", "Optional", "NONE", "maybe", "(", ".*\\..*", "a,b", ",", " , ", "/ca.pem",
         [], {}, ["x"], ["("], [1], {"a": 1}, datetime.date(2024, 1, 1)]
plain = st.one_of(st.none(), st.booleans(), st.integers(min_value=-10**12, max_value=10**12),
                  st.floats(allow_nan=True), st.text(max_size=10).filter(lambda t: "${" not in t))
leaf_values = st.one_of(st.sampled_from(EDGES), plain, st.lists(plain, max_size=3),
                        st.dictionaries(st.text(max_size=4), plain, max_size=2))


def test_the_valid_config_follows_the_rules():
    for path, rule in RULES.items():
        node = VALID
        for k in path[:-1]:
            node = node[k]
        if path[-1] in node:
            assert rule(node[path[-1]]), path


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(RULES, key=str)), leaf_values)
def test_each_key_takes_exactly_the_values_its_rule_allows(path, value):
    raw = copy.deepcopy(VALID)
    node = raw
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    allowed = RULES[path](value)
    try:
        parse_config(raw, "c.yml", env={})
    except ConfigError as e:
        assert not allowed, f"{path} = {value!r} is allowed but was refused: {e}"
        named = "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in path).lstrip(".")
        assert e.key is not None and named.startswith(e.key) and e.key.count(".") >= 1, (path, str(e))
        assert str(e).startswith(f"c.yml: {e.key}: ")
        return
    assert allowed, f"{path} = {value!r} was accepted but its rule refuses it"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([p for p in PATHS if not isinstance(p[-1], int)]), st.text(min_size=1, max_size=8))
def test_unknown_keys_are_refused_by_name(path, extra):
    raw = copy.deepcopy(VALID)
    node = raw
    for k in path[:-1]:
        node = node[k]
    if not isinstance(node, dict) or path[-2:-1] in (("ssl",), ("conf",), ("properties",), ("srcDataSources",)):
        return
    if extra in node or path[-1] == "srcDataSources":
        return
    node[extra] = 1
    with pytest.raises(ConfigError) as err:
        parse_config(raw, "c.yml", env={})
    assert str(err.value).startswith("c.yml: ") and err.value.key


def test_valid_config_parses():
    cfg = check(copy.deepcopy(VALID))
    assert cfg is not None and cfg.source.password.reveal() == "pw" and cfg.source.filter.matches("shop", "a")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_random_text_files_raise_only_config_errors(tmp_path_factory, text):
    _load_text(tmp_path_factory, text)


def _load_text(tmp_path_factory, text: str) -> None:
    """Load ``text`` as a config file: it parses, or fails with a ConfigError naming the file."""
    path = tmp_path_factory.mktemp("cfg") / "sluice.yml"
    path.write_text(text, encoding="utf-8")
    try:
        load_config(path)
    except ConfigError as e:
        assert str(e).startswith(f"{path}: ")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tops)
def test_yaml_round_trip_of_random_documents(tmp_path_factory, raw):
    try:
        text = yaml.safe_dump(raw, allow_unicode=True)
    except yaml.YAMLError:
        return
    _load_text(tmp_path_factory, text)


@pytest.mark.parametrize("text, where", [
    ("source: [1, 2", "line 1"),                              # unclosed flow sequence
    ("a: b: c", "line 1"),
    ("source:\n  host: x\n host: y", "line 3"),
    ("[" * 2000 + "]" * 2000, None),                          # nesting deep enough to exhaust the parser
    ("!!python/object:os.system {}", None),                   # safe_load refuses object tags
    ("x: &a [*a]", None),
    ("source:\n  host: x\n  port: 1\n  host: y\n", "line 4, column 3: not valid YAML (key 'host' appears twice"),
], ids=["unclosed", "nested-scalar", "indent", "deep", "python-tag", "anchor-loop", "duplicate-key"])
def test_broken_yaml_is_one_config_error(tmp_path: Path, text: str, where: str | None):
    path = tmp_path / "sluice.yml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value).startswith(f"{path}: ")
    if where:
        assert where in str(err.value)


def test_unreadable_files_are_one_config_error(tmp_path: Path):
    with pytest.raises(ConfigError, match="file not found"):
        load_config(tmp_path / "missing.yml")
    with pytest.raises(ConfigError, match="is a directory, not a config file"):
        load_config(tmp_path)                                 # a directory
    (tmp_path / "latin1.yml").write_bytes(b"source:\n  host: caf\xe9\n")
    with pytest.raises(ConfigError, match="is not UTF-8 text"):
        load_config(tmp_path / "latin1.yml")


@pytest.mark.parametrize("section, named", [
    ({"srcDataSources": [1]}, "srcDataSources"),
    ({"source": {"passwordFile": ["x"]}}, "source.passwordFile"),
    ({"source": {"passwordFile": "bad\x00path"}}, "source.passwordFile"),
    ({"source": {"passwordEnv": 5}}, "source.passwordEnv"),
    ({"source": {"password": "a", "passwordEnv": "HOME"}}, "source.passwordEnv"),
    ({"source": {"filter": {"include": 5}}}, "source.filter.include"),
    ({"source": {"filter": {"exclude": [1, "a"]}}}, "source.filter.exclude"),
    ({"source": {"filter": {"include": "("}}}, "source.filter.include"),
    ({"source": {"port": 70000}}, "source.port"),
    ({"groups": [{"groupId": "g"}, {"groupId": "g"}]}, "groups"),
    ({"metrics": {"keepRuns": 2}}, "metrics.keepRuns"),
    ({"source": {"host": "${NOPE_NOT_SET_42}"}}, "source.host"),
    # accepted before issue 23's property found them:
    ({"source": {"port": True}}, "source.port"),                      # YAML yes/on/true: was port 1
    ({"spark": {"partitions": True}}, "spark.partitions"),
    ({"source": {"heartbeatSeconds": float("inf")}}, "source.heartbeatSeconds"),  # capture: OverflowError
    ({"store": {"batch": {"maxSeconds": "inf"}}}, "store.batch.maxSeconds"),
    ({"source": {"filter": {"include": ""}}}, "source.filter.include"),         # captured nothing
    ({"source": {"ssl": {"verify_mode": "requierd"}}}, "source.ssl"),          # pymysql: no verification
    ({"source": {"ssl": {"ca": True}}}, "source.ssl"),                         # named source.ssl.ca.str
    ({"source": {"password": True}}, "source.password"),                       # password: yes -> "True"
    ({"source": {"host": ""}}, "source.host"),
    ({"store": {"path": " "}}, "store.path"),
    ({"groups": [{"groupId": "g", "mappings": [""]}]}, "groups[0].mappings[0]"),
])
def test_known_bad_values_name_their_key(section, named):
    with pytest.raises(ConfigError) as err:
        parse_config(section, "c.yml", env={})
    assert err.value.key is not None and err.value.key.startswith(named), str(err.value)
    assert str(err.value).startswith(f"c.yml: {err.value.key}: ")


def test_password_file_that_is_not_text(tmp_path: Path):
    pw = tmp_path / "pw.bin"
    pw.write_bytes(b"\xff\xfe\x00secret")
    with pytest.raises(ConfigError) as err:
        parse_config({"source": {"passwordFile": str(pw)}}, "c.yml", env={})
    assert err.value.key == "source.passwordFile" and "secret" not in str(err.value)


def test_odd_scalars_give_messages_not_tracebacks():
    for raw in ({"source": datetime.date(2024, 1, 1)}, {"store": {"batch": [1]}}, {"groups": {"g": 1}},
                {"spark": {"conf": {"a": [1]}}}, {"source": {"ssl": "yes"}}):
        with pytest.raises(ConfigError):
            parse_config(raw, "c.yml", env={})


PROPS = ["jdbc.url", "jdbc.username", "jdbc.password", "jdbc.passwordFile", "jdbc.passwordEnv", "url", "pool.size",
         "maxStatementBytes", "connectArgs", "tls.mode", "tls.ca", "tls.cert", "tls.key", "mode", "hosts",
         "security.auth", "security.authEnv", "security.verify", "security.ca.path", "security.cert.path",
         "security.key.path", "cluster.name", "requestTimeout", "bulkBytes"]
URLS = ["jdbc:mysql://h:3306/d", "jdbc:postgresql://h:99999/d", "jdbc:mysql://[::1/d", "jdbc:sqlite:",
        "mysql+pymysql://u:p@h/d", "https://h:9200", "h:x", "[::1", "jdbc:mysql://h/d?useSSL=true&sslMode=x", "u:p"]
prop_values = st.one_of(scalars, st.sampled_from(URLS), st.lists(st.text(max_size=3), max_size=2),
                        st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(PROPS), prop_values, max_size=6), prop_values)
def test_random_adapter_properties_raise_only_config_errors(props, hosts):
    """What the job builds from ``outerAdapters[].properties`` (RDB, ES and OpenSearch targets)."""
    from types import SimpleNamespace

    from adapters.es.factory import target_from_adapter as es_target
    from adapters.opensearch.factory import target_from_adapter as os_target
    from adapters.rdb import RdbTarget

    for build in (lambda: RdbTarget.from_properties(props, "c.yml", "k"),
                  lambda: es_target(SimpleNamespace(name="es8", key="k", hosts=hosts, properties=props), "c.yml", "k"),
                  lambda: os_target(SimpleNamespace(name="opensearch", key="k", hosts=hosts, properties=props),
                                    "c.yml", "k")):
        try:
            repr(build())
        except ConfigError as e:
            assert str(e).startswith("c.yml: k")


@pytest.mark.parametrize("url", ["jdbc:mysql://[::1/d", "jdbc:mysql://h:99999/d"])
def test_unparsable_data_source_url_names_its_key(url):
    with pytest.raises(ConfigError) as err:
        parse_config({"srcDataSources": {"ds": {"url": url}}}, "c.yml", env={})
    assert err.value.key == "srcDataSources.ds.url" and "not a valid URL" in str(err.value)
