"""Every canal example mapping loads unchanged and yields the expected objects."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from pipeline.mapping import (
    ColumnRef,
    DbMapping,
    EsMapping,
    HbaseColumn,
    HbaseMapping,
    JoinKey,
    load_mapping,
    load_mappings,
)

pytestmark = pytest.mark.unit

CANAL = Path(__file__).resolve().parents[3] / "shared" / "reference" / "canal-mappings"
EXAMPLES = sorted(p for p in CANAL.glob("*/*.yml") if p.parent.name != "launcher")


def test_the_examples_are_there():
    assert {p.parent.name for p in EXAMPLES} == {"rdb", "es7", "es8", "hbase"}
    assert len(EXAMPLES) == 8


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_example_loads_and_pickles(path):
    m = load_mapping(path)
    assert m.file == str(path)
    assert m.kind == {"rdb": "rdb", "es7": "es", "es8": "es", "hbase": "hbase"}[path.parent.name]
    assert m.dataSourceKey == "defaultDS" and m.destination == "example" and m.groupId == "g1"
    copy = pickle.loads(pickle.dumps(m))
    assert copy == m and copy.file == m.file and copy.spec.file == m.file


def test_rdb_user():
    m = load_mapping(CANAL / "rdb" / "mytest_user.yml")
    db = m.dbMapping
    assert isinstance(db, DbMapping) and m.spec is db
    assert m.outerAdapterKey == "mysql1" and m.concurrent is True
    assert m.source_key == "mytest.user"
    assert m.matches("mytest", "user") and not m.matches("mytest", "USER") and not m.matches("x", "user")
    assert db.target() == ("mytest2", "user")
    assert db.target_schema == "mytest2" and db.target_name == "user"
    assert db.primary_key == (("id", "id"),)
    assert db.target_pk_columns == ("id",) and db.source_pk_columns == ("id",)
    assert db.mapAll is False and db.mirrorDb is False
    assert db.etlCondition == "where c_time>={}" and db.commitBatch == 3000
    cols = ["id", "name", "role_id", "c_time", "test1", "secret"]
    assert db.column_mapping(cols) == {c: c for c in cols[:-1]}
    db.validate_against_source(cols, ["id"])


def test_es_user_with_join():
    for flavour in ("es7", "es8"):
        m = load_mapping(CANAL / flavour / "mytest_user.yml")
        es = m.esMapping
        assert isinstance(es, EsMapping)
        assert es.index == "mytest_user" and es.id == "_id" and es.id_field == "_id"
        assert es.upsert is False and es.pk is None and es.objFields == {} and es.skips == ()
        assert es.sql.startswith("select a.id as _id")
        q = es.query
        assert (q.main.name, q.main.alias, q.main.schema) == ("user", "a", None)
        assert len(q.joins) == 1
        join = q.joins[0]
        assert (join.table.name, join.table.alias) == ("role", "b")
        assert join.keys == (JoinKey("id", ColumnRef("a", "role_id")),)
        assert q.field_names == ("_id", "name", "role_id", "role_name", "c_time")
        assert q.field("_id").columns == (ColumnRef("a", "id"),) and q.field("_id").is_simple
        assert [f.name for f in q.fields_reading("b")] == ["role_name"]
        assert [f.name for f in q.fields_reading("a", "role_id")] == ["role_id"]
        assert q.columns_of("b") == ("role_name", "id")
        assert m.source_key == "*.user" and es.source_keys == ("*.user", "*.role")
        assert m.matches("mytest", "role") and m.matches("any", "USER") and not m.matches("mytest", "x")
        es.validate_against_source(["id", "role_name"], ["id"], table="role")


def test_es_parent_and_child():
    parent = load_mapping(CANAL / "es7" / "customer.yml").esMapping
    assert parent.id == "id" and parent.relations["customer_order"].name == "customer"
    assert parent.relations["customer_order"].parent is None
    child = load_mapping(CANAL / "es8" / "biz_order.yml").esMapping
    rel = child.relations["customer_order"]
    assert (rel.name, rel.parent) == ("order", "customer_id")
    assert child.skips == ("customer_id",)
    id_field = child.query.field("_id")
    assert id_field.expression == "concat('oid_', t.id)"
    assert id_field.columns == (ColumnRef("t", "id"),) and not id_field.is_simple
    assert child.query.field("order_serial").columns == (ColumnRef("t", "serial_code"),)


def test_hbase_person():
    m = load_mapping(CANAL / "hbase" / "mytest_person2.yml")
    hb = m.hbaseMapping
    assert isinstance(hb, HbaseMapping)
    assert (hb.mode, hb.database, hb.table, hb.hbaseTable) == ("STRING", "mytest", "person2", "MYTEST.PERSON2")
    assert hb.family == "CF" and hb.uppercaseQualifier and not hb.autoCreateTable
    assert hb.rowKey is None and hb.rowKeySeparator == "|"
    assert hb.rowkey_columns == ("id",)
    assert hb.rowkey_item == HbaseColumn("id", None, None, None, True, 15)
    assert hb.column_for("type") == HbaseColumn("type", "CF", "TYPE")
    assert hb.column_for("name") == HbaseColumn("name", "CF", "NAME")
    assert hb.column_for("unlisted") == HbaseColumn("unlisted", "CF", "UNLISTED")
    assert hb.families == ("CF",) and m.source_key == "mytest.person2"
    assert m.outerAdapterKey is None


def test_load_mappings_globs_in_stable_order():
    ms = load_mappings(["hbase/*.yml", "es8/*.yml", "rdb/mytest_user.yml", "es8/customer.yml"], base_dir=CANAL)
    assert [m.file for m in ms] == ["hbase/mytest_person2.yml", "es8/biz_order.yml", "es8/customer.yml",
                                    "es8/mytest_user.yml", "rdb/mytest_user.yml"]
    assert [m.kind for m in ms] == ["hbase", "es", "es", "es", "rdb"]


def test_sluice_own_examples_load():
    root = Path(__file__).resolve().parents[2]
    ms = load_mappings(["mappings/rdb/*.yml", "mappings/es/*.yml", "mappings/hbase/*.yml"], base_dir=root)
    assert {m.kind for m in ms} == {"rdb", "es", "hbase"}
