"""Join relations for real, on OpenSearch: canal's es8 customer.yml (parent) and biz_order.yml
(child, ``_id`` = ``concat('oid_', t.id)``, routed to ``customer_id``) into one index with the
join field, through the writer, with the source changed by SQL as the binlog would report it.

The index has 4 shards, so a routing mistake is visible: a child on another shard than its
parent is not found by ``has_child``, and a child moved without deleting its old copy is held
twice. After every step every document (``_id``, routing, ``_source``) equals, as canonical JSON
bytes, what the two mapping SQLs give on the source, and the parent/child queries answer what
the tables say. The suite's Elasticsearch cannot run this (no parent-join module: docs/es.md).
"""

from __future__ import annotations

import uuid

import pytest

from adapters.base import Change
from adapters.es import SourceDb, make_writer, reset_caches
from pipeline.mapping.loader import parse_mapping_text
from sluice_common.secrets import Secret
from tests.support import joins
from tests.support.search import SearchServer
from tests.support.source import Source


@pytest.fixture
def os_server(opensearch: dict):
    server = SearchServer.open("opensearch", opensearch)
    yield server
    server.close()


@pytest.fixture
def src(mariadb: dict):
    db = f"os_join_{uuid.uuid4().hex[:8]}"
    s = Source(mariadb, db, joins.TYPES)
    s.sql(f"CREATE DATABASE `{db}`")
    for ddl in joins.DDL:
        s.sql(ddl.format(db=db))
    yield s
    s.sql(f"DROP DATABASE `{db}`")
    s.close()


@pytest.fixture
def index(os_server: SearchServer):
    name = f"sluice-join-{uuid.uuid4().hex[:8]}"
    reset_caches()
    os_server.create_index(name, {"properties": joins.PROPERTIES},
                           {"number_of_shards": 4, "number_of_replicas": 0})
    yield name
    os_server.delete_index(name)


class Join:
    """The two canal mappings on one writer; changes go to the mapping of their table."""

    def __init__(self, server: SearchServer, src: Source, mariadb: dict, index: str):
        self.server, self.src, self.index = server, src, index
        self.customer = parse_mapping_text(joins.canal_text("customer.yml", index), "customer.yml")
        self.order = parse_mapping_text(joins.canal_text("biz_order.yml", index), "biz_order.yml")
        ds = SourceDb(mariadb["host"], mariadb["port"], mariadb["user"], Secret(mariadb["password"]), src.db,
                      name="defaultDS")
        self.writer = make_writer(server.target(sources=(("defaultDS", ds),)), (self.customer, self.order))
        self.writer.check()
        self.writer.open()

    def apply(self, changes: list[Change]) -> None:
        for table, m in (("customer", self.customer), ("biz_order", self.order)):
            mine = [c for c in changes if c.table == table]
            if mine:
                self.writer.apply(m, mine)
                self.writer.commit()

    def run_sql(self, sql: str):
        with self.src.conn.cursor() as cur:
            cur.execute(f"USE `{self.src.db}`")
            cur.execute(sql)
            return [d[0] for d in cur.description], list(cur.fetchall())

    def assert_converged(self) -> dict:
        want = joins.expected(self.run_sql)
        got = joins.actual(self.server, self.index)
        assert joins.canonical(got) == joins.canonical(want)
        customers = {k for k, (r, _) in want.items() if r is None}
        assert joins.parents_with_children(self.server, self.index) == \
            {r for r, _ in want.values() if r is not None and r in customers}
        assert joins.children_with_parent(self.server, self.index) == \
            {k for k, (r, _) in want.items() if r is not None and r in customers}
        return got


def shard_of(server: SearchServer, index: str, routing: str) -> int:
    resp = server.client.search_shards(index=index, params={"routing": routing})
    return resp["shards"][0][0]["shard"]


def _lifecycle(src: Source, a: str, b: str, c: str):
    """The source's changes, one step at a time (a generator: the source moves on only when the
    next step is asked for), each as the capture stage would report it."""
    t = "2024-03-0{} 12:00:00"
    # a child inserted before its parent: indexed, routed to the parent id that does not exist yet
    yield [src.insert("biz_order", id="1", customer_id=a, serial_code="S1", c_time=t.format(1))]
    yield [src.insert("customer", id=a, name="ann", email="ann@example.com", c_time=t.format(1)),
           src.insert("customer", id=b, name="bob", email=None, c_time=t.format(2)),
           src.insert("customer", id=c, name="cy", email="cy@example.com", c_time=t.format(3)),
           src.insert("biz_order", id="2", customer_id=a, serial_code="S2", c_time=t.format(2)),
           src.insert("biz_order", id="3", customer_id=b, serial_code="S3", c_time=None),
           src.insert("biz_order", id="4", customer_id=c, serial_code="S4", c_time=t.format(4)),
           src.insert("biz_order", id="5", customer_id=c, serial_code="S5", c_time=t.format(5))]
    # a child moved to another parent (another shard), and a plain child field changed
    yield src.update("biz_order", "2", customer_id=b) + src.update("biz_order", "3", serial_code="S3b")
    # a parent's key changed, its children re-pointed (the job splits the key change)
    yield (src.update("customer", c, id="900") + src.update("biz_order", "4", customer_id="900")
           + src.update("biz_order", "5", customer_id="900"))
    # a parent deleted with its children; another parent deleted alone (its child stays, orphaned)
    yield [src.delete("biz_order", "4"), src.delete("biz_order", "5"), src.delete("customer", "900")]
    yield [src.delete("customer", b)]
    # a child's key changed: its computed _id moves from oid_3 to oid_33
    yield src.update("biz_order", "3", id="33")


def test_parent_child_lifecycle(os_server, src, index, mariadb):
    j = Join(os_server, src, mariadb, index)
    # two parents on different shards, so that moving a child between them moves it between shards
    ids = [str(i) for i in range(1, 40)]
    a = ids[0]
    b = next(i for i in ids[1:] if shard_of(os_server, index, i) != shard_of(os_server, index, a))
    c = next(i for i in ids[1:] if i != b and shard_of(os_server, index, i) != shard_of(os_server, index, b))
    everything = []
    for step in _lifecycle(src, a, b, c):   # the source moves on one step at a time
        j.apply(step)
        j.assert_converged()
        everything += step
    final = joins.actual(os_server, index)
    assert final[f"oid_{1}"][0] == a and final["oid_2"][0] == b and "oid_3" not in final and "oid_33" in final
    assert final["oid_2"][1] == {"order_id": 2, "order_serial": "S2", "order_time": "2024-03-02T12:00:00",
                                 "customer_order": {"name": "order", "parent": b}}
    assert final[a] == (None, {"name": "ann", "email": "ann@example.com", "customer_order": "customer"})
    assert joins.parents_with_children(os_server, index) == {a}           # b is gone, its children orphaned
    j.apply(everything)                                                     # replay: nothing changes
    assert joins.actual(os_server, index) == final
    j.assert_converged()


def test_children_before_parents_in_any_order(os_server, src, index, mariadb):
    """Parents and children travel in different partitions: a chunk of child changes applied
    before (or after) the parent changes it depends on converges to the same documents."""
    j = Join(os_server, src, mariadb, index)
    parents = [src.insert("customer", id=str(i), name=f"c{i}", email=None, c_time=None) for i in range(1, 6)]
    children = [src.insert("biz_order", id=str(10 + i), customer_id=str(i % 5 + 1), serial_code=f"S{i}",
                           c_time="2024-01-01 00:00:00") for i in range(12)]
    moves = [ch for i in range(0, 12, 3) for ch in src.update("biz_order", str(10 + i), customer_id="1")]
    rekey = src.update("customer", "2", id="20")
    j.apply(children + moves)              # every child change first
    j.apply(parents + rekey)               # then the parents
    got = j.assert_converged()
    assert sum(1 for k in got if k.startswith("oid_")) == 12
    j.apply(parents + rekey + children + moves)   # and the other way round, as a replay
    j.assert_converged()
