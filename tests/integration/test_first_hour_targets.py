"""A mapping whose Elasticsearch index or HBase table does not exist, through the real CLI against
the real servers (issue 22): one message naming the mapping file and key, exit 2, before Spark."""

from __future__ import annotations

import uuid

import pytest

from sluice_common import exitcodes
from tests.support.cli import cli, one_message
from tests.support.deploy import write_deployment


def _deploy(tmp_path, mariadb, adapter: dict, mapping: dict):
    db = f"fh_{uuid.uuid4().hex[:6]}"
    if "hbaseMapping" in mapping:  # a captured table: capture refuses a mapping of one its filter leaves out
        mapping["hbaseMapping"]["database"] = db
    cfg = write_deployment(tmp_path, mariadb, name=db, include=rf"{db}\..*", master="local[1]", partitions=1,
                           groups=[{"groupId": "g1", "outerAdapters": [adapter], "mappings": ["mappings/*.yml"]}],
                           mappings={"m.yml": mapping})
    assert cli("capture", "--config", str(cfg), "--once").returncode == 0  # the store, nothing pending
    return cfg, db


def test_an_hbase_table_that_does_not_exist(tmp_path, mariadb, hbase):
    table = f"sluice_missing_{uuid.uuid4().hex[:6]}"
    cfg, db = _deploy(tmp_path, mariadb, {"name": "hbase", "key": "hb", "hosts": f"{hbase['host']}:{hbase['port']}"},
                  {"outerAdapterKey": "hb", "hbaseMapping": {"mode": "STRING", "database": "d", "table": "t",
                                                             "hbaseTable": table, "columns": {"id": "ROWKEY",
                                                                                              "name": "CF:NAME"}}})
    want = f"HBase table {table} (mapping mappings/m.yml, hbaseMapping.hbaseTable) does not exist on"
    for args in (["sync", "--group", "g1"], ["run", "--no-capture"], ["etl", "--group", "g1", "--all"]):
        proc = cli(*args, "--config", str(cfg))
        assert "log4j" not in proc.stderr, args
        if args[0] == "run":  # recorded; the summary carries the message
            assert proc.returncode == exitcodes.NOTHING  # nothing pending: the group is not even checked
            continue
        one_message(proc, exitcodes.CONFIG, want, f"create '{table}', 'CF'", "autoCreateTable: true")
    proc = cli("verify", "--config", str(cfg))
    assert proc.returncode == exitcodes.CONFIG and want in proc.stdout and proc.stdout.startswith(f"ERROR {db}.t")


@pytest.fixture
def no_auto_create(es):
    es.cluster.put_settings(transient={"action.auto_create_index": "false"})
    yield
    es.cluster.put_settings(transient={"action.auto_create_index": None})


def test_an_es_index_that_does_not_exist(tmp_path, mariadb, elasticsearch, es, request):
    index = f"sluice-missing-{uuid.uuid4().hex[:6]}"
    cfg, _ = _deploy(tmp_path, mariadb, {"name": "es8", "key": "es", "hosts": elasticsearch["url"]},
                  {"outerAdapterKey": "es", "esMapping": {"_index": index, "_id": "_id",
                                                          "sql": "SELECT p.id AS _id, p.name FROM people p"}})
    # the cluster creates it on the first write: a warning naming the file and the index, and on
    proc = cli("sync", "--config", str(cfg), "--group", "g1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "the index does not exist yet" in proc.stderr and index in proc.stderr and "m.yml" in proc.stderr
    proc = cli("verify", "--config", str(cfg))
    assert proc.returncode == exitcodes.CONFIG, proc.stdout + proc.stderr
    assert f"mappings/m.yml: esMapping._index: index {index} does not exist" in proc.stdout

    request.getfixturevalue("no_auto_create")  # the cluster would refuse the writes: refused before Spark
    proc = cli("sync", "--config", str(cfg), "--group", "g1")
    one_message(proc, exitcodes.CONFIG, f"sluice: error: mappings/m.yml: esMapping._index: index {index} does not "
                "exist on", "does not create indices on write (action.auto_create_index)", f"PUT /{index}")
    assert "log4j" not in proc.stderr
    assert not es.indices.exists(index=index)
