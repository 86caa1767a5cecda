"""The transaction framer on a real MariaDB: XA, savepoints, compressed events, both decoders.

Each test writes to its own database, captures the range with the native and with the
pure-Python decoder (``SLUICE_CAPTURE_NATIVE``), and checks what the store holds: rows of an XA
transaction at its ``XA COMMIT`` (in commit order, after transactions committed between PREPARE
and COMMIT), none of a rolled-back one, a capture stopped between PREPARE and COMMIT finishing the
transaction on its next run; rows a ``ROLLBACK TO SAVEPOINT`` undid dropped; MariaDB's compressed
events (``log_bin_compress``) decoded to the same records as plain ones.
"""

from __future__ import annotations

import contextlib
import uuid

import pytest

from pipeline.capture import run_capture
from pipeline.config import load_config
from pipeline.store.files import BatchStore
from tests.support import sysbench
from tests.support.capture_check import all_records, mark_start, replay, rotate_with_nothing_after, write_config

DECODERS = pytest.mark.parametrize("native", ["1", "0"], ids=["native", "python"])


@pytest.fixture
def db(mariadb, tmp_path, monkeypatch, request):
    name = f"cap_tx_{uuid.uuid4().hex[:8]}"
    sysbench.create_database(mariadb, name)
    yield name
    with contextlib.suppress(Exception):
        with sysbench.connect(mariadb, None) as conn, conn.cursor() as cur:
            cur.execute("XA RECOVER")
            for *_lengths, data in cur.fetchall():
                if str(data).startswith(name[-8:]):
                    cur.execute(f"XA ROLLBACK '{data}'")
    sysbench.drop_database(mariadb, name)


def _run(mariadb: dict, sql: str, database: str) -> None:
    with sysbench.connect(mariadb, database) as conn, conn.cursor() as cur:
        for stmt in filter(None, (s.strip() for s in sql.split(";"))):
            cur.execute(stmt)


def _rows(records: list[dict], table: str) -> list[tuple[str, str]]:
    return [(r["type"], row["id"]) for r in records if r["table"] == table and not r["isDdl"] for row in r["data"]]


@DECODERS
def test_xa_rows_arrive_at_commit_and_rollback_drops_them(mariadb, db, tmp_path, monkeypatch, native):
    monkeypatch.setenv("SLUICE_CAPTURE_NATIVE", native)
    x = db[-8:]
    config = write_config(mariadb, tmp_path, f"{db}\\..*")
    _run(mariadb, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))", db)
    _run(mariadb, f"XA START '{x}0'; INSERT INTO t VALUES (9,'before'); XA END '{x}0'; XA PREPARE '{x}0'", db)
    mark_start(config)
    _run(mariadb, f"XA START '{x}1'; INSERT INTO t VALUES (1,'xa'); XA END '{x}1'; XA PREPARE '{x}1'", db)
    _run(mariadb, "INSERT INTO t VALUES (2,'plain')", db)
    _run(mariadb, f"XA ROLLBACK '{x}0'", db)  # prepared before capture's start: nothing to drop, no refusal
    _run(mariadb, f"XA START '{x}2'; INSERT INTO t VALUES (3,'gone'); XA END '{x}2'; XA PREPARE '{x}2'", db)
    _run(mariadb, f"XA COMMIT '{x}1'", db)
    _run(mariadb, f"XA ROLLBACK '{x}2'", db)
    _run(mariadb, f"XA START '{x}3'; INSERT INTO t VALUES (4,'one'); XA END '{x}3'; XA COMMIT '{x}3' ONE PHASE", db)
    cfg = load_config(config)
    run_capture(cfg)
    records = all_records(str(cfg.store_dir()), db)
    assert _rows(records, "t") == [("INSERT", "2"), ("INSERT", "1"), ("INSERT", "4")]
    assert replay(records)[f"{db}.t"].keys() == {("1",), ("2",), ("4",)}
    at = {r["data"][0]["id"]: (r["logfile"], r["logpos"]) for r in records if r["table"] == "t" and not r["isDdl"]}
    assert at["1"] > at["2"]  # at its XA COMMIT, where the source made it visible (not its PREPARE)


@DECODERS
def test_a_capture_stopped_between_prepare_and_commit_finishes_it(mariadb, db, tmp_path, monkeypatch, native):
    """The position after the PREPARE group holds the prepared transaction; the next run reads
    its rows again from the binlog and stores them at the COMMIT."""
    monkeypatch.setenv("SLUICE_CAPTURE_NATIVE", native)
    x = db[-8:]
    config = write_config(mariadb, tmp_path, f"{db}\\..*")
    _run(mariadb, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))", db)
    mark_start(config)
    _run(mariadb, f"XA START '{x}1'; INSERT INTO t VALUES (1,'a'),(5,'e'); UPDATE t SET v='b' WHERE id=1; "
         f"XA END '{x}1'; XA PREPARE '{x}1'", db)
    _run(mariadb, "INSERT INTO t VALUES (2,'plain')", db)
    cfg = load_config(config)
    first = run_capture(cfg)
    assert first.end.get("xa") and first.end["xa"][0]["xid"]
    assert _rows(all_records(str(cfg.store_dir()), db), "t") == [("INSERT", "2")]
    _run(mariadb, "INSERT INTO t VALUES (3,'plain')", db)
    _run(mariadb, f"XA COMMIT '{x}1'", db)
    second = run_capture(load_config(config))
    assert not second.end.get("xa")
    records = all_records(str(cfg.store_dir()), db)
    assert _rows(records, "t") == [("INSERT", "2"), ("INSERT", "3"), ("INSERT", "1"), ("INSERT", "5"),
                                   ("UPDATE", "1")]
    assert replay(records)[f"{db}.t"][("1",)]["v"] == "b"


@DECODERS
def test_rows_rolled_back_to_a_savepoint_are_dropped(mariadb, db, tmp_path, monkeypatch, native):
    """With an Aria table written in the transaction, MariaDB logs the InnoDB rows a ROLLBACK TO
    SAVEPOINT undid, then the ROLLBACK TO statement: those rows must not be stored."""
    monkeypatch.setenv("SLUICE_CAPTURE_NATIVE", native)
    config = write_config(mariadb, tmp_path, f"{db}\\..*")
    _run(mariadb, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=InnoDB; "
         "CREATE TABLE m (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=Aria", db)
    mark_start(config)
    _run(mariadb, "BEGIN; INSERT INTO t VALUES (10,'kept'); SAVEPOINT sp1; INSERT INTO t VALUES (11,'undone'); "
         "SAVEPOINT sp2; UPDATE t SET v='undone too' WHERE id=10; INSERT INTO t VALUES (13,'undone'); "
         "INSERT INTO m VALUES (11,'aria'); ROLLBACK TO SAVEPOINT sp1; INSERT INTO t VALUES (12,'kept'); COMMIT; "
         "BEGIN; INSERT INTO t VALUES (15, 'kept'); SAVEPOINT sp3; INSERT INTO t VALUES (14,'undone'); "
         "ROLLBACK TO sp3; COMMIT", db)
    cfg = load_config(config)
    run_capture(cfg)
    records = all_records(str(cfg.store_dir()), db)
    assert _rows(records, "t") == [("INSERT", "10"), ("INSERT", "12"), ("INSERT", "15")]
    assert _rows(records, "m") == [("INSERT", "11")]  # the Aria row stays: it was not rolled back
    ids = [r["id"] for r in records]
    assert ids == list(range(ids[0], ids[0] + len(ids)))  # no holes where rows were dropped


@DECODERS
def test_a_rolled_back_transaction_is_refused_and_ctas_is_ddl(mariadb, db, tmp_path, monkeypatch, native):
    """A transaction that wrote an Aria table and rolled back is logged with its writes and a ROLLBACK
    (MariaDB: in statement format; in row format it logs the Aria rows on their own):
    the Aria rows stay at the source, the InnoDB ones do not, and the binlog does not say which is
    which; nothing of it is stored but one refusal record per table. CREATE TABLE ... SELECT
    (DDL logged ahead of its rows inside one group) is stored as DDL, then its rows."""
    monkeypatch.setenv("SLUICE_CAPTURE_NATIVE", native)
    config = write_config(mariadb, tmp_path, f"{db}\\..*")
    _run(mariadb, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=InnoDB; "
         "CREATE TABLE m (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=Aria", db)
    mark_start(config)
    _run(mariadb, "INSERT INTO t VALUES (1,'kept'); CREATE TABLE c ENGINE=InnoDB AS SELECT * FROM t", db)
    _run(mariadb, "SET SESSION binlog_format='STATEMENT'; BEGIN; INSERT INTO t VALUES (2,'undone'); "
         "INSERT INTO m VALUES (2,'aria stays'); ROLLBACK", db)
    cfg = load_config(config)
    run_capture(cfg)
    records = all_records(str(cfg.store_dir()), db)
    assert _rows(records, "t") == [("INSERT", "1")] and _rows(records, "m") == []
    refused = [(r["table"], r["sql"]) for r in records if r["type"] == "QUERY" and not r["isDdl"]]
    assert refused == [("t", "ROLLBACK"), ("m", "ROLLBACK")]
    ddl = [(r["type"], r["table"]) for r in records if r["isDdl"]]
    assert ddl == [("CREATE", "c")], ddl
    assert _rows(records, "c") == [("INSERT", "1")]


def test_compressed_events_store_what_plain_ones_do(mariadb, db, tmp_path, monkeypatch):
    """``log_bin_compress=ON`` (MariaDB compresses query and rows events over a minimum length):
    the same statements, written once compressed and once plain, store the same data, with both
    decoders."""
    _run(mariadb, "CREATE TABLE t (id INT PRIMARY KEY, v TEXT, n INT)", db)

    def write(base: int) -> None:
        rows = ",".join(f"({base + i}, REPEAT('abc{i}', 40), {i})" for i in range(60))
        _run(mariadb, f"INSERT INTO t VALUES {rows}; UPDATE t SET v = CONCAT(v, 'x'), n = n + 1 "
             f"WHERE id >= {base} AND (id - {base}) % 3 = 0; "
             f"DELETE FROM t WHERE id >= {base} AND (id - {base}) % 7 = 0; "
             f"CREATE TABLE t{base} (id INT PRIMARY KEY, note VARCHAR(200) DEFAULT 'a long enough default')", db)

    (tmp_path / "mark").mkdir()
    start = mark_start(write_config(mariadb, tmp_path / "mark", f"{db}\\..*"))
    with sysbench.log_bin_compress(mariadb):
        write(1000)
    with sysbench.connect(mariadb, None) as conn, conn.cursor() as cur:
        write(2000)
        cur.execute("SHOW BINLOG EVENTS IN %s FROM %s", (start["logfile"], start["logpos"]))
        types = [r[2] for r in cur.fetchall()]
    assert "Query_compressed" in types and any("rows_compressed" in t.lower() for t in types)
    stored = {}
    for native in ("1", "0"):
        monkeypatch.setenv("SLUICE_CAPTURE_NATIVE", native)
        (tmp_path / native).mkdir()
        cfg = load_config(write_config(mariadb, tmp_path / native, f"{db}\\..*"))
        st = BatchStore(cfg.store_dir())
        with st.capture_lock():
            st.set_start_position(start)
        run_capture(cfg)
        records = all_records(str(cfg.store_dir()), db)
        ddl = [r["sql"] for r in records if r["isDdl"]]
        assert len(ddl) == 2 and "t1000" in ddl[0] and "t2000" in ddl[1]
        dml = [(r["type"], [{**row, "id": str(int(row["id"]) % 1000)} for row in r["data"]])
               for r in records if not r["isDdl"]]
        assert len(dml) >= 6 and len(dml) % 2 == 0 and dml[:len(dml) // 2] == dml[len(dml) // 2:]
        stored[native] = [{k: v for k, v in r.items() if k != "ts"} for r in records]
    assert stored["1"] == stored["0"]



@DECODERS
@pytest.mark.parametrize("resume_by", ["file", "gtid"])
def test_a_rotate_with_nothing_after_it_moves_the_position(mariadb, db, tmp_path, monkeypatch, native, resume_by):
    monkeypatch.setenv("SLUICE_CAPTURE_NATIVE", native)
    rotate_with_nothing_after(mariadb, db, tmp_path, resume_by)
