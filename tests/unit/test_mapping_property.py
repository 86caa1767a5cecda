"""Property: whatever document a user writes, the loader answers a ConfigError or a Mapping."""

from __future__ import annotations

import datetime

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.errors import ConfigError
from pipeline.mapping import Mapping, parse_mapping, parse_mapping_text

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


@settings(max_examples=200, deadline=None)
@given(sections)
def test_yaml_round_trip_of_random_sections(raw):
    try:
        text = yaml.safe_dump(raw, allow_unicode=True)
    except yaml.YAMLError:
        return
    try:
        parse_mapping_text(text, "p.yml")
    except ConfigError:
        pass


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
