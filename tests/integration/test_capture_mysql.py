"""The transaction framer on a real Oracle MySQL (9.7, the 8.4 binlog format), both decoders.

Sessions that turn on what production MySQL servers use: ``binlog_transaction_compression``
(zstd transaction payloads), ``binlog_row_value_options=PARTIAL_JSON`` (JSON diffs in the after
image), and XA transactions (MySQL's XA_PREPARE event after ``XA START``/``XA END``, the decision
later as a statement). What capture stores must equal what a plain session's binlog gives.
"""

from __future__ import annotations

import contextlib
import json
import uuid

import pytest

from pipeline.capture import run_capture
from pipeline.config import load_config
from tests.support import sysbench
from tests.support.capture_check import (
    all_records,
    capture_both,
    mark_start,
    replay,
    rotate_with_nothing_after,
    write_config,
)


@pytest.fixture
def db(mysql):
    name = f"cap_my_{uuid.uuid4().hex[:8]}"
    sysbench.create_database(mysql, name)
    yield name
    with contextlib.suppress(Exception), sysbench.connect(mysql, None) as conn, conn.cursor() as cur:
        cur.execute("XA RECOVER")
        for *_lengths, data in cur.fetchall():
            if name[-8:] in str(data):
                cur.execute(f"XA ROLLBACK '{data.decode() if isinstance(data, bytes) else data}'")
    sysbench.drop_database(mysql, name)


def _run(info: dict, database: str, *statements: str) -> None:
    with sysbench.connect(info, database) as conn, conn.cursor() as cur:
        for s in statements:
            cur.execute(s)
        conn.commit()


def _start(info: dict, tmp_path) -> dict:
    (tmp_path / "mark").mkdir(exist_ok=True)
    return mark_start(write_config(info, tmp_path / "mark", "none\\..*"))


def test_compressed_transactions_store_what_plain_ones_do(mysql, db, tmp_path, monkeypatch):
    _run(mysql, db, "CREATE TABLE t (id INT PRIMARY KEY, v TEXT, j JSON, n BIGINT UNSIGNED)")
    start = _start(mysql, tmp_path)
    for base, compress in ((1000, "ON"), (2000, "OFF")):
        rows = ",".join(f"({base + i}, REPEAT('abc{i}', 30), JSON_OBJECT('k', {i}, 'l', JSON_ARRAY({i}, 'x')), "
                        f"{18446744073709551615 - i})" for i in range(50))
        _run(mysql, db, f"SET SESSION binlog_transaction_compression = {compress}", "BEGIN",
             f"INSERT INTO t VALUES {rows}",
             f"UPDATE t SET v = CONCAT(v, 'x'), j = JSON_SET(j, '$.m', 'new') "
             f"WHERE id >= {base} AND (id - {base}) % 3 = 0",
             f"DELETE FROM t WHERE id >= {base} AND (id - {base}) % 7 = 0", "COMMIT")
    with sysbench.connect(mysql, None) as conn, conn.cursor() as cur:
        cur.execute("SHOW BINLOG EVENTS IN %s FROM %s", (start["logfile"], start["logpos"]))
        assert "Transaction_payload" in [r[2] for r in cur.fetchall()]
    records = capture_both(mysql, tmp_path, db, start, monkeypatch)
    dml = [(r["type"], [{**row, "id": str(int(row["id"]) % 1000)} for row in r["data"]], r["old"])
           for r in records if not r["isDdl"]]
    dml = [(k, d, [{**o, "id": str(int(o["id"]) % 1000)} if "id" in o else o for o in old] if old else old)
           for k, d, old in dml]
    assert len(dml) >= 6 and dml[:len(dml) // 2] == dml[len(dml) // 2:]


def test_partial_json_updates_store_whole_documents(mysql, db, tmp_path, monkeypatch):
    """JSON_SET/JSON_REPLACE/JSON_REMOVE/JSON_ARRAY_INSERT logged as diffs: capture stores the
    document a FULL after image would carry, equal to the source's own text of it."""
    _run(mysql, db, "CREATE TABLE t (id INT PRIMARY KEY, a JSON, n INT, b JSON)",
         "INSERT INTO t VALUES (1, '{\"x\": 1, \"list\": [1, 2, 3], \"s\": \"text\"}', 0, "
         "'{\"deep\": {\"k\": [\"a\", \"b\"]}, \"q\": null}'), (2, '[1, 2]', 0, '{}')")
    start = _start(mysql, tmp_path)
    _run(mysql, db, "SET SESSION binlog_row_value_options = 'PARTIAL_JSON'",
         "UPDATE t SET a = JSON_SET(a, '$.x', 42, '$.zz', 'new key'), n = n + 1 WHERE id = 1",
         "UPDATE t SET a = JSON_REPLACE(a, '$.list[1]', 'two'), b = JSON_REMOVE(b, '$.q') WHERE id = 1",
         "UPDATE t SET b = JSON_SET(b, '$.deep.k[0]', 'A', '$.\"odd key\"', 1) WHERE id = 1",
         "UPDATE t SET a = JSON_ARRAY_INSERT(a, '$[1]', 'in'), b = JSON_SET(b, '$.new', JSON_ARRAY(1, 2)) "
         "WHERE id = 2",
         "UPDATE t SET a = JSON_REMOVE(a, '$.list[0]') WHERE id = 1")
    with sysbench.connect(mysql, None) as conn, conn.cursor() as cur:
        cur.execute("SHOW BINLOG EVENTS IN %s FROM %s", (start["logfile"], start["logpos"]))
        assert any("partial" in str(r[2]).lower() for r in cur.fetchall())
        cur.execute(f"SELECT id, CAST(a AS CHAR), n, CAST(b AS CHAR) FROM `{db}`.t ORDER BY id")
        want = {str(i): {"id": str(i), "a": a, "n": str(n), "b": b} for i, a, n, b in cur.fetchall()}
    records = capture_both(mysql, tmp_path, db, start, monkeypatch)
    assert len([r for r in records if r["type"] == "UPDATE"]) == 5
    got = {}
    for r in records:
        for row in r["data"]:
            got[row["id"]] = row
    assert got == want
    assert json.loads(got["1"]["a"]) == {"x": 42, "zz": "new key", "list": ["two", 3], "s": "text"}


def test_json_with_decimal_and_temporal_values_is_stored_as_mysql_prints_it(mysql, db, tmp_path, monkeypatch):
    """A JSON document holding a DECIMAL, DATE, TIME, DATETIME, TIMESTAMP or bytes (MySQL's opaque
    values, from ``JSON_OBJECT`` of such columns) stopped capture for good ("Decimal is not JSON
    serializable", a new user's probe); whole and partial (``PARTIAL_JSON``) images now store the
    source's own text of the document."""
    _run(mysql, db, "CREATE TABLE t (id INT PRIMARY KEY, j JSON, p DECIMAL(8,3), d DATE, dt DATETIME(1), "
         "tm TIME(6), ts TIMESTAMP, b VARBINARY(4))",
         "INSERT INTO t VALUES (1, NULL, -0.5, '2024-01-02', '2024-01-02 03:04:05.5', '-838:04:05.000001', "
         "'2024-06-30 12:00:00', x'00ff'), (2, '{\"a\": 1.50}', 100, '1000-01-01', '9999-12-31 23:59:59.9', "
         "'00:00:00', '1970-01-01 00:00:01', '')")
    start = _start(mysql, tmp_path)
    _run(mysql, db, "UPDATE t SET j = JSON_OBJECT('p', p, 'd', d, 'dt', dt, 'tm', tm, 'ts', ts, 'b', b, "
                    "'n', JSON_ARRAY(p, 0.0000001, CAST(0.0000001 AS DECIMAL(9,8))), "
                    "'long', CAST(REPEAT('a', 100) AS BINARY), 'd', JSON_ARRAY(1e300, 1.5e-7, 1e15, 100e0, -0e0))",
         "SET SESSION binlog_row_value_options = 'PARTIAL_JSON'",
         "UPDATE t SET j = JSON_SET(j, '$.q', CAST(1.25 AS DECIMAL(5,2)), '$.when', dt, '$.e', 2.5e-20) "
         "WHERE id = 2")
    with sysbench.connect(mysql, None) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT id, CAST(j AS CHAR) FROM `{db}`.t ORDER BY id")
        want = dict(cur.fetchall())
    records = capture_both(mysql, tmp_path, db, start, monkeypatch)
    got = {}
    for r in records:
        for row in r["data"]:
            got[int(row["id"])] = row["j"]
    assert got == want
    assert '"p": -0.500' in got[1] and '"tm": "-838:04:05.000001"' in got[1] and '"q": 1.25' in got[2]


def test_xa_on_mysql_applies_at_commit_across_capture_runs(mysql, db, tmp_path, monkeypatch):
    x = db[-8:]
    _run(mysql, db, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
    for native in ("1", "0"):  # native, pure Python
        monkeypatch.setenv("SLUICE_CAPTURE_NATIVE", native)
        base = 100 * (1 + int(native))
        (tmp_path / native).mkdir()
        config = write_config(mysql, tmp_path / native, f"{db}\\..*")
        mark_start(config)
        _run(mysql, db, f"XA START '{x}{native}a'", f"INSERT INTO t VALUES ({base}, 'a'), ({base + 5}, 'e')",
             f"UPDATE t SET v = 'b' WHERE id = {base}", f"XA END '{x}{native}a'", f"XA PREPARE '{x}{native}a'")
        _run(mysql, db, f"XA START '{x}{native}b'", f"INSERT INTO t VALUES ({base + 3}, 'gone')",
             f"XA END '{x}{native}b'", f"XA PREPARE '{x}{native}b'")
        _run(mysql, db, f"INSERT INTO t VALUES ({base + 1}, 'plain')")
        first = run_capture(load_config(config))
        assert len(first.end["xa"]) == 2
        _run(mysql, db, f"XA ROLLBACK '{x}{native}b'")
        _run(mysql, db, f"XA COMMIT '{x}{native}a'")
        _run(mysql, db, f"XA START '{x}{native}c'", f"INSERT INTO t VALUES ({base + 2}, 'one')",
             f"XA END '{x}{native}c'", f"XA COMMIT '{x}{native}c' ONE PHASE")
        second = run_capture(load_config(config))
        assert not second.end.get("xa")
        records = all_records(str(load_config(config).store_dir()), db)
        order = [(r["type"], int(row["id"]) - base) for r in records if not r["isDdl"] for row in r["data"]]
        assert order == [("INSERT", 1), ("INSERT", 0), ("INSERT", 5), ("UPDATE", 0), ("INSERT", 2)]
        assert replay(records)[f"{db}.t"][(str(base),)]["v"] == "b"


@pytest.mark.parametrize("native", ["1", "0"], ids=["native", "python"])
def test_a_rotate_with_nothing_after_it_moves_the_position(mysql, db, tmp_path, monkeypatch, native):
    """MySQL's file header is a format description and a PREVIOUS_GTIDS event."""
    monkeypatch.setenv("SLUICE_CAPTURE_NATIVE", native)
    rotate_with_nothing_after(mysql, db, tmp_path, "auto")


def test_a_table_whose_layout_capture_cannot_read_is_named(mysql, db, tmp_path):
    """MySQL 9's VECTOR: the binlog library cannot read the table map ("30 is not a valid
    MetadataFieldType", no table named: a new user's probe). Capture names the table and the way
    out; left out of capture by the filter, the rest is captured."""
    from sluice_common.errors import SourceError

    _run(mysql, db, "CREATE TABLE v (id INT PRIMARY KEY, e VECTOR(3))", "CREATE TABLE t (id INT PRIMARY KEY)")
    start = _start(mysql, tmp_path)
    _run(mysql, db, "INSERT INTO v VALUES (1, STRING_TO_VECTOR('[1,2,3]'))", "INSERT INTO t VALUES (1)")
    for folder, include in (("all", f"{db}\\..*"), ("some", f"{db}\\.t")):
        (tmp_path / folder).mkdir()
        cfg = load_config(write_config(mysql, tmp_path / folder, include))
        from pipeline.store.files.store import BatchStore

        st = BatchStore(cfg.store_dir())
        with st.capture_lock():
            st.set_start_position(start, force=True)
        if folder == "all":
            with pytest.raises(SourceError, match=f"table {db}.v: capture cannot read its layout") as e:
                run_capture(cfg)
            assert f"leave {db}.v out of capture (source.filter.exclude" in e.value.hint
        else:
            run_capture(cfg)
            assert [r["data"] for r in all_records(str(cfg.store_dir()), db) if not r["isDdl"]] == [[{"id": "1"}]]
