"""Real binlog files nobody here wrote, through both decoders and the framer (no server needed).

Debian's ``mariadb-test-data`` ships a binlog MySQL 8.0.40 wrote for MariaDB's
``rpl_from_mysql80`` test (``std_data/mdev35643_mysql_80_binlog.000001``; the SQL that made it is
in ``suite/rpl/t/rpl_from_mysql80.test``): plain transactions, a 100-row transaction in a
zstd-compressed transaction payload (``binlog_transaction_compression=1``), a statement-format
INSERT, and a partial JSON update (``binlog_row_value_options=PARTIAL_JSON``) whose after image is
a diff. The file's table maps carry no column names (MySQL 8.0's default
``binlog_row_metadata=MINIMAL``), so the test names them from the test's CREATE TABLEs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.capture.items import Commit, Rows, Statement
from tests.support.binlog_file import read_file
from tests.support.prereq import missing

MYSQL80 = Path("/usr/share/mysql/mysql-test/std_data/mdev35643_mysql_80_binlog.000001")
NAMES = {"test.t1": ["a", "b", "c"], "test.t2": ["a", "b"]}

if not MYSQL80.exists():
    missing(f"{MYSQL80} is missing: scripts/bootstrap installs Debian's mariadb-test-data", module=True)


@pytest.mark.parametrize("native", [True, False], ids=["native", "python"])
def test_a_mysql_80_binlog_with_a_compressed_transaction_and_a_partial_json_update(native):
    items = read_file(MYSQL80, NAMES, native=native)
    rows = [i for i in items if type(i) is Rows]
    t1 = [int(r["a"]) for i in rows if i.codec.table == "t1" for r in i.rows]
    assert t1 == [1, 2, 3, 4, *range(1000, 1100), 5]
    # the compressed payload is one transaction: its rows at the payload's offset, its commit after it
    payload = [i for i in rows if i.logpos == 1468]
    assert len(payload) == 100 and payload[7].rows == [{"a": "1007", "b": "7", "c": "--7--" + "/" * 100 + "--"}]
    commits = [i.logpos for i in items if type(i) is Commit]
    assert 2297 in commits and 1468 not in commits
    # the statement-format INSERT is stored as what it is: a write of test.t2 the binlog has no rows of
    stmts = [i for i in items if type(i) is Statement and i.dml]
    assert [(s.database, s.table) for s in stmts] == [("test", "t2")] and stmts[0].sql.startswith("INSERT INTO t2")
    # the partial JSON update: the diff applied to the before image's document
    (update,) = [i for i in rows if i.codec.table == "t2"]
    ((before, after),) = update.rows
    doc = {"a": "hulu", "b": "[zyzzy]" * 100, "c": "bulu"}
    assert json.loads(before["b"]) == doc
    assert after["b"] == json.dumps({**doc, "b": "oOo" * 50}, separators=(", ", ": "))
    assert update.kind == "UPDATE" and update.partial is None
