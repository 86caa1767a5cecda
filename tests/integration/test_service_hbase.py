"""The HBase service (standalone HBase + Thrift1 gateway) round-trips bytes via happybase."""

from __future__ import annotations

import uuid

import happybase
import pytest


@pytest.fixture
def conn(hbase):
    c = happybase.Connection(hbase["host"], hbase["port"], timeout=60_000)
    yield c
    c.close()


@pytest.fixture
def table_name(conn):
    name = f"sluice_it_{uuid.uuid4().hex[:12]}"
    conn.create_table(name, {"cf": {"max_versions": 1}})
    yield name
    if name.encode() in conn.tables():
        conn.delete_table(name, disable=True)


def test_info_describes_the_service(hbase):
    assert hbase["host"] == "127.0.0.1"
    assert hbase["version"].startswith("2.6.")
    assert len({hbase["port"], hbase["zk_port"]}) == 2


def test_put_get_round_trip(conn, table_name):
    assert table_name.encode() in conn.tables()
    table = conn.table(table_name)
    binary = b"\x00a\xff\x00\xfe\x80end\x00"
    table.put(b"row-1", {b"cf:text": "héllo".encode(), b"cf:bin": binary})
    table.put(b"\x00row\xff", {b"cf:bin": binary})

    assert table.row(b"row-1") == {b"cf:text": "héllo".encode(), b"cf:bin": binary}
    assert table.row(b"\x00row\xff", columns=[b"cf:bin"]) == {b"cf:bin": binary}
    assert sorted(key for key, _ in table.scan()) == [b"\x00row\xff", b"row-1"]

    table.delete(b"row-1", columns=[b"cf:text"])
    assert table.row(b"row-1") == {b"cf:bin": binary}


def test_delete_table(conn):
    name = f"sluice_it_{uuid.uuid4().hex[:12]}"
    conn.create_table(name, {"cf": {}})
    assert name.encode() in conn.tables()
    conn.delete_table(name, disable=True)
    assert name.encode() not in conn.tables()
