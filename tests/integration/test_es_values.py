"""Values: the golden every-type row through the real Elasticsearch and OpenSearch (the ``search``
fixture), by field type; the same document from the binlog strings and from re-querying the
source (invariant 4)."""

from __future__ import annotations

import base64
import uuid

import pymysql
import pytest

from adapters.base import Change
from adapters.es import SourceDb, make_writer, reset_caches
from adapters.es.errors import EsRowError
from adapters.es.values import capture_converter, field_converter
from pipeline.mapping.loader import parse_mapping_text
from sluice_common.secrets import Secret
from tests.support.golden import EVERY_TYPE, EVERY_TYPE_VALUES, every_type_row
from tests.support.search import SearchServer

COLS = [c for c, _, _ in EVERY_TYPE_VALUES]
#: an explicit mapping for every column (numbers that do not fit a long are keywords)
ES_TYPES = {"u64": "keyword", "i64": "long", "tiny1": "boolean", "tiny_s": "byte", "med_u": "integer",
            "bit64": "keyword", "bit5": "long", "dec": "keyword", "f32": "float", "f32b": "float", "f64": "double",
            "d": "date", "d0": "date", "dt6": "date", "dt0": "date", "ts6": "date", "ts0": "date", "tm": "keyword",
            "tm2": "keyword", "y": "short", "e": "keyword", "e2": "keyword", "s": "keyword", "j": "flattened",
            "txt": "text", "bin": "binary", "blob": "binary", "bin4": "binary", "ch": "keyword", "nul": "keyword"}


def es_types(search: SearchServer) -> dict[str, str]:
    """ES_TYPES on this server: OpenSearch's ``flattened`` is ``flat_object``."""
    return {c: ("flat_object" if t == "flattened" and search.is_os else t) for c, t in ES_TYPES.items()}


@pytest.fixture
def index(search: SearchServer):
    name = f"sluice-es-{uuid.uuid4().hex[:10]}"
    reset_caches()
    yield name
    search.delete_index(name)


def mapping(index: str, sql: str, extra: str = ""):
    return parse_mapping_text(f"esMapping:\n  _index: {index}\n  _id: id\n  sql: \"{sql}\"\n{extra}", "t.yml")


def row_sql() -> str:
    return "select " + ", ".join(f"t.{c}" for c in COLS) + " from every_type t"


def test_every_type_by_field_type(search, index):
    search.create_index(index, {"properties": {c: {"type": t} for c, t in es_types(search).items()}})
    m = mapping(index, row_sql(), "  objFields:\n    s: 'array:,'\n")
    w = make_writer(search.target(), (m,))
    w.open()
    w.apply(m, [EVERY_TYPE.insert(every_type_row())])
    d = search.get(index, "1")
    v = dict((c, x) for c, _, x in EVERY_TYPE_VALUES)
    assert d["u64"] == "18446744073709551615" and d["bit64"] == "18446744073709551615"
    assert d["i64"] == -9223372036854775808 and d["tiny1"] is True and d["tiny_s"] == -128
    assert d["dec"] == v["dec"]                                   # exact text in a keyword
    assert d["f32"] == float(v["f32"]) and d["f32b"] == 1.1 and d["f64"] == float(v["f64"])
    assert d["d"] == "2024-02-29" and d["d0"] is None and d["dt0"] is None and d["ts0"] is None
    assert d["dt6"] == "2024-11-03T01:30:00.123456"                # DATETIME: wall clock, no zone
    assert d["ts6"] == "2024-11-03T05:30:00.654321Z"               # TIMESTAMP: the UTC instant
    assert d["tm"] == "-838:59:59" and d["tm2"] == "25:00:01" and d["y"] == 0
    assert d["e"] == "" and d["s"] == ["a", "c"]
    assert d["j"] == {"a": [1, 2.5, "x"], "b": None, "c": "ü🚀"}
    assert d["txt"] == v["txt"] and d["ch"] == "ab" and d["nul"] is None
    assert base64.b64decode(d["bin"]) == v["bin"].encode("latin-1")
    assert base64.b64decode(d["blob"]) == bytes(range(256))
    assert base64.b64decode(d["bin4"]) == b"\x00\x01\x00\x00"
    # date fields are searchable as dates: the DATETIME and TIMESTAMP above are 4 h apart
    assert search.count(index, {"range": {"ts6": {"gt": "2024-11-03T05:00:00Z"}}}) == 1
    assert search.count(index, {"range": {"dt6": {"gt": "2024-11-03T05:00:00Z"}}}) == 0


def test_unmapped_index_defaults_and_long_overflow_fails(search, index):
    cols = [c for c in COLS if c not in ("u64", "bit64")]
    m = mapping(index, "select " + ", ".join(f"t.{c}" for c in cols) + " from every_type t")
    w = make_writer(search.target(), (m,))
    w.open()
    w.apply(m, [EVERY_TYPE.insert(every_type_row())])
    d = search.get(index, "1")
    values = {c: x for c, _, x in EVERY_TYPE_VALUES}
    assert d["dec"] == float(values["dec"])  # a double by default
    assert d["tiny1"] == 255 and d["bit5"] == 5 and d["j"] == values["j"]  # JSON stays text
    m2 = mapping(index + "-b", row_sql())
    w2 = make_writer(search.target(), (m2,))
    try:
        with pytest.raises(EsRowError) as err:  # a row error (dead-letterable), not a transient one
            w2.apply(m2, [EVERY_TYPE.insert(every_type_row())])
        text = str(err.value)
        if search.is_os:  # OpenSearch names the same failure its own way
            assert text.startswith(f"OpenSearch rejected index of document _id=1 in index {index}-b (HTTP 400, "
                                   "mapper_parsing_exception: failed to parse field [u64] of type [long]"), text
        else:
            assert text.startswith(f"Elasticsearch rejected index of document _id=1 in index {index}-b (HTTP 400, "
                                   "document_parsing_exception: [1:8] failed to parse field [u64] of type [long] "
                                   "in document with id '1'"), text
        assert "18446744073709551615" in text and "out of range of long" in text, text
        assert "fix: the value does not fit the index mapping" in text, text
        assert err.value.key == "_id=1"
    finally:
        search.delete_index(index + "-b")


def test_geo_point_boolean_and_object_rules():
    geo = field_converter("geo_point", None)
    assert geo("52.5,13.4") == {"lat": 52.5, "lon": 13.4}
    with pytest.raises(ValueError, match="geo_point"):
        geo("north")
    assert capture_converter("tinyint(1)", "boolean", None)("0") is False
    assert capture_converter("tinyint(1)", "boolean", None)("2") is True
    assert capture_converter("varchar(20)", None, "array:;")("a;b;;c") == ["a", "b", "", "c"]
    assert capture_converter("varchar(20)", "long", "array:,")("1,2") == [1, 2]
    assert capture_converter("decimal(5,2)", "long", None)("3.00") == 3
    with pytest.raises(ValueError, match="whole number"):
        capture_converter("decimal(5,2)", "long", None)("3.50")
    with pytest.raises(ValueError, match="JSON"):
        capture_converter("text", None, "object")("{not json")
    # a keyword keeps a DECIMAL's text with its scale (str() of a Decimal wrote 1E-30: a new user's probe)
    tiny = "0.000000000000000000000000000001"
    assert capture_converter("decimal(65,30)", "keyword", None)(tiny) == tiny


@pytest.fixture
def source_table(mariadb: dict):
    db = f"es_val_{uuid.uuid4().hex[:8]}"
    conn = pymysql.connect(host=mariadb["host"], port=mariadb["port"], user=mariadb["user"],
                           password=mariadb["password"], autocommit=True, charset="utf8mb4", binary_prefix=True)
    cur = conn.cursor()
    cur.execute(f"CREATE DATABASE `{db}`")
    cur.execute("SET SESSION sql_mode = '', time_zone = '+00:00'")
    defs = ", ".join(f"`{c}` {t}" for c, t, _ in EVERY_TYPE_VALUES)
    cur.execute(f"CREATE TABLE `{db}`.every_type ({defs}, PRIMARY KEY (id))")
    cur.execute(f"CREATE TABLE `{db}`.extra (id INT PRIMARY KEY, label VARCHAR(10))")
    params = []
    for _, t, v in EVERY_TYPE_VALUES:
        if v is not None and t.split("(")[0] in ("varbinary", "blob", "binary"):
            v = v.encode("latin-1")
        elif v is not None and t.startswith("bit"):
            v = int(v)  # a string would be taken as the bits of its characters
        params.append(v)
    cur.execute(f"INSERT INTO `{db}`.every_type VALUES ({', '.join(['%s'] * len(params))})", params)
    yield mariadb, db
    cur.execute(f"DROP DATABASE `{db}`")
    conn.close()


def test_requeried_document_equals_binlog_document(search, index, source_table):
    """A join mapping re-queries the row; a single-table mapping builds it from the binlog
    strings. Both must give the same document (FLOAT excepted: docs/es.md)."""
    mariadb, db = source_table
    cols = [c for c in COLS if c not in ("f32", "f32max")]  # FLOAT re-queried: 6 digits (docs/es.md)
    types = es_types(search)
    search.create_index(index, {"properties": {c: {"type": types[c]} for c in cols if c in types}})
    ds = SourceDb(mariadb["host"], mariadb["port"], mariadb["user"], Secret(mariadb["password"]), db,
                  name="defaultDS")
    target = search.target(sources=(("defaultDS", ds),))
    single = mapping(index, "select " + ", ".join(f"t.{c}" for c in cols) + " from every_type t")
    joined = mapping(index, "select " + ", ".join(f"t.{c}" for c in cols)
                     + " from every_type t left join extra x on x.id = t.id")
    change = Change("INSERT", db, "every_type", every_type_row(), None, ("id",), EVERY_TYPE.mysql_type)
    w = make_writer(target, (single, joined))
    w.open()
    w.apply(single, [change])
    from_binlog = search.get(index, "1")
    search.delete_doc(index, "1")
    w.apply(joined, [change])
    from_source = search.get(index, "1")
    assert from_source == from_binlog
