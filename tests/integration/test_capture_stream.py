"""Capture against the real MariaDB: DDL/TRUNCATE, filters, split transactions and exact resume,
GTID and file/pos resume, position errors, corrupt batches and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from pipeline.capture import run_capture
from pipeline.capture.items import Rows
from pipeline.capture.position import Position
from pipeline.capture.reader import BinlogReader, ReaderOptions
from pipeline.config import load_config
from pipeline.store.files import BatchStore
from sluice_common.errors import CorruptBatchError, PositionError
from tests.support import sysbench
from tests.support.capture_check import all_records, check_order_and_gtids, mark_start, replay, write_config


@pytest.fixture()
def db_name(mariadb):
    name = f"cap_it_{uuid.uuid4().hex[:8]}"
    sysbench.create_database(mariadb, name)
    yield name
    sysbench.drop_database(mariadb, name)
    sysbench.drop_database(mariadb, name + "_other")


def _exec(mariadb, *sql, database=None):
    with sysbench.connect(mariadb, database) as conn, conn.cursor() as cur:
        for s in sql:
            cur.execute(s)


def _store(config):
    return str(load_config(config).store_dir())


def test_ddl_truncate_and_filters(mariadb, tmp_path, db_name):
    config = write_config(mariadb, tmp_path, f"{db_name}\\..*")
    cfg_text = json.loads(Path(config).read_text())
    cfg_text["source"]["filter"]["exclude"] = [f"{db_name}\\.skip_.*"]
    Path(config).write_text(json.dumps(cfg_text))
    mark_start(config)
    _exec(mariadb, f"CREATE DATABASE {db_name}_other", f"CREATE TABLE {db_name}_other.t (id INT PRIMARY KEY)",
          f"INSERT INTO {db_name}_other.t VALUES (1)")
    _exec(mariadb, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))", "CREATE TABLE skip_me (id INT PRIMARY KEY)",
          "INSERT INTO t VALUES (1, 'a'), (2, 'b')", "INSERT INTO skip_me VALUES (1)",
          "ALTER TABLE t ADD COLUMN w INT", "UPDATE t SET w = 5 WHERE id = 1", "TRUNCATE TABLE t",
          "INSERT INTO t VALUES (3, 'c', 7)", "RENAME TABLE t TO t2", "DROP TABLE t2", database=db_name)
    run_capture(load_config(config))
    recs = all_records(_store(config))
    assert {r["database"] for r in recs} == {db_name}
    assert all(r["table"] != "skip_me" for r in recs)
    kinds = [(r["type"], r["table"], r["isDdl"]) for r in recs]
    assert kinds == [("CREATE", "t", True), ("INSERT", "t", False), ("ALTER", "t", True), ("UPDATE", "t", False),
                     ("TRUNCATE", "t", True), ("INSERT", "t", False), ("RENAME", "t", True), ("ERASE", "t2", True)]
    trunc = recs[4]
    assert trunc["sql"].upper().startswith("TRUNCATE") and trunc["data"] is None and trunc["gtid"]
    upd = recs[3]
    assert upd["data"] == [{"id": "1", "v": "a", "w": "5"}] and upd["old"] == [{"w": None}]
    check_order_and_gtids(recs)


def test_split_transaction_resumes_exactly(mariadb, tmp_path, db_name):
    """A 3000-row transaction with maxRows=500 is stored in split parts; stopping between parts
    (like a kill: the unstored part is dropped) and resuming stores every row exactly once."""
    config = write_config(mariadb, tmp_path, f"{db_name}\\..*", max_rows=500)
    mark_start(config)
    _exec(mariadb, "CREATE TABLE big (id INT PRIMARY KEY, pad VARCHAR(200))", database=db_name)
    with sysbench.connect(mariadb, db_name) as conn, conn.cursor() as cur:
        conn.begin()
        for start in range(0, 3000, 100):
            cur.execute("INSERT INTO big VALUES " + ",".join(f"({i}, REPEAT('p', 150))"
                                                             for i in range(start, start + 100)))
        cur.execute("UPDATE big SET pad = 'u' WHERE id < 700")
        conn.commit()
    _exec(mariadb, "INSERT INTO big VALUES (5000, 'after')", database=db_name)
    cfg = load_config(config)
    first = run_capture(cfg, max_batches=2)
    st = BatchStore(_store(config), create=False)
    metas = st.batches()
    assert len(metas) == 2 and metas[-1].split and metas[-1].end["skipEvents"] > 0
    assert first.stopped.startswith("--max-batches")
    second = run_capture(cfg, max_batches=1)  # resume in the middle of the transaction, one part more
    assert second.batches == 1 and BatchStore(_store(config), create=False).batches()[-1].split
    run_capture(cfg)
    recs = all_records(_store(config), db_name)
    check_order_and_gtids(recs)
    table = replay(recs)[f"{db_name}.big"]
    assert len(table) == 3001
    assert sum(1 for row in table.values() if row["pad"] == "u") == 700
    ids = [r["id"] for r in recs]
    assert ids == list(range(ids[0], ids[0] + len(ids)))  # ids continue across restarts without gaps


@pytest.mark.parametrize("resume_by", ["gtid", "file"])
def test_resume_by_gtid_and_by_file_agree(mariadb, tmp_path, db_name, resume_by):
    config = write_config(mariadb, tmp_path, f"{db_name}\\..*", resume_by=resume_by, max_rows=50)
    mark_start(config)
    _exec(mariadb, "CREATE TABLE r (id INT PRIMARY KEY, n INT)", database=db_name)
    for i in range(30):
        _exec(mariadb, f"INSERT INTO r VALUES ({i}, {i})", f"UPDATE r SET n = n + 1 WHERE id = {i}",
              database=db_name)
    cfg = load_config(config)
    while run_capture(cfg, max_batches=1).batches:  # one batch per run: every run resumes
        pass
    recs = all_records(_store(config), db_name)
    check_order_and_gtids(recs)
    assert len([r for r in recs if r["type"] == "INSERT"]) == 30
    assert replay(recs)[f"{db_name}.r"] == {(str(i),): {"id": str(i), "n": str(i + 1)} for i in range(30)}
    if resume_by == "gtid":
        assert any(r["sql"].startswith("INSERT INTO r") for r in recs)  # MariaDB annotate-rows SQL


def test_unknown_binlog_file_is_a_position_error(mariadb, tmp_path):
    config = write_config(mariadb, tmp_path, "nothing\\..*")
    cfg = load_config(config)
    st = BatchStore(cfg.store_dir())
    with st.capture_lock():
        st.set_start_position({"logfile": "mysql-bin.999999", "logpos": 4, "gtid": None, "nextId": 1})
    with pytest.raises(PositionError) as e:
        run_capture(cfg)
    assert "mysql-bin.999999" in str(e.value) and "snapshot" in str(e.value)


def test_unknown_gtid_is_a_position_error(mariadb, tmp_path):
    config = write_config(mariadb, tmp_path, "nothing\\..*", resume_by="gtid")
    cfg = load_config(config)
    pos = mark_start(config)
    st = BatchStore(cfg.store_dir())
    with st.capture_lock():
        st.set_start_position({**pos, "gtid": "0-4242-99999999"}, force=True)
    with pytest.raises(PositionError, match="0-4242-99999999"):
        run_capture(cfg)


def test_position_past_end_of_file_is_a_position_error(mariadb, tmp_path):
    config = write_config(mariadb, tmp_path, "nothing\\..*")
    cfg = load_config(config)
    pos = mark_start(config)
    st = BatchStore(cfg.store_dir())
    with st.capture_lock():
        st.set_start_position({**pos, "logpos": pos["logpos"] + 10**9}, force=True)
    with pytest.raises(PositionError, match="past the end"):
        run_capture(cfg)


def test_reader_yields_typed_items(mariadb, tmp_path, db_name):
    config = write_config(mariadb, tmp_path, f"{db_name}\\..*")
    start = Position.from_dict(mark_start(config))
    _exec(mariadb, "CREATE TABLE x (id INT PRIMARY KEY)", "INSERT INTO x VALUES (1), (2)", database=db_name)
    cfg = load_config(config)
    items = list(BinlogReader(cfg.source, "mariadb", start, ReaderOptions(filter=cfg.source.filter)))
    rows = [i for i in items if isinstance(i, Rows)]
    assert len(rows) == 1 and rows[0].rows == [{"id": "1"}, {"id": "2"}] and rows[0].kind == "INSERT"


def test_corrupt_batch_is_detected(mariadb, tmp_path, db_name):
    config = write_config(mariadb, tmp_path, f"{db_name}\\..*")
    mark_start(config)
    _exec(mariadb, "CREATE TABLE c (id INT PRIMARY KEY)", "INSERT INTO c VALUES (1)", database=db_name)
    run_capture(load_config(config))
    st = BatchStore(_store(config), create=False)
    path = Path(st.batches()[-1].path)
    path.write_bytes(path.read_bytes()[:-7])
    with pytest.raises(CorruptBatchError, match="truncated"):
        all_records(_store(config))


def test_cli_once_prints_summary_and_progress(mariadb, tmp_path, db_name):
    config = write_config(mariadb, tmp_path, f"{db_name}\\..*")
    mark_start(config)
    _exec(mariadb, "CREATE TABLE p (id INT PRIMARY KEY)", "INSERT INTO p VALUES (1), (2), (3)", database=db_name)
    sluice = str(Path(sys.executable).parent / "sluice")
    p = subprocess.run([sluice, "capture", "--config", config, "--once"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout.strip().splitlines()[-1])
    assert summary["rows"] >= 4 and summary["batches"] >= 1 and summary["end"]["logfile"]
    assert "capture done" in p.stderr and mariadb["password"] not in p.stderr + p.stdout
    bad = subprocess.run([sluice, "capture", "--config", config, "--once", "--follow"], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode != 0 and "either --once or --follow" in bad.stderr
