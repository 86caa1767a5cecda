"""Logins and grants, through the real CLI against the real MariaDB source and target (issue 37):
a password with non-ASCII characters logs in as the ``mariadb`` client does, and a missing grant
is one message naming the grant and the statement that gives it, which works when followed."""

from __future__ import annotations

import uuid

import pytest

from sluice_common import exitcodes
from tests.support.cli import one_message
from tests.support.operator import make, sql


@pytest.fixture
def users(mariadb, mariadb_target):
    """Create users on both servers (dropped afterwards): ``add(info, password, *grants)`` -> name."""
    made: list[tuple[dict, str]] = []

    def add(info: dict, password: str, *grants: str) -> str:
        name = f"op{uuid.uuid4().hex[:8]}"
        sql(info, f"CREATE USER '{name}'@'%' IDENTIFIED BY '{password}'",
            *(f"GRANT {g} TO '{name}'@'%'" for g in grants))
        made.append((info, name))
        return name

    yield add
    for info, name in made:
        sql(info, f"DROP USER IF EXISTS '{name}'@'%'")


def _login(d, source_user: str, source_pw: str, target_user: str, target_pw: str) -> None:
    raw = d.config()
    raw["source"].update(user=source_user, password=source_pw)
    props = raw["groups"][0]["outerAdapters"][0]["properties"]
    props.update({"jdbc.username": target_user, "jdbc.password": target_pw})
    d.write_config(raw)


def test_non_ascii_passwords_log_in_to_source_and_target(tmp_path, mariadb, mariadb_target, users):
    """pymysql sent a text password as Latin-1: ``ü`` arrived as other bytes than the server hashed
    (access denied), ``€`` could not be sent at all (an unexpected UnicodeEncodeError)."""
    d = make(tmp_path, mariadb, mariadb_target)
    src_pw, tgt_pw = "grün-ü€-Quelle", "Fährt-ßü-Ziel"  # € is not in Latin-1; ä, ß, ü are
    su = users(mariadb, src_pw, "REPLICATION SLAVE, REPLICATION CLIENT ON *.*", f"SELECT ON `{d.db}`.*")
    tu = users(mariadb_target, tgt_pw, f"ALL ON `{d.tdb}`.*")
    # what the issue compared with: the server takes these passwords from a UTF-8 client
    assert sql(mariadb, "SELECT 1", user=su, password=src_pw.encode()) == [(1,)]
    assert sql(mariadb_target, "SELECT 1", user=tu, password=tgt_pw.encode()) == [(1,)]
    _login(d, su, src_pw, tu, tgt_pw)
    d.source(f"INSERT INTO `{d.db}`.t VALUES (1, 'ä€'), (2, 'b')")

    proc = d.ok("run")
    out = proc.stdout + proc.stderr
    assert "run" in proc.stdout and "ok (exit 0)" in proc.stdout, out[-3000:]
    assert src_pw not in out and tgt_pw not in out
    assert d.rows() == [(1, "ä€"), (2, "b")]
    proc = d.ok("verify")
    assert "all equal (exit 0)" in proc.stdout


def _fix(proc) -> str:
    """The statement of the ``fix:`` line (up to its ``;``)."""
    line = next(ln for ln in proc.stderr.splitlines() if ln.strip().startswith("fix:"))
    return line.split("fix:", 1)[1].split(";")[0].strip()


def test_a_missing_replication_client_grant_is_named_and_the_grant_fixes_it(tmp_path, mariadb, mariadb_target,
                                                                            users):
    d = make(tmp_path, mariadb, mariadb_target)
    user = users(mariadb, "pw-op", "REPLICATION SLAVE ON *.*", f"SELECT ON `{d.db}`.*")
    _login(d, user, "pw-op", mariadb_target["user"], mariadb_target["password"])
    d.source(f"INSERT INTO `{d.db}`.t VALUES (1, 'a')")

    refused = d.run("capture", "--once")
    one_message(refused, exitcodes.FAILED, f"the source user '{user}'@'%' may not run SHOW ", "it lacks the "
                "REPLICATION CLIENT privilege", f"fix: GRANT REPLICATION CLIENT ON *.* TO '{user}'@'%';")
    proc = d.run("run")
    assert proc.returncode == exitcodes.FAILED and "Traceback" not in proc.stdout + proc.stderr
    assert "error (capture): the source user" in proc.stdout and "OperationalError" not in proc.stdout
    assert "lag: capture lag unknown (the source user" in proc.stdout
    proc = d.run("status")
    assert proc.returncode == 0 and "lag       unknown: the source is unreachable: the source user" in proc.stdout

    sql(mariadb, _fix(refused))  # follow the fix line
    d.ok("run")
    assert d.rows() == [(1, "a")]


def test_a_missing_select_grant_is_named_not_called_a_missing_table(tmp_path, mariadb, mariadb_target, users):
    d = make(tmp_path, mariadb, mariadb_target)
    user = users(mariadb, "pw-op", "REPLICATION SLAVE, REPLICATION CLIENT ON *.*")
    _login(d, user, "pw-op", mariadb_target["user"], mariadb_target["password"])
    d.source(f"INSERT INTO `{d.db}`.t VALUES (1, 'a')")
    d.ok("capture", "--once")  # capture reads the binlog: no SELECT needed

    refused = d.run("sync", "--group", "g1")
    one_message(refused, exitcodes.FAILED, f"mappings/t.yml: dbMapping.table: the source user '{user}'@'%' may not "
                f"read table {d.db}.t", f"fix: GRANT SELECT ON `{d.db}`.* TO '{user}'@'%';")
    assert "does not exist" not in refused.stderr
    proc = d.run("run")
    assert proc.returncode == exitcodes.FAILED and f"may not read table {d.db}.t" in proc.stdout
    assert d.rows() == []

    sql(mariadb, _fix(refused))
    d.ok("sync", "--group", "g1")
    assert d.rows() == [(1, "a")]
