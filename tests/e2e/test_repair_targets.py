"""``sluice repair`` online into Elasticsearch and HBase, and the backfill of a mapping added to a
running ``sluice run --follow``: each while sysbench writes to the source and the follower applies,
ending with every document/row equal to the source (every mapped column as text)."""

from __future__ import annotations

import time

import pytest

from tests.e2e.test_repair import _follow
from tests.support.deploy import sluice
from tests.support.faults import drop_deployment, last_json, make_deployment
from tests.support.matrix import FULL


def _wait_converged(dep, follower, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if follower.proc.poll() is not None:
            raise AssertionError(f"the follower ended ({follower.proc.returncode}):\n{follower.output()}")
        try:
            compared, differing = dep.compare()
        except Exception as e:  # noqa: BLE001 - the target table/index is not there yet
            compared, differing = 0, str(e)[:200]
        if differing == 0 and compared >= dep.tables * dep.table_size:
            return
        assert time.monotonic() < deadline, f"{differing} differing after {timeout:.0f} s\n{follower.output()}"
        time.sleep(1)


def _damage_es(dep) -> None:
    from elasticsearch import Elasticsearch

    es = Elasticsearch(dep.target["url"], request_timeout=60)
    try:
        index = dep.names["sbtest1"]
        for i in range(1, 41):
            es.delete(index=index, id=str(i))
        for i in range(100, 120):
            es.update(index=index, id=str(i), doc={"c": "damaged"})
        es.indices.refresh(index=index)
    finally:
        es.close()


def _damage_hbase(dep) -> None:
    import happybase

    conn = happybase.Connection(dep.target["host"], int(dep.target["port"]), timeout=60000)
    try:
        table = conn.table(dep.names["sbtest2"])
        for i in range(1, 61):
            table.delete(str(i).encode())
    finally:
        conn.close()


@pytest.mark.parametrize("kind", ["es", "hbase"] if FULL else ["es"])  # CI budget
def test_repair_of_an_index_and_an_hbase_table_while_writes_go_on(kind, tmp_path, mariadb, request):
    target = request.getfixturevalue({"es": "elasticsearch", "hbase": "hbase"}[kind])
    dep = make_deployment(kind, tmp_path, mariadb, target)
    follower = None
    try:
        follower = _follow(dep)
        _wait_converged(dep, follower, 300)
        (_damage_es if kind == "es" else _damage_hbase)(dep)
        assert dep.compare()[1] >= 40
        load = dep.workload(seconds=1800, rate=20)
        time.sleep(3)
        out = sluice("repair", "--config", str(dep.cfg), "--group", "g1", "--chunk-size", "100", "--json",
                     timeout=600)
        assert load.proc.poll() is None, "the load ended before the repair: it did not run under writes"
        time.sleep(2)
        load.kill()
        tables = last_json(out.stdout)["tables"]
        damaged = tables[f"{dep.db}.{'sbtest1' if kind == 'es' else 'sbtest2'}"]
        assert damaged["differing"] >= 1 and damaged["upserted"] >= (60 if kind == "es" else 60), tables
        _wait_converged(dep, follower, 300)
    finally:
        if follower is not None:
            follower.kill()
        drop_deployment(dep)


def test_a_mapping_added_to_a_running_follower_is_backfilled(tmp_path, mariadb, postgres):
    """sbtest2's mapping is not there when the follower starts; it is added while sysbench writes
    (the follower picks it up at its next round and applies sbtest2's changes from then on), and
    `sluice repair --mapping` fills in every row that existed before."""
    dep = make_deployment("postgres", tmp_path, mariadb, postgres)
    mapping = dep.tmp / "mappings" / "postgres" / "sbtest2.yml"
    body = mapping.read_text()
    mapping.unlink()
    follower = None
    try:
        follower = _follow(dep)
        deadline = time.monotonic() + 300
        while dep.source_rows("sbtest1") != dep.target_rows("sbtest1"):
            assert time.monotonic() < deadline and follower.proc.poll() is None, follower.output()
            time.sleep(1)
        load = dep.workload(seconds=1800, rate=20)
        time.sleep(3)
        mapping.write_text(body)   # added to the running deployment
        time.sleep(5)
        assert len(dep.target_rows("sbtest2")) < dep.table_size, "sbtest2 was filled before the repair"
        out = sluice("repair", "--config", str(dep.cfg), "--group", "g1", "--mapping", "sbtest2.yml", "--json",
                     timeout=600)
        assert load.proc.poll() is None, "the load ended before the repair: it did not run under writes"
        time.sleep(2)
        load.kill()
        tables = last_json(out.stdout)["tables"]
        # the follower inserted the rows sysbench wrote since the mapping was added; the repair the others
        assert list(tables) == [f"{dep.db}.sbtest2"] and tables[f"{dep.db}.sbtest2"]["upserted"] >= 250, tables
        _wait_converged(dep, follower, 300)
    finally:
        if follower is not None:
            follower.kill()
        drop_deployment(dep)
