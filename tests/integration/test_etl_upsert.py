"""``Change(kind="UPSERT")`` (full loads) in every adapter: a reload over stale rows leaves the
source's values (not the stale ones a duplicate-skipping INSERT would keep), the same key
twice in a chunk keeps the last row, and a conflict on a secondary unique key is an error,
never a silent update of another row."""

from __future__ import annotations

import uuid

import happybase
import pytest
from elasticsearch import Elasticsearch

from adapters.base import Change
from adapters.es import EsTarget
from adapters.es import make_writer as es_writer
from adapters.es import reset_caches as es_reset
from adapters.hbase import make_writer as hb_writer
from adapters.hbase import target_from_adapter as hb_target
from adapters.hbase.verify import read_rows
from pipeline.config import OuterAdapter
from pipeline.mapping.model import parse_mapping
from sluice_common.errors import TargetError
from tests.integration.test_rdb_conformance import MariaEnv, PgEnv, SqliteEnv, apply
from tests.integration.test_rdb_types import assert_every_type_row_mariadb, assert_every_type_row_postgresql
from tests.support import golden
from tests.support.golden import ACCOUNTS, EVERY_TYPE, GoldenTable

UNIQUE = GoldenTable("uacc", ACCOUNTS.columns, pk=("id",), unique=(("name",),))


#: a value for every column of the every-type row other than the golden one (the key stays)
STALE = {"u64": "1", "i64": "2", "tiny1": "0", "tiny_s": "3", "med_u": "4", "bit64": "5", "bit5": "6",
         "dec": "0.5", "f32": "2.5", "f32b": "3.5", "f32max": "4.5", "f64": "5.5", "d": "2001-01-01",
         "d0": "2001-01-02", "dt6": "2001-01-03 04:05:06.000007", "dt0": "2001-01-04 00:00:00",
         "ts6": "2001-01-05 00:00:00.000001", "ts0": "2001-01-06 00:00:00", "tm": "01:02:03.000004",
         "tm2": "04:05:06", "y": "1999", "e": "small", "e2": "small", "s": "b", "j": "[]", "txt": "stale",
         "bin": "\x01", "blob": "stale", "bin4": "abcd", "ch": "zz", "nul": "x"}


def upsert(c: Change) -> Change:
    return c._replace(kind="UPSERT")


@pytest.fixture(scope="module", params=["mariadb", "postgresql", "sqlite"])
def env(request, tmp_path_factory):
    if request.param == "mariadb":
        e = MariaEnv(request.getfixturevalue("mariadb_target"))
    elif request.param == "postgresql":
        e = PgEnv(request.getfixturevalue("postgres"))
    else:
        e = SqliteEnv(str(tmp_path_factory.mktemp("etl") / "target.db"))
    yield e
    e.drop()


def _rows(n: int, tag: str) -> list[dict]:
    return [ACCOUNTS.row(id=str(i), name=f"{tag} {i}", balance=f"{i}.00", note=None if i % 2 else tag,
                         score=str(i)) for i in range(1, n + 1)]


def test_rdb_upsert_overwrites_stale_rows(env):
    route = env.create(ACCOUNTS)
    apply(env, route, [[ACCOUNTS.insert(r) for r in _rows(6, "stale")]])
    fresh = _rows(10, "fresh")
    stats = apply(env, route, [[upsert(ACCOUNTS.insert(r)) for r in fresh[:4]],
                               [upsert(ACCOUNTS.insert(r)) for r in fresh[4:]]])
    assert sum(stats.inserted.values()) == 10
    got = sorted(env.rows(route, ACCOUNTS.names, ACCOUNTS.pk), key=lambda r: int(r["id"]))
    assert got == sorted(fresh, key=lambda r: int(r["id"]))


def test_rdb_upsert_same_key_twice_keeps_the_last(env):
    route = env.create(ACCOUNTS)
    a = ACCOUNTS.row(id="1", name="first", balance="1.00", note=None, score="1")
    b = {**a, "name": "second"}
    apply(env, route, [[upsert(ACCOUNTS.insert(a)), upsert(ACCOUNTS.insert(b))]])
    assert [r["name"] for r in env.rows(route, ACCOUNTS.names, ACCOUNTS.pk)] == ["second"]


def test_rdb_upsert_refuses_a_secondary_unique_conflict(env):
    route = env.create(UNIQUE)
    one = UNIQUE.row(id="1", name="taken", balance="1.00", note=None, score="1")
    apply(env, route, [[UNIQUE.insert(one)]])
    other = UNIQUE.row(id="2", name="taken", balance="2.00", note=None, score="2")
    with pytest.raises(TargetError):
        apply(env, route, [[upsert(UNIQUE.insert(other))]])
    assert env.rows(route, UNIQUE.names, UNIQUE.pk)[0]["id"] == "1"  # the other row was not touched


def test_rdb_upsert_every_type_row_over_a_stale_one(env):
    if env.family == "sqlite":
        pytest.skip("SQLite keeps every type as given; covered by MariaDB and PostgreSQL")
    route = env.create(EVERY_TYPE)
    row = golden.every_type_row()
    stale = {**row, **STALE}  # every column differs, so a column the UPSERT leaves alone shows
    apply(env, route, [[EVERY_TYPE.insert(stale)]])
    apply(env, route, [[upsert(EVERY_TYPE.insert(row))]])  # MariaDB: ENUM '' goes the relaxed path
    assert env.run(f"SELECT COUNT(*) FROM {env.qt(route.target_table)}") == [(1,)]
    if env.family == "mysql":  # every column, by docs/rdb.md "Values" (as a plain INSERT writes it)
        assert_every_type_row_mariadb(env, route, row["id"])
    else:
        assert_every_type_row_postgresql(env, route, row["id"])


# -- Elasticsearch and HBase: UPSERT is their INSERT, which overwrites ------------------------------
def test_es_upsert_overwrites_the_document(elasticsearch):
    es = Elasticsearch(elasticsearch["url"], request_timeout=30)
    index = f"sluice-etl-{uuid.uuid4().hex[:8]}"
    es_reset()
    m = parse_mapping({"esMapping": {"_index": index, "_id": "id",
                                     "sql": "select t.id, t.name, t.note from accounts t"}}, "accounts.yml")
    w = es_writer(EsTarget((elasticsearch["url"],)), (m,))
    try:
        w.open()
        stale = ACCOUNTS.row(id="1", name="stale", balance="1.00", note="old note", score="1")
        w.apply(m, [ACCOUNTS.insert(stale)])
        w.apply(m, [upsert(ACCOUNTS.insert({**stale, "name": "fresh", "note": None}))])
        es.indices.refresh(index=index)
        hits = es.search(index=index)["hits"]["hits"]
        assert [(h["_id"], h["_source"]) for h in hits] == [("1", {"name": "fresh", "note": None})]
        assert sum(w.stats.inserted.values()) == 2
    finally:
        es.indices.delete(index=index, ignore_unavailable=True)
        es.close()


def test_hbase_upsert_overwrites_cells_and_deletes_nulls(hbase):
    target = hb_target(OuterAdapter(name="hbase", key="hb", hosts=f"{hbase['host']}:{hbase['port']}"),
                       "sluice.yml", "groups[0].outerAdapters[0]")
    name = f"SLT_etl_{uuid.uuid4().hex[:6]}"
    m = parse_mapping({"hbaseMapping": {"database": ACCOUNTS.database, "table": ACCOUNTS.name, "hbaseTable": name,
                                        "autoCreateTable": True, "columns": {"id": "ROWKEY"}}}, f"{name}.yml")
    w = hb_writer(target, (m,))
    w.check()
    conn = happybase.Connection(hbase["host"], hbase["port"])
    try:
        w.open()
        stale = ACCOUNTS.row(id="1", name="stale", balance="1.00", note="old note", score="1")
        w.apply(m, [ACCOUNTS.insert(stale)])
        w.commit()
        fresh = {**stale, "name": "fresh", "note": None}
        w.apply(m, [upsert(ACCOUNTS.insert(fresh))])
        w.commit()
        got = read_rows(conn, m, ACCOUNTS.mysql_type)
        assert list(got.values()) == [fresh]
        assert b"CF:NOTE" not in conn.table(name).row(b"1")  # the stale cell is gone, not kept
    finally:
        w.close()
        conn.delete_table(name, disable=True)
        conn.close()
