"""What the apply job asks a mapping: source keys, matching, targets, column mappings."""

from __future__ import annotations

import pytest

from pipeline.mapping import HbaseColumn, parse_mapping

pytestmark = pytest.mark.unit


def rdb(**section):
    return parse_mapping({"dbMapping": section}, "m.yml")


def test_map_all_is_identity_minus_excluded_with_renames():
    m = rdb(database="d", table="t", targetTable="t2", targetPk={"uid": "id"}, mapAll=True,
            targetColumns={"full_name": "name"}, excludeColumns=["password"])
    assert m.concurrent is True and m.kind == "rdb"
    db = m.dbMapping
    assert db.target() == (None, "t2")
    assert db.column_mapping(["id", "name", "password", "new_col"]) == {
        "id": "uid", "name": "full_name", "new_col": "new_col"}


def test_explicit_columns_only_and_pk_added():
    db = rdb(database="d", table="t", targetDb="x", targetTable="t2", targetPk={"id": None},
             targetColumns={"n": "name", "c": ""}).dbMapping
    assert db.target() == ("x", "t2")
    assert db.column_mapping(["id", "name", "c", "other"]) == {"id": "id", "name": "n", "c": "c"}
    assert db.column_mapping(["name"]) == {"name": "n"}


def test_target_table_may_repeat_target_db():
    assert rdb(database="d", table="t", targetDb="x", targetTable="x.t2", targetPk={"id": None},
               mapAll=True).dbMapping.target() == ("x", "t2")


def test_case_insensitive_matching_and_columns():
    m = rdb(database="MyDb", table="User", targetTable="u", targetPk={"id": "ID"}, mapAll=True,
            caseInsensitive=True)
    assert m.matches("mydb", "USER") and not m.matches("mydb", "users")
    assert m.dbMapping.column_mapping(["Id", "Name"]) == {"Id": "id", "Name": "Name"}
    m.validate_against_source(["ID", "name"], ["ID"])


def test_mirror_db():
    m = rdb(mirrorDb=True, database="shop", targetDb="shop_copy")
    assert m.source_key == "shop.*" and m.matches("shop", "anything") and not m.matches("x", "anything")
    assert m.dbMapping.target("orders") == ("shop_copy", "orders")
    assert m.dbMapping.column_mapping(["a", "b"]) == {"a": "a", "b": "b"}
    assert rdb(mirrorDb=True, database="shop").dbMapping.target("o") == ("shop", "o")


def test_canal_lenient_scalars():
    m = parse_mapping({"concurrent": "false", "dbMapping": {
        "database": 2024, "table": "t", "targetTable": "t", "targetPk": {"id": None},
        "mapAll": "true", "commitBatch": "500"}}, "m.yml")
    assert m.concurrent is False and m.dbMapping.database == "2024"
    assert m.dbMapping.mapAll is True and m.dbMapping.commitBatch == 500


def test_hbase_columns_parse():
    m = parse_mapping({"hbaseMapping": {
        "mode": "native", "database": "d", "table": "t", "hbaseTable": "T", "family": "F",
        "uppercaseQualifier": False, "rowKey": "id, kind", "rowKeySeparator": "#",
        "columns": {"name": "name$STRING", "age": "G:age$integer", "raw": "$BYTES", "note": None},
        "excludeColumns": ["secret"]}}, "h.yml")
    hb = m.hbaseMapping
    assert hb.mode == "NATIVE" and hb.rowkey_columns == ("id", "kind") and hb.rowkey_item is None
    assert hb.column_items == (
        HbaseColumn("name", "F", "name", "STRING"), HbaseColumn("age", "G", "age", "INTEGER"),
        HbaseColumn("raw", "F", "raw", "BYTES"), HbaseColumn("note", "F", "note"))
    assert hb.families == ("F", "G")
    assert hb.column_for("secret") is None and hb.column_for("x") == HbaseColumn("x", "F", "x")


def test_hbase_phoenix_types_and_rowkey_type():
    hb = parse_mapping({"hbaseMapping": {
        "mode": "PHOENIX", "database": "d", "table": "t", "hbaseTable": "T",
        "columns": {"id": "ROWKEY LEN:8$UNSIGNED_LONG", "v": "V$VARCHAR"}}}, "h.yml").hbaseMapping
    assert hb.rowkey_item == HbaseColumn("id", None, None, "UNSIGNED_LONG", True, 8)


def test_es_pk_without_id_and_obj_fields():
    m = parse_mapping({"esMapping": {
        "_index": "i", "_type": "_doc", "pk": "id", "upsert": True, "commitBatch": 10,
        "sql": "select t.id, t.labels from t", "objFields": {"labels": "array:;"}}}, "e.yml")
    es = m.esMapping
    assert es.id is None and es.id_field == "id" and es.type == "_doc" and es.upsert
    assert es.objFields == {"labels": "array:;"} and m.source_key == "*.t"
