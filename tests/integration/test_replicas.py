"""The private primary + replica pairs of tests/support/replicas.py, for MariaDB and MySQL: the
replica follows by GTID, its binlog keeps the primary's transactions (log_slave_updates), and once
the primary is stopped and the replica promoted, it takes writes and its GTID state holds both
servers' transactions."""

from __future__ import annotations

import pytest

from tests.support.replicas import start_pair


@pytest.mark.parametrize("flavor", ["mariadb", "mysql"])
def test_a_replica_follows_and_is_promoted(flavor, tmp_path):
    opts = ("slave_parallel_threads=4", "slave_parallel_mode=optimistic") if flavor == "mariadb" else (
        "replica_parallel_workers=4",)
    pair = start_pair(flavor, tmp_path, replica_options=opts)
    try:
        p, r = pair.primary, pair.replica
        assert p.info["port"] != r.info["port"]
        var = "slave_parallel_threads" if flavor == "mariadb" else "replica_parallel_workers"
        assert r.value(f"SELECT @@{var}") == 4
        p.sql("CREATE DATABASE d", "CREATE TABLE d.t (id INT PRIMARY KEY, v VARCHAR(10))",
              *[f"INSERT INTO d.t VALUES ({i}, 'p{i}')" for i in range(20)])
        before = pair.wait_caught_up()
        assert r.sql("SELECT COUNT(*) FROM d.t") == [(20,)]
        assert r.gtid_executed() == before
        pair.stop_primary()
        new = pair.promote()
        assert pair.replica_status() == {}
        new.sql("INSERT INTO d.t VALUES (100, 'after')")
        after = new.gtid_executed()
        assert after != before and new.sql("SELECT COUNT(*) FROM d.t") == [(21,)]
        # the promoted server's binlog has the primary's transactions too (log_slave_updates)
        events = [e for f, *_ in new.sql("SHOW BINARY LOGS") for e in new.sql(f"SHOW BINLOG EVENTS IN '{f}'")]
        assert sum(str(e[2]).startswith("Write_rows") for e in events) == 21
    finally:
        pair.close()


def test_start_replica_until(tmp_path):
    """A replica started later stops once the given GTID state is applied (a follower's bench)."""
    pair = start_pair("mariadb", tmp_path, replicate=False)
    try:
        p = pair.primary
        p.sql("CREATE DATABASE d", "CREATE TABLE d.t (id INT PRIMARY KEY)", "INSERT INTO d.t VALUES (1)")
        mid = p.gtid_executed()
        p.sql("INSERT INTO d.t VALUES (2)")
        pair.start_replica(until=mid)
        assert pair.replica.value(f"SELECT MASTER_GTID_WAIT('{mid}', 60)") == 0
        assert pair.replica.sql("SELECT id FROM d.t") == [(1,)]
    finally:
        pair.close()
