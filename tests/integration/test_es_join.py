"""canal's ``mytest_user`` example (user LEFT JOIN role) and a computed ``_id``, for real, on
Elasticsearch and on OpenSearch (the ``search`` fixture).

The source tables live in the suite's MariaDB under a unique database; each test changes
them with SQL and hands the writer the Change records the capture stage would produce (Dml
strings). After every step the index must equal what the mapping SQL gives *now*, whatever
the order in which main-table and joined-table changes reach the writer (they travel in
different partitions), and replaying everything must change nothing.
"""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path

import pytest

from adapters.base import Change
from adapters.es import EsTarget, SourceDb, make_writer, reset_caches
from pipeline.mapping.loader import load_mapping, parse_mapping_text
from sluice_common.errors import TargetError
from tests.support.search import SearchServer
from tests.support.source import Source

REPO = Path(__file__).resolve().parents[2]
CANAL_ES8 = REPO.parent / "shared" / "reference" / "canal-mappings" / "es8"
TYPES = {"user": {"id": "bigint(20)", "name": "varchar(50)", "role_id": "bigint(20)", "c_time": "datetime"},
         "role": {"id": "bigint(20)", "role_name": "varchar(50)"},
         "biz_order": {"id": "bigint(20)", "customer_id": "bigint(20)", "serial_code": "varchar(30)",
                       "c_time": "datetime"}}


@pytest.fixture
def src(mariadb: dict):
    db = f"es_src_{uuid.uuid4().hex[:8]}"
    s = Source(mariadb, db, TYPES)
    s.sql(f"CREATE DATABASE `{db}`")
    s.sql(f"CREATE TABLE `{db}`.`user` (id BIGINT PRIMARY KEY, name VARCHAR(50), role_id BIGINT, c_time DATETIME)")
    s.sql(f"CREATE TABLE `{db}`.`role` (id BIGINT PRIMARY KEY, role_name VARCHAR(50))")
    s.sql(f"CREATE TABLE `{db}`.`biz_order` (id BIGINT PRIMARY KEY, customer_id BIGINT, serial_code VARCHAR(30), "
          "c_time DATETIME)")
    yield s
    s.sql(f"DROP DATABASE `{db}`")
    s.close()


@pytest.fixture
def index(search: SearchServer):
    name = f"sluice-es-{uuid.uuid4().hex[:10]}"
    reset_caches()
    yield name
    search.delete_index(name)


def target(search: SearchServer, mariadb: dict, db: str) -> EsTarget:
    ds = SourceDb(mariadb["host"], mariadb["port"], mariadb["user"], _secret(mariadb["password"]), db,
                  name="defaultDS")
    return search.target(sources=(("defaultDS", ds),))


def _secret(pw: str):
    from sluice_common.secrets import Secret
    return Secret(pw)


def user_mapping(index: str):
    """canal's es8/mytest_user.yml, unchanged but for the index name."""
    text = (CANAL_ES8 / "mytest_user.yml").read_text().replace("_index: mytest_user", f"_index: {index}")
    return parse_mapping_text(text, "mytest_user.yml")


def test_canal_example_loads_unchanged():
    m = load_mapping(CANAL_ES8 / "mytest_user.yml")
    assert m.spec.index == "mytest_user" and [t.name for t in m.spec.query.tables] == ["user", "role"]


def expected_users(src: Source) -> dict[str, dict]:
    """What the mapping SQL produces now, converted independently of the adapter."""
    rows = src.sql(f"SELECT a.id AS _id, a.name, a.role_id, b.role_name, a.c_time FROM `{src.db}`.`user` a "
                   f"LEFT JOIN `{src.db}`.`role` b ON b.id = a.role_id")
    return {str(r[0]): {"name": r[1], "role_id": r[2], "role_name": r[3],
                        "c_time": r[4].isoformat() if isinstance(r[4], dt.datetime) else None} for r in rows}


def apply(w, m, changes: list[Change], chunk: int = 1000) -> None:
    for i in range(0, len(changes), chunk):
        w.apply(m, changes[i:i + chunk])
        w.commit()


def _steps(s: Source):
    """Batches of source changes, made one batch at a time (a generator: the source moves on
    only when the next batch is asked for)."""
    t = "2024-05-01 10:00:0"
    b1 = [s.insert("role", id="1", role_name="admin"), s.insert("role", id="2", role_name="dev")]
    b1 += [s.insert("user", id=str(i), name=f"u{i}", role_id=r, c_time=f"{t}{i}")
           for i, r in ((1, "1"), (2, "2"), (3, "1"), (4, None), (5, "3"))]
    yield b1
    b2 = [s.insert("role", id="3", role_name="ops")]                    # user 5 gains its role
    b2 += s.update("user", "1", name="u1 renamed")                      # plain field: partial update
    b2 += s.update("user", "4", role_id="2")                            # join key: re-queried
    b2 += s.update("role", "2", role_name="developer")                  # every user of role 2
    yield b2
    b3 = [s.delete("role", "1")]                                        # users 1, 3: role_name null
    b3 += [s.insert("role", id="1", role_name="root")]                  # ... and back, renamed
    b3 += [s.delete("user", "2")]
    yield b3
    b4 = s.update("role", "2", id="20")                                 # joined PK change
    b4 += s.update("user", "3", id="33")                                # main PK change: new _id
    b4 += [s.insert("user", id="6", name="u6", role_id="20", c_time=None)]
    b4 += [s.delete("role", "3"), s.delete("user", "5")]
    yield b4


def test_mytest_user_converges_and_replays(search, src, index, mariadb):
    m = user_mapping(index)
    w = make_writer(target(search, mariadb, src.db), (m,))
    w.check()
    w.open()
    everything = []
    for batch in _steps(src):
        apply(w, m, batch)
        everything += batch
        assert search.docs(index) == expected_users(src)
    assert "role_name" in next(iter(search.docs(index).values()))
    assert w.stats.inserted[f"{src.db}.user"] == 7 and w.stats.deleted[f"{src.db}.role"] == 3
    before = search.docs(index)
    apply(w, m, everything)                   # replay every batch
    assert search.docs(index) == before == expected_users(src)
    apply(w, m, everything, chunk=3)          # replay in small chunks
    assert search.docs(index) == before
    w.close()


def test_joined_changes_before_main_changes_converge(search, src, index, mariadb):
    """Main-table and joined-table changes travel in different partitions: any order converges
    (here the source has already moved past every batch, as it does in production)."""
    m = user_mapping(index)
    w = make_writer(target(search, mariadb, src.db), (m,))
    w.open()
    everything = [c for b in _steps(src) for c in b]
    joined = [c for c in everything if c.table == "role"]
    main = [c for c in everything if c.table == "user"]
    apply(w, m, joined)
    apply(w, m, main)
    assert search.docs(index) == expected_users(src)


def test_deleted_and_readded_role(search, src, index, mariadb):
    m = user_mapping(index)
    w = make_writer(target(search, mariadb, src.db), (m,))
    w.open()
    apply(w, m, [src.insert("role", id="7", role_name="seven"),
                 src.insert("user", id="1", name="a", role_id="7", c_time="2024-01-01 00:00:00"),
                 src.insert("user", id="2", name="b", role_id="7", c_time=None)])
    assert {d["role_name"] for d in search.docs(index).values()} == {"seven"}
    apply(w, m, [src.delete("role", "7")])
    got = search.docs(index)
    assert {d["role_name"] for d in got.values()} == {None} and got == expected_users(src)
    apply(w, m, [src.insert("role", id="7", role_name="seven again")])
    assert {d["role_name"] for d in search.docs(index).values()} == {"seven again"}
    assert search.docs(index) == expected_users(src)


def order_mapping(index: str):
    """canal's es8/biz_order.yml without ``relations`` (the suite's Elasticsearch has no join field;
    with them, on OpenSearch: test_opensearch_join.py)."""
    text = (CANAL_ES8 / "biz_order.yml").read_text().replace("_index: customer", f"_index: {index}")
    head, _, rest = text.partition("  relations:\n")
    rest = rest.split("\n", 3)[3]  # drop the three lines of the relation
    return parse_mapping_text(head + rest, "biz_order.yml")


def test_computed_id_insert_update_delete(search, src, index, mariadb):
    m = order_mapping(index)
    assert m.spec.relations == {} and m.spec.query.field("_id").is_simple is False
    w = make_writer(target(search, mariadb, src.db), (m,))
    w.open()
    ins = [src.insert("biz_order", id=str(i), customer_id="9", serial_code=f"S{i}", c_time="2024-02-03 04:05:06")
           for i in range(1, 5)]
    apply(w, m, ins)
    got = search.docs(index)
    assert sorted(got) == ["oid_1", "oid_2", "oid_3", "oid_4"]
    assert got["oid_2"] == {"order_id": 2, "order_serial": "S2", "order_time": "2024-02-03T04:05:06"}
    changes = src.update("biz_order", "2", serial_code="S2b") + [src.delete("biz_order", "3")]
    changes += src.update("biz_order", "4", id="40")
    apply(w, m, changes)
    got = search.docs(index)
    assert sorted(got) == ["oid_1", "oid_2", "oid_40"] and got["oid_2"]["order_serial"] == "S2b"
    apply(w, m, ins + changes)  # replay: the rows are gone or moved, the index stays as the source says
    assert sorted(search.docs(index)) == ["oid_1", "oid_2", "oid_40"]


def test_missing_document_on_update_is_requeried(search, src, index, mariadb):
    """The missing-document rule: an UPDATE whose document is absent indexes the re-queried one."""
    m = user_mapping(index)
    w = make_writer(target(search, mariadb, src.db), (m,))
    w.open()
    src.insert("role", id="1", role_name="admin")
    src.insert("user", id="1", name="a", role_id="1", c_time=None)   # its INSERT never reached the index
    apply(w, m, src.update("user", "1", name="b"))
    assert search.docs(index) == expected_users(src) == {"1": {"name": "b", "role_id": 1, "role_name": "admin",
                                                            "c_time": None}}


def test_bulk_item_failure_raises_target_error(search, src, index, mariadb):
    search.create_index(index, {"dynamic": "strict", "properties": {
        "name": {"type": "keyword"}, "role_id": {"type": "long"}, "c_time": {"type": "date"}}})
    m = user_mapping(index)
    w = make_writer(target(search, mariadb, src.db), (m,))
    w.open()
    changes = [src.insert("user", id="1", name="a", role_id=None, c_time=None)]
    with pytest.raises(TargetError) as e:
        apply(w, m, changes)
    text = str(e.value)
    assert index in text and "_id=1" in text and "strict_dynamic_mapping_exception" in text
    assert "role_name" in text and mariadb["password"] not in text
    assert ("OpenSearch rejected" if search.is_os else "Elasticsearch rejected") in text


def test_a_join_giving_several_rows_for_one_document_is_refused(search, src, index, mariadb):
    """A one-to-many join (every user of a role into the role's document): the index kept whichever
    row came last and the run said ok (a new user's probe); it is refused naming the mapping and the
    document, and the fix (the many side as the main table) indexes every row."""
    roles = parse_mapping_text(f"esMapping:\n  _index: {index}\n  _id: _id\n  sql: \"select b.id as _id, "
                               "b.role_name, a.name from role b left join user a on a.role_id = b.id\"\n", "roles.yml")
    w = make_writer(target(search, mariadb, src.db), (roles,))
    w.open()
    changes = [src.insert("role", id="1", role_name="admin"), src.insert("role", id="2", role_name="dev"),
               src.insert("user", id="1", name="a", role_id="1", c_time=None),
               src.insert("user", id="2", name="b", role_id="2", c_time=None),
               src.insert("user", id="3", name="c", role_id="1", c_time=None)]
    with pytest.raises(TargetError) as e:
        apply(w, roles, changes)
    assert "roles.yml: esMapping.sql gives more than one row for document _id=1" in str(e.value)
    assert "every join many-to-one" in e.value.hint
    w.close()
    m = user_mapping(index)  # the fix: a document per user, its role joined many-to-one
    w = make_writer(target(search, mariadb, src.db), (m,))
    w.open()
    apply(w, m, changes)
    assert search.docs(index) == expected_users(src) and len(search.docs(index)) == 3
    w.close()
