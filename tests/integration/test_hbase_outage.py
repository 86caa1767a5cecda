"""HBase Thrift stopped mid-apply, through the job's own partition code (no mocks).

The test starts its OWN second Thrift1 gateway (same command line as scripts/svc/hbase.py,
another port, against the shared HBase) and kills it while a partition is applying: the
writer raises TransientError, the partition retries with backoff and then reports the
failure (so the driver would not ack); HBase holds a half-applied prefix. With a gateway
back on the same port, a rerun of the same changes converges to the source rows.
"""

from __future__ import annotations

import json
import socket
import time
import uuid

import happybase
import pyarrow as pa
import pytest

from adapters.hbase import HbaseTarget, make_writer
from adapters.hbase.verify import read_rows
from pipeline.job.partition import JobContext, apply_function
from pipeline.mapping.model import parse_mapping
from sluice_common.errors import TransientError
from tests.support.golden import GoldenTable
from tests.support.thrift import OwnThrift

T = GoldenTable("outage", (("id", "bigint(20)"), ("name", "varchar(40)"), ("n", "int(11)")), pk=("id",))
CHANGE_SCHEMA = pa.schema([("midx", pa.int32()), ("kind", pa.string()), ("database", pa.string()),
                           ("table", pa.string()), ("d", pa.string()), ("o", pa.string()), ("pkNames", pa.string()),
                           ("mysqlType", pa.string()), ("batchId", pa.int64()), ("seq", pa.int64()),
                           ("row", pa.int64()), ("sub", pa.int32())])  # d/o/pkNames/mysqlType: JSON text, as the job


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def own_thrift(hbase):
    servers: list[OwnThrift] = []

    def start(port: int | None = None) -> OwnThrift:
        s = OwnThrift(hbase, port or _free_port())
        servers.append(s)
        return s
    yield start
    for s in servers:
        s.kill()


def _rows(n: int) -> list[dict]:
    return [T.row(id=str(i), name=f"name {i}", n=str(i * 3)) for i in range(1, n + 1)]


def _arrow(changes: list[tuple[str, dict, dict | None]], start: int) -> pa.RecordBatch:
    out = []
    for i, (kind, d, o) in enumerate(changes):
        out.append({"midx": 0, "kind": kind, "database": T.database, "table": T.name, "d": json.dumps(d),
                    "o": json.dumps(o) if o is not None else None, "pkNames": json.dumps(["id"]),
                    "mysqlType": json.dumps(T.mysql_type), "batchId": 1, "seq": start + i, "row": 0, "sub": 0})
    return pa.RecordBatch.from_pylist(out, schema=CHANGE_SCHEMA)


def _wait_for_rows(port: int, m, n: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        c = happybase.Connection("127.0.0.1", port)
        try:
            if len(read_rows(c, m, T.mysql_type)) >= n:
                return
        finally:
            c.close()
        assert time.monotonic() < deadline, f"{n} rows never reached HBase"
        time.sleep(0.1)


def test_thrift_killed_mid_apply_fails_partition_then_rerun_converges(hbase, own_thrift):
    server = own_thrift()
    name = f"SLT_outage_{uuid.uuid4().hex[:6]}"
    m = parse_mapping({"hbaseMapping": {"database": T.database, "table": T.name, "hbaseTable": name,
                                        "autoCreateTable": True, "commitBatch": 50,
                                        "columns": {"id": "ROWKEY"}}}, "outage.yml")
    target = HbaseTarget(host="127.0.0.1", port=server.port, key="own")
    make_writer(target, (m,)).check()
    rows = _rows(600)
    changes = [("INSERT", r, None) for r in rows]
    for r in rows[::7]:  # some updates (incl. to NULL) and deletes after the inserts
        changes.append(("UPDATE", {**r, "name": None, "n": "-1"}, {"name": r["name"], "n": r["n"]}))
    deleted = {r["id"] for r in rows[::11]}
    changes += [("DELETE", r, None) for r in rows if r["id"] in deleted]
    expected = {}
    for r in rows:
        if r["id"] not in deleted:
            expected[r["id"]] = {**r, "name": None, "n": "-1"} if (int(r["id"]) - 1) % 7 == 0 else r
    parts = [changes[i:i + 200] for i in range(0, len(changes), 200)]
    ctx = JobContext(mappings=(m,), mapping_target=("hbase:own",), targets={"hbase:own": ("hbase", target)},
                     retries=3, backoff_max=1.0)

    def feed(kill_after: int | None):
        for i, part in enumerate(parts):
            if kill_after is not None and i == kill_after:
                # chunks are applied on the partition's apply thread: wait until the first
                # batch's 4 chunks are in HBase, then take the gateway away
                _wait_for_rows(server.port, m, kill_after * 200)
                server.kill()
            yield _arrow(part, i * 200)

    t0 = time.monotonic()
    result = list(apply_function(ctx)(feed(kill_after=1)))[0].to_pylist()[0]
    assert not result["ok"] and result["rows"] == 200  # the first 4 chunks committed, then the outage
    assert f"127.0.0.1:{server.port}" in result["error"] and "unreachable" in result["error"]
    assert result["error_table"] == f"{T.database}.{T.name}"
    assert time.monotonic() - t0 >= 1.5  # retried with backoff (0.5 s + 1 s) before giving up
    w = make_writer(target, (m,))
    w.open()
    w.apply(m, [T.insert(rows[0])])
    with pytest.raises(TransientError, match="unreachable"):
        w.commit()

    server = own_thrift(server.port)  # the gateway is back on the same port
    c = happybase.Connection("127.0.0.1", server.port)
    assert 0 < len(read_rows(c, m, T.mysql_type)) < len(rows)  # half-applied: no transactions in HBase
    result = list(apply_function(ctx)(feed(kill_after=None)))[0].to_pylist()[0]
    assert result["ok"], result["error"]
    assert json.loads(result["stats"])["inserted"] == {f"{T.database}.{T.name}": 600}
    got = {r["id"]: r for r in read_rows(c, m, T.mysql_type).values()}
    assert got == expected
    c.delete_table(name, disable=True)
    c.close()
