"""Property: whatever document a user writes, the loader answers a ConfigError or a Mapping."""

from __future__ import annotations

import datetime

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pipeline.mapping import Mapping, parse_mapping, parse_mapping_text
from sluice_common.errors import ConfigError

pytestmark = pytest.mark.unit

KEYS = ["dataSourceKey", "destination", "groupId", "outerAdapterKey", "concurrent", "dbMapping",
        "esMapping", "hbaseMapping", "kuduMapping", "database", "table", "targetTable", "targetDb",
        "targetPk", "targetColumns", "mapAll", "mirrorDb", "caseInsensitive", "commitBatch",
        "excludeColumns", "_index", "_id", "_type", "pk", "sql", "objFields", "skips", "relations",
        "name", "parent", "mode", "hbaseTable", "family", "rowKey", "rowKeySeparator", "columns",
        "uppercaseQualifier", "etlCondition", "id"]
SQL = ["select t.id from t", "select a.id, b.x from a left join b on b.id = a.id", "select *",
       "select t.id from t where", "(", "select 'x", "select t.id as id from t left join", "ROWKEY LEN:"]
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-10**20, max_value=10**20),
    st.floats(allow_nan=True), st.text(max_size=20), st.sampled_from(KEYS + SQL),
    st.dates(), st.datetimes(), st.binary(max_size=5))
keys = st.one_of(st.sampled_from(KEYS), st.text(max_size=8), st.integers(), st.booleans(), st.none())
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=6)),
    max_leaves=30)
tops = st.one_of(documents, st.fixed_dictionaries(
    {}, optional={k: documents for k in ("dbMapping", "esMapping", "hbaseMapping", "concurrent")}))
sections = st.sampled_from(["dbMapping", "esMapping", "hbaseMapping"]).flatmap(
    lambda kind: st.fixed_dictionaries({kind: st.dictionaries(st.sampled_from(KEYS), documents, max_size=8)}))


def check(raw) -> None:
    try:
        result = parse_mapping(raw, "p.yml")
    except ConfigError as e:
        assert str(e).startswith("p.yml: ")
    else:
        assert isinstance(result, Mapping)
        assert result.kind in ("rdb", "es", "hbase") and result.source_key and result.file == "p.yml"


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tops)
def test_random_documents_raise_only_config_errors(raw):
    check(raw)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sections)
def test_random_sections_raise_only_config_errors(raw):
    check(raw)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_random_text_raises_only_config_errors(text):
    try:
        parse_mapping_text(text, "p.yml")
    except ConfigError as e:
        assert str(e).startswith("p.yml: ")


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(SQL) | st.text(max_size=60), st.text(max_size=10))
def test_random_sql_raises_only_config_errors(sql, noise):
    check({"esMapping": {"_index": "i", "_id": "id", "sql": sql + noise}})


def outcome(parse, doc):
    """What the loader answers: ("ok", the parsed mapping) or ("error", the message)."""
    try:
        m = parse(doc, "p.yml")
    except ConfigError as e:
        assert str(e).startswith("p.yml: "), str(e)
        return "error", str(e)
    return "ok", m.model_dump()


@settings(max_examples=200, deadline=None)
@given(sections)
def test_yaml_round_trip_of_random_sections(raw):
    """A section written to a file and loaded gives the same answer as the section itself."""
    try:
        text = yaml.safe_dump(raw, allow_unicode=True, sort_keys=False)
    except yaml.YAMLError:
        return
    assume(repr(yaml.safe_load(text)) == repr(raw))  # PyYAML's own limits (e.g. U+0085 in a key)
    assert outcome(parse_mapping_text, text) == outcome(parse_mapping, raw)


# ---- each scalar key takes exactly what docs/mappings.md allows ------------------------------
# The rule of each key, written without the loader's code (canal's Spring binding is lenient:
# "3000" for a number, "true" for a flag, a YAML number for a name); the loader must refuse what
# the rule refuses, naming the key, and accept the rest as the value the rule gives.
def _flag(v):
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("true", "false"):
        return v.strip().lower() == "true"
    return REFUSED


def _positive(v):
    if isinstance(v, str) and v.strip().isdigit():
        try:
            v = int(v.strip())
        except ValueError:  # a digit Python cannot read as a number, e.g. a superscript
            return REFUSED
    return v if type(v) is int and v > 0 else REFUSED


def _text(v):
    return str(v) if type(v) in (str, int, float) else None if v is None else REFUSED


def _name(v):
    return str(v).strip() if type(v) in (str, int) and str(v).strip() else REFUSED


def _es_index(v):
    """An Elasticsearch index name: lower case, none of \\ / * ? " < > | space , # :, not starting
    with - _ +, not . or .., at most 255 bytes."""
    name = _name(v)
    if name is REFUSED or name != name.lower() or set(name) & set('\\/*?"<>| ,#:') or name[0] in "-_+" \
            or name in (".", "..") or len(name.encode()) > 255:
        return REFUSED
    return name


def _hbase_table(v):
    """An HBase table name: [namespace:]qualifier; the namespace letters, digits and _; the
    qualifier letters, digits, _ - . and not starting with . or -."""
    name = _name(v)
    if name is REFUSED:
        return REFUSED
    ns, _, qualifier = name.rpartition(":")
    word = lambda t, extra="": t != "" and all(c.isalnum() or c in "_" + extra for c in t)  # noqa: E731
    if (ns or ":" in name) and not word(ns) or not word(qualifier, "-.") or qualifier[0] in ".-":
        return REFUSED
    return name


def _hbase_family(v):
    """An HBase column family: not empty, no ':', not starting with '.', no control characters."""
    name = "CF" if v is None else _name(v)
    if name is REFUSED or ":" in name or name.startswith(".") or name == "recovered.edits" \
            or any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in name):
        return REFUSED
    return name


def _mode(v):
    return v.strip().upper() if isinstance(v, str) and v.strip().upper() in ("STRING", "NATIVE", "PHOENIX") \
        else REFUSED


def _separator(v):
    text = _text(v)
    return REFUSED if text in (None, "") else text


REFUSED = object()
#: (section, key) -> (the rule, the attribute that holds the value)
KEY_RULES = {
    ("dbMapping", "commitBatch"): (_positive, "commitBatch"), ("dbMapping", "readBatch"): (_positive, "readBatch"),
    ("dbMapping", "caseInsensitive"): (_flag, "caseInsensitive"), ("dbMapping", "mapAll"): (_flag, "mapAll"),
    ("dbMapping", "allowDuplicateKeys"): (_flag, "allowDuplicateKeys"),
    ("dbMapping", "etlCondition"): (_text, "etlCondition"),
    ("esMapping", "_index"): (_es_index, "index"), ("esMapping", "commitBatch"): (_positive, "commitBatch"),
    ("esMapping", "upsert"): (_flag, "upsert"), ("esMapping", "etlCondition"): (_text, "etlCondition"),
    ("hbaseMapping", "hbaseTable"): (_hbase_table, "hbaseTable"), ("hbaseMapping", "family"): (_hbase_family, "family"),
    ("hbaseMapping", "mode"): (_mode, "mode"), ("hbaseMapping", "uppercaseQualifier"): (_flag, "uppercaseQualifier"),
    ("hbaseMapping", "autoCreateTable"): (_flag, "autoCreateTable"),
    ("hbaseMapping", "rowKeySeparator"): (_separator, "rowKeySeparator"),
    ("hbaseMapping", "commitBatch"): (_positive, "commitBatch"),
}
EDGES = [True, False, None, 0, 1, -1, 3000, 1.0, 1.5, float("nan"), "", " ", "0", "12", " 7 ", "+3", "1_000", "²",
         "١٢", "true", "FALSE", " True ", "yes", "1", "string", "Native", "PHOENIX", "x", "i", "A", "a b", "_x", "-x",
         ".x", "x.y", "ns:t", "a:b:c", "ns:", ":t", "T-1", "é", "a#b", "a,b", "|", "#", ".", "..", "CF", "cf:q",
         "recovered.edits", "a\x01", "x" * 256, [], {}, ["x"], {"a": 1}, datetime.date(2024, 1, 1)]
plain = st.one_of(st.none(), st.booleans(), st.integers(min_value=-10**6, max_value=10**6), st.floats(allow_nan=True),
                  st.text(max_size=10))
key_values = st.one_of(st.sampled_from(EDGES), plain, st.lists(plain, max_size=2))


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(KEY_RULES)), key_values)
def test_each_key_takes_exactly_the_values_its_rule_allows(where, value):
    kind, key = where
    rule, attr = KEY_RULES[where]
    want = rule(value)
    try:
        m = parse_mapping({kind: {**VALID[kind], key: value}}, "p.yml")
    except ConfigError as e:
        assert want is REFUSED, f"{kind}.{key} = {value!r} is allowed but was refused: {e}"
        assert e.key == f"{kind}.{key}" and str(e).startswith(f"p.yml: {kind}.{key}: "), str(e)
        return
    assert want is not REFUSED, f"{kind}.{key} = {value!r} was accepted but its rule refuses it"
    got = getattr(m.spec, attr)
    assert got == want or (want != want and got != got), (kind, key, value, got)  # NaN as text: "nan"


def test_odd_scalars_give_messages_not_tracebacks():
    with pytest.raises(ConfigError, match="must be a name"):
        parse_mapping({"dbMapping": {"database": datetime.date(2024, 1, 1)}}, "p.yml")
    with pytest.raises(ConfigError, match="keys here must be names"):
        parse_mapping({"dbMapping": {"database": "d", "table": "t", "targetTable": "t",
                                     "targetPk": {None: "x"}, "mapAll": True}}, "p.yml")


VALID = {
    "dbMapping": {"database": "d", "table": "t", "targetTable": "x.t", "targetPk": {"id": None},
                  "targetColumns": {"id": None, "n": "name"}},
    "esMapping": {"_index": "i", "_id": "id", "sql": "select a.id, b.x from a left join b on b.id = a.id",
                  "skips": ["x"], "relations": {"j": {"name": "c", "parent": "id"}}},
    "hbaseMapping": {"database": "d", "table": "t", "hbaseTable": "T", "columns": {"id": "ROWKEY"}},
}
names = st.one_of(st.sampled_from(["id", "name", "x", "ROWKEY", "ROWKEY LEN:3", "F:Q$STRING", "a,b", "", "x.y"]),
                  st.text(max_size=8))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(VALID)), st.sampled_from(KEYS), st.one_of(documents, names,
       st.dictionaries(names, st.one_of(st.none(), names), max_size=4), st.lists(names, max_size=4)))
def test_valid_section_with_one_random_key_raises_only_config_errors(kind, key, value):
    section = {**VALID[kind], key: value}
    check({kind: section})
    try:
        m = parse_mapping({kind: section}, "p.yml")
    except ConfigError:
        return
    try:
        m.validate_against_source(["id", "name"], ["id"], table="t")
    except ConfigError as e:
        assert str(e).startswith("p.yml: ")
    m.matches("d", "t")
    if kind == "dbMapping" and not m.dbMapping.mirrorDb:
        m.dbMapping.column_mapping(["id", "name", "other"])
    if kind == "hbaseMapping":
        m.hbaseMapping.column_for("name")
