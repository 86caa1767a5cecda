"""Malformed mappings: each gives a ConfigError naming the file and the dotted key."""

from __future__ import annotations

import textwrap

import pytest

from pipeline.mapping import load_mapping, load_mappings, parse_mapping, parse_mapping_text
from sluice_common.errors import ConfigError

pytestmark = pytest.mark.unit

RDB = {"database": "mytest", "table": "user", "targetTable": "mytest2.user",
       "targetPk": {"id": None}, "targetColumns": {"id": None, "name": None}}
ES = {"_index": "i", "_id": "id", "sql": "select t.id, t.name from user t"}
HBASE = {"database": "mytest", "table": "person", "hbaseTable": "P", "columns": {"id": "ROWKEY"}}


def error(raw, file="m.yml") -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse_mapping(raw, file)
    return info.value


def db(**changes):
    return {"dbMapping": {**RDB, **changes}}


def es(**changes):
    return {"esMapping": {**ES, **changes}}


def hb(**changes):
    return {"hbaseMapping": {**HBASE, **changes}}


@pytest.mark.parametrize("raw, key, text", [
    # unknown keys, anywhere
    ({"colour": 1, **db()}, "colour", "unknown key"),
    (db(tabel="x"), "dbMapping.tabel", "unknown key"),
    (es(relations={"j": {"name": "a", "parnt": "x"}}), "esMapping.relations.j.parnt", "unknown key"),
    (hb(famly="F"), "hbaseMapping.famly", "unknown key"),
    (es(index="x"), "esMapping.index", "unknown key"),
    (db(escapeUpper=True), "dbMapping.escapeUpper", "phoenix"),
    (es(syncByTimestamp=True), "esMapping.syncByTimestamp", "not supported"),
    # wrong types
    (db(commitBatch=0), "dbMapping.commitBatch", "must be a positive integer"),
    (db(commitBatch="lots"), "dbMapping.commitBatch", "must be a positive integer"),
    (db(commitBatch=True), "dbMapping.commitBatch", "must be a positive integer"),
    (db(mapAll="maybe"), "dbMapping.mapAll", "must be true or false"),
    ({"concurrent": 3, **db()}, "concurrent", "must be true or false"),
    (db(targetPk=["id"]), "dbMapping.targetPk", "must be a mapping"),
    (db(targetColumns=["id"]), "dbMapping.targetColumns", "must be a mapping"),
    (db(etlCondition={"a": 1}), "dbMapping.etlCondition", "must be a string"),
    (db(database=["a"]), "dbMapping.database", "must be a name"),
    ({"dbMapping": "yes"}, "dbMapping", "must be a mapping"),
    (es(skips="id"), "esMapping.skips", "must be a list"),
    (es(objFields={"name": "list"}), "esMapping.objFields.name", "array:<separator>, object, json"),
    (hb(mode="FAST"), "hbaseMapping.mode", "STRING, NATIVE, PHOENIX"),
    # names the target refuses (accepted before issue 23's property test; the first sync failed)
    (es(_index="Users"), "esMapping._index", "must be lower case"),
    (es(_index="my index"), "esMapping._index", "must not contain ' '"),
    (es(_index="_x"), "esMapping._index", "must not start with '_'"),
    (hb(hbaseTable="my table"), "hbaseMapping.hbaseTable", "[namespace:]name"),
    (hb(hbaseTable="ns:-t"), "hbaseMapping.hbaseTable", "[namespace:]name"),
    (hb(family="a:b"), "hbaseMapping.family", "must not contain ':'"),
    (hb(columns={"id": "ROWKEY", "name": ".F:Q"}), "hbaseMapping.columns.name", "must not start with '.'"),
    # missing required
    (db(database=None), "dbMapping.database", "must be a name"),
    ({"dbMapping": {k: v for k, v in RDB.items() if k != "database"}}, "dbMapping.database", "is required"),
    (db(table=None), "dbMapping.table", "is required"),
    (db(targetTable=""), "dbMapping.targetTable", "is required"),
    (db(targetPk={}), "dbMapping.targetPk", "is required"),
    (db(targetColumns=None), "dbMapping.targetColumns", "is required unless mapAll"),
    ({"esMapping": {"_index": "i", "_id": "id"}}, "esMapping.sql", "is required"),
    (es(_id=None), "esMapping._id", "is required"),
    ({"hbaseMapping": {"database": "d", "table": "t"}}, "hbaseMapping.hbaseTable", "is required"),
    # bad targetTable
    (db(targetTable="a.b.c"), "dbMapping.targetTable", "must be 'table' or 'db.table'"),
    (db(targetTable="a."), "dbMapping.targetTable", "must be 'table' or 'db.table'"),
    (db(targetTable="my table"), "dbMapping.targetTable", "must be 'table' or 'db.table'"),
    (db(targetDb="other"), "dbMapping.targetTable", "targetDb is 'other'"),
    # mirrorDb
    (db(mirrorDb=True), "dbMapping.table", "must be absent or empty with mirrorDb"),
    ({"dbMapping": {"mirrorDb": True, "database": "d", "targetTable": "x"}}, "dbMapping.targetTable",
     "not used with mirrorDb"),
    # column mapping consistency
    (db(targetColumns={"id": "uid"}), "dbMapping.targetPk", "comes from 'id' here but from 'uid'"),
    (db(targetColumns={"a": "name", "b": "name"}), "dbMapping.targetColumns", "mapped to both 'a' and 'b'"),
    (db(excludeColumns=["x"]), "dbMapping.excludeColumns", "only applies with mapAll"),
    (db(mapAll=True, targetColumns=None, excludeColumns=["id"]), "dbMapping.excludeColumns",
     "primary key"),
    # ES fields named by other keys
    (es(_id="idd"), "esMapping._id", "'idd' is not a field selected by esMapping.sql (fields: id, name)"),
    (es(_id=None, pk="nope"), "esMapping.pk", "is not a field"),
    (es(skips=["x"]), "esMapping.skips", "is not a field"),
    (es(relations={"j": {"name": "c", "parent": "x"}}), "esMapping.relations.j.parent", "is not a field"),
    (es(relations={"j": {"parent": "id"}}), "esMapping.relations.j.name", "is required"),
    # HBase: $TYPE, row key
    (hb(columns={"id": "ROWKEY", "name": "NAME$STR"}), "hbaseMapping.columns.name", "unknown type $STR"),
    (hb(mode="PHOENIX", columns={"id": "ROWKEY", "n": "N$BIGDECIMAL"}), "hbaseMapping.columns.n",
     "unknown type $BIGDECIMAL for mode PHOENIX"),
    (hb(rowKey="id,type"), "hbaseMapping.rowKey", "repeated in the composite rowKey"),
    (hb(rowKey="a,b", columns={"id": "ROWKEY"}), "hbaseMapping.columns.id", "composite rowKey"),
    (hb(rowKey="a,a", columns={}), "hbaseMapping.rowKey", "column 'a' appears twice"),
    (hb(columns={"id": "ROWKEY", "no": "ROWKEY"}), "hbaseMapping.columns.no", "only one column can be ROWKEY"),
    (hb(columns={}), "hbaseMapping.rowKey", "no row key"),
    (hb(columns={"id": "ROWKEY LEN:x"}), "hbaseMapping.columns.id", "bad row key spec"),
    (hb(columns={"id": "ROWKEY", "n": ":Q"}), "hbaseMapping.columns.n", "FAMILY:QUALIFIER"),
    (hb(excludeColumns=["id"]), "hbaseMapping.excludeColumns", "part of the row key"),
    (hb(rowKeySeparator=""), "hbaseMapping.rowKeySeparator", "must not be empty"),
])
def test_bad_mapping_names_file_and_key(raw, key, text):
    e = error(raw)
    assert e.file == "m.yml" and e.key == key, str(e)
    assert text in str(e), str(e)
    assert str(e).startswith(f"m.yml: {key}: ")


@pytest.mark.parametrize("raw, key, text", [
    ({}, None, "no dbMapping, esMapping or hbaseMapping"),
    ({"dbMapping": None}, "dbMapping", "is empty"),
    ({"hbaseMapping": None, "groupId": "g"}, "hbaseMapping", "is empty"),
    ({"dbMapping": {"database": "d", "str": 1}}, "dbMapping.str", "unknown key"),
    ({"kuduMapping": {"database": "d"}}, "kuduMapping", "kudu adapter is not supported"),
    ({"fooMapping": {}}, "fooMapping", "not a mapping kind Sluice supports"),
    ({**db(), "esMapping": ES}, "esMapping", "exactly one section"),
    (None, None, "got an empty file"),
    ([1, 2], None, "got a list"),
    ("text", None, "got a str"),
])
def test_bad_top_level(raw, key, text):
    e = error(raw)
    assert e.key == key and text in str(e), str(e)


def test_unknown_key_is_reported_before_the_missing_one_it_causes():
    e = error(db(table=None, tabel="user"))
    assert e.key == "dbMapping.tabel"
    assert "known keys here: mirrorDb, database, table" in str(e)


def test_yaml_errors_name_file_and_line(tmp_path):
    path = tmp_path / "bad.yml"
    path.write_text("dbMapping:\n  database: d\n  table: [unclosed\n")
    with pytest.raises(ConfigError, match=r"bad\.yml: line \d+, column \d+: not valid YAML"):
        load_mapping(path)
    path.write_text("dbMapping:\n  database: d\n  database: e\n")
    with pytest.raises(ConfigError, match=r"bad\.yml: line 3, column 3: .*'database' appears twice"):
        load_mapping(path)


def test_missing_file_and_empty_glob(tmp_path):
    with pytest.raises(ConfigError, match=r"nope\.yml: file not found"):
        load_mappings(["nope.yml"], base_dir=tmp_path)
    with pytest.raises(ConfigError, match=r"rdb/\*\.yml: no mapping file matches this pattern"):
        load_mappings(["rdb/*.yml"], base_dir=tmp_path)


def test_validate_against_source_names_file_key_and_columns(tmp_path):
    (tmp_path / "mappings").mkdir()
    (tmp_path / "mappings" / "user.yml").write_text(textwrap.dedent("""\
        dbMapping:
          database: mytest
          table: user
          targetTable: user
          targetPk: {id: idd}
          targetColumns: {name: }
    """))
    (m,) = load_mappings(["mappings/*.yml"], base_dir=tmp_path)
    with pytest.raises(ConfigError) as info:
        m.validate_against_source(["id", "name", "c_time"], ["id"])
    assert str(info.value).splitlines()[0] == ("mappings/user.yml: dbMapping.targetPk: column 'idd' is not in the "
                                               "source table user (columns: id, name, c_time)")
    assert info.value.hint.startswith("if it was renamed, name the key's column as the source calls it now")
    with pytest.raises(ConfigError, match=r"dbMapping.targetColumns: column 'name' is not") as info:
        m.validate_against_source(["idd", "c_time"], ["idd"])
    assert "set `name: <its new name>` under dbMapping.targetColumns" in info.value.hint
    m.validate_against_source(["idd", "name"], ["idd"])


def test_validate_against_source_other_kinds():
    m = parse_mapping(hb(rowKey="id,type", columns={"name": "NAME"}), "h.yml")
    with pytest.raises(ConfigError, match=r"^h\.yml: hbaseMapping\.rowKey: column 'type' is not"):
        m.validate_against_source(["id", "name"], ["id"])
    m = parse_mapping(es(sql="select a.id, b.x from user a left join role b on b.id = a.id"), "e.yml")
    m.validate_against_source(["id"], ["id"])
    with pytest.raises(ConfigError, match=r"^e\.yml: esMapping\.sql: column 'x' \(b\.x\) is not in "
                                          r"the source table role"):
        m.validate_against_source(["id"], ["id"], table="role")
    mirror = parse_mapping({"dbMapping": {"mirrorDb": True, "database": "d"}}, "mirror.yml")
    mirror.validate_against_source(["a"], [], table="t")  # PK-less tables are mirrored too


def test_parse_mapping_text_reports_the_first_problem_and_counts_the_rest():
    e = pytest.raises(ConfigError, parse_mapping_text,
                      "dbMapping: {database: d, table: t, targetTable: x, targetPk: {id: }, mapAll: 3, "
                      "commitBatch: -1}", "x.yml").value
    assert str(e) == "x.yml: dbMapping.mapAll: must be true or false, got 3 (and 1 more problem(s))"
