"""mirrorDb DDL replay (MariaDB), error messages without passwords, pooled connections."""

from __future__ import annotations

import dataclasses
import time

import pytest

from adapters.base import DdlChange
from adapters.rdb import RdbTable, RdbTarget, make_writer
from adapters.rdb.client import engine_for
from adapters.rdb.ddl import rewrite_schema
from adapters.rdb.errors import classify
from sluice_common.errors import TargetError, TransientError
from tests.integration.test_rdb_conformance import MariaEnv, PgEnv, apply
from tests.support.golden import GoldenTable


@pytest.fixture(scope="module")
def maria(mariadb_target):
    e = MariaEnv(mariadb_target)
    yield e
    e.drop()


def test_rewrite_schema_only_touches_qualifiers():
    sql = "ALTER TABLE `src`.t ADD c varchar(9) DEFAULT 'src.t' COMMENT \"src.x\", /* src.y */ ADD KEY k (c)"
    out = rewrite_schema(sql, "src", "dst`2")
    assert out.startswith("ALTER TABLE `dst``2`.t ADD")
    assert "'src.t'" in out and '"src.x"' in out and "/* src.y */" in out
    assert rewrite_schema("RENAME TABLE src.a TO src . b", "src", "d") == "RENAME TABLE `d`.a TO `d` . b"
    assert rewrite_schema("CREATE TABLE x.src (id int)", "src", "d") == "CREATE TABLE x.src (id int)"


DDLS = [
    ("CREATE", "m1", "CREATE TABLE `srcdb`.`m1` (id int PRIMARY KEY, a varchar(10) DEFAULT '100%')"),
    ("ALTER", "m1", "ALTER TABLE m1 ADD COLUMN b int NOT NULL DEFAULT 0"),
    ("CINDEX", "m1", "CREATE INDEX ix_a ON srcdb.m1 (a)"),
    ("CREATE", "m3", "CREATE TABLE m3 (id int PRIMARY KEY)"),
    ("RENAME", "m1", "RENAME TABLE srcdb.m1 TO srcdb.m2"),
    ("ALTER", "m2", "ALTER TABLE m2 DROP COLUMN b"),
    ("DINDEX", "m2", "DROP INDEX ix_a ON m2"),
    ("TRUNCATE", "m2", "TRUNCATE TABLE m2"),
    ("ERASE", "m3", "DROP TABLE `m3`"),
]


def _columns(env: MariaEnv, table: str) -> list[tuple]:
    return env.run("SELECT TABLE_NAME, COLUMN_NAME, COLUMN_TYPE, COLUMN_DEFAULT FROM information_schema.COLUMNS "
                   "WHERE TABLE_SCHEMA = %s AND TABLE_NAME <> '_sluice_ddl_applied' ORDER BY 1, 2", (env.schema,))


@pytest.mark.parametrize("with_seq", [True, False], ids=["with_seq", "codes_only"])
def test_mirror_ddl_replay_is_idempotent(maria, with_seq):
    mirror = RdbTable(target_table="", target_schema=maria.schema, mirror_ddl=True)
    # without a seq only the error codes make replays idempotent, which cannot undo a later RENAME
    # (docs/rdb.md): that variant replays the same statements without the RENAME
    steps = DDLS if with_seq else [(k, t.replace("m2", "m1"), q.replace("m2", "m1")) for k, t, q in DDLS
                                   if k != "RENAME"]
    ddls = [DdlChange(kind, "srcdb", table, sql, seq=(7, i + 1, 0) if with_seq else (0, 0, 0))
            for i, (kind, table, sql) in enumerate(steps)]
    maria.run(f"DROP TABLE IF EXISTS {maria.qt('m1')}, {maria.qt('m2')}, {maria.qt('m3')}")
    w = make_writer(maria.target, (mirror,))
    for ddl in ddls:
        w.apply_ddl(mirror, ddl)
    first = _columns(maria, "m2")
    for ddl in ddls:  # the job replays the unacked batches, DDL included
        w.apply_ddl(mirror, ddl)
    assert _columns(maria, "m2") == first
    assert {r[0] for r in first} == ({"m2"} if with_seq else {"m1"}) and "'100%'" in str(first)
    assert [r[1] for r in first] == ["a", "id"]


def test_ddl_is_not_replayed_on_postgresql(postgres):
    env = PgEnv(postgres)
    try:
        mirror = RdbTable(target_table="", target_schema=env.schema, mirror_ddl=True)
        make_writer(env.target, (mirror,)).apply_ddl(mirror, DdlChange("CREATE", "s", "x", "CREATE TABLE x (i int)"))
        assert env.run("SELECT count(*) FROM information_schema.tables WHERE table_schema = %s",
                       (env.schema,)) == [(0,)]
    finally:
        env.drop()


def test_a_bad_ddl_is_a_target_error_with_the_statement(maria):
    mirror = RdbTable(target_table="", target_schema=maria.schema, mirror_ddl=True)
    with pytest.raises(TargetError, match="MySQL error 1064"):
        make_writer(maria.target, (mirror,)).apply_ddl(mirror, DdlChange("ALTER", "srcdb", "t", "ALTER TABLE t FOO"))


def _wrong(target: RdbTarget, pw: str) -> RdbTarget:
    from dataclasses import replace

    from sluice_common.secrets import Secret
    return replace(target, password=Secret(pw))


@pytest.mark.parametrize("service", ["mariadb_target", "postgres"])
def test_wrong_password_is_one_clear_error_without_the_password(request, service):
    info = request.getfixturevalue(service)
    env = MariaEnv(info) if service == "mariadb_target" else PgEnv(info)
    try:
        bad = _wrong(env.target, "Wr0ng-S3cret-pw")
        route = RdbTable("t", env.schema)
        with pytest.raises(TargetError) as exc:
            make_writer(bad, (route,)).check()
        text = str(exc.value)
        assert "Wr0ng-S3cret-pw" not in text and info["password"] not in text
        assert f"{info['host']}:{info['port']}" in text and "cannot connect to" in text
        with pytest.raises((TargetError, TransientError)) as exc2:  # on an executor: classified, no password
            make_writer(bad, (route,)).open()
        assert "Wr0ng-S3cret-pw" not in str(exc2.value)
    finally:
        env.drop()


@pytest.mark.parametrize("service", ["mariadb_target", "postgres"])
def test_a_target_database_that_does_not_exist_says_to_create_it(request, service):
    """Not "check the username, password and database" (a new user's probe): the database is named, and
    creating it is the fix."""
    from dataclasses import replace

    info = request.getfixturevalue(service)
    env = MariaEnv(info) if service == "mariadb_target" else PgEnv(info)
    try:
        gone = replace(env.target, database="no_such_db_x1")
        with pytest.raises(TargetError) as exc:
            make_writer(gone, (RdbTable("t", None),)).check()
        assert "create database no_such_db_x1 on the target" in exc.value.hint, exc.value.hint
    finally:
        env.drop()


def test_connection_refused_is_transient():
    target = RdbTarget(dialect="mysql", host="127.0.0.1", port=1, username="u")
    with pytest.raises(TransientError, match="MySQL error 2003"):
        make_writer(target, ()).open()


def test_a_table_newer_than_the_transaction_is_transient(maria):
    """A table created (on another connection) after the transaction's snapshot, as
    ``_sluice_progress`` is the first time an ordered table is applied, fails a read with 1412
    "please retry transaction": the job retries the chunk in a new transaction, it is not terminal."""
    maria.run(f"CREATE TABLE {maria.qt('older')} (id INT PRIMARY KEY)")
    with engine_for(maria.target).connect() as conn:
        conn.exec_driver_sql(f"SELECT * FROM {maria.qt('older')}").fetchall()  # the snapshot
        maria.run(f"CREATE TABLE {maria.qt('newer')} (id INT PRIMARY KEY)")
        with pytest.raises(Exception) as raised:
            conn.exec_driver_sql(f"SELECT * FROM {maria.qt('newer')}").fetchall()
        conn.rollback()
    err = classify(raised.value, maria.target, table="newer", action="read")
    assert isinstance(err, TransientError) and "1412" in str(err), err


def test_one_engine_per_target_and_process(maria):
    t = GoldenTable("pool", (("id", "int(11)"),), pk=("id",))
    route = maria.create(t)
    for i in range(5):
        apply(maria, route, [[t.insert(t.row(id=str(i)))]])
    engine = engine_for(maria.target)
    assert engine is engine_for(maria.target)
    assert engine.pool.checkedout() == 0 and engine.pool.size() == maria.target.pool_size
    assert maria.run(f"SELECT count(*) FROM {maria.qt(route.target_table)}") == [(5,)]


def test_an_interrupted_ddl_replay_is_run_again_and_its_history_skipped(maria):
    """The DDL ledger records a statement before it runs and marks it done after. A replay whose
    statement was interrupted (here: KILL QUERY while it waits for a metadata lock) leaves a
    record that is not done; the server may still have run the statement (a long ALTER outlives
    a killed driver: the test runs it in its place). Then the DML before the DDL, replayed, is
    skipped -- it committed before the DDL started, and it names the dropped column -- and the
    statement runs again, its "already applied" error counting as done."""
    import threading

    import pymysql

    maria.run(f"DROP TABLE IF EXISTS {maria.qt('m9')}")
    maria.run(f"CREATE TABLE {maria.qt('m9')} (id INT PRIMARY KEY, k INT, pad VARCHAR(10))")
    route = RdbTable(target_table="m9", target_schema=maria.schema, mirror_ddl=True)
    ddl = DdlChange("ALTER", "srcdb", "m9", "ALTER TABLE m9 DROP COLUMN pad", seq=(3, 5, 0))
    ledger = f"SELECT seq, done FROM {maria.qt('_sluice_ddl_applied')} WHERE source_db = 'srcdb' AND seq = '3.5.0'"
    info = maria.info
    holder = pymysql.connect(host=info["host"], port=info["port"], user=info["user"], password=info["password"],
                             database=maria.schema)
    failed: list[BaseException] = []
    try:
        holder.cursor().execute("SELECT COUNT(*) FROM m9")  # an open transaction holds the table
        w = make_writer(maria.target, (route,))
        w.track("store-x:g1")
        t = threading.Thread(target=lambda: _catch(failed, lambda: w.apply_ddl(route, ddl)))
        t.start()
        for _ in range(200):
            waiting = maria.run("SELECT ID FROM information_schema.PROCESSLIST WHERE INFO = %s AND STATE LIKE "
                                "'%%metadata lock%%'", (ddl.sql,))
            if waiting:
                break
            time.sleep(0.05)
        maria.run(f"KILL QUERY {int(waiting[0][0])}")
        t.join(60)
    finally:
        holder.close()
    assert len(failed) == 1 and isinstance(failed[0], (TargetError, TransientError)), failed
    assert maria.run(ledger) == [("3.5.0", 0)]                  # recorded before it ran, not done
    maria.run(f"ALTER TABLE {maria.qt('m9')} DROP COLUMN pad")  # the server completed it after all

    t = GoldenTable("m9", (("id", "int(11)"), ("k", "int(11)"), ("pad", "varchar(10)")), pk=("id",),
                    database="srcdb")
    history = t.insert(t.row(id="1", k="1", pad="old"))._replace(seq=(3, 2, 0))  # before the DDL
    later = GoldenTable("m9", (("id", "int(11)"), ("k", "int(11)")), pk=("id",), database="srcdb")
    after = later.insert(later.row(id="2", k="2"))._replace(seq=(3, 7, 0))     # after it
    w = make_writer(maria.target, (route,))
    w.track("store-x:g1")
    w.open()
    w.apply(route, [history])
    w.commit()
    w.apply_ddl(route, ddl)  # runs again: 1091, already applied
    w.apply(route, [after])
    w.commit()
    w.close()
    assert w.stats.skipped == {"srcdb.m9": 1} and sum(w.stats.inserted.values()) == 1
    assert maria.run(f"SELECT id, k FROM {maria.qt('m9')}") == [(2, 2)]
    assert maria.run(ledger) == [("3.5.0", 1)]


def _catch(into: list, step) -> None:
    try:
        step()
    except BaseException as e:  # noqa: BLE001 - the test inspects it
        into.append(e)


def test_the_zone_is_asked_only_for_a_statement_that_runs(maria, postgres):
    """``RdbWriter.ddl_time_zone`` (pipeline/job/zones.py, which may refuse or need the source) is
    called for a statement the target replays, and not for one it has replayed already, one of a
    kind it does not replay, or on a target that replays no MySQL DDL."""
    asked: list[str] = []

    def zone(ddl: DdlChange) -> str:
        asked.append(ddl.sql)
        return "+05:30"

    mirror = RdbTable(target_table="", target_schema=maria.schema, mirror_ddl=True)
    maria.run(f"DROP TABLE IF EXISTS {maria.qt('z1')}")
    create = DdlChange("CREATE", "srcdb", "z1", "CREATE TABLE z1 (id INT PRIMARY KEY, t TIMESTAMP NOT NULL "
                       "DEFAULT '2001-01-01 05:30:00')", seq=(9, 1, 0), time_zone="SYSTEM")
    w = make_writer(maria.target, (mirror,))
    w.ddl_time_zone = zone
    w.apply_ddl(mirror, create)
    assert asked == [create.sql]
    # replayed in +05:30: the default is the instant 2001-01-01 00:00:00 UTC
    maria.run(f"INSERT INTO {maria.qt('z1')} (id) VALUES (1)")
    assert maria.run(f"SELECT UNIX_TIMESTAMP(t) FROM {maria.qt('z1')}") == [(978307200,)]
    w.apply_ddl(mirror, create)  # replayed already (the ledger)
    w.apply_ddl(mirror, DdlChange("QUERY", "srcdb", "", "GRANT SELECT ON srcdb.* TO x", seq=(9, 2, 0)))
    assert asked == [create.sql]
    env = PgEnv(postgres)
    try:
        pg_mirror = RdbTable(target_table="", target_schema=env.schema, mirror_ddl=True)
        pg = make_writer(env.target, (pg_mirror,))
        pg.ddl_time_zone = zone
        pg.apply_ddl(pg_mirror, DdlChange("CREATE", "s", "x", "CREATE TABLE x (i int)", time_zone="SYSTEM"))
        assert asked == [create.sql]
    finally:
        env.drop()


def test_a_zone_the_target_lacks_refuses_only_a_statement_that_used_it(maria):
    """A target without time zone tables knows no zone by name. A statement whose binlog event named
    none (``time_zone`` empty, its status variables read whole) replays in UTC all the same (it gives
    the same result in any zone); one that ran in that zone, or whose event was not read whole (a
    store written before that was recorded), is refused naming the zone, with the tables' load as the fix."""
    mirror = RdbTable(target_table="", target_schema=maria.schema, mirror_ddl=True)
    maria.run(f"DROP TABLE IF EXISTS {maria.qt('z2')}, {maria.qt('z3')}")
    w = make_writer(maria.target, (mirror,))
    w.ddl_time_zone = lambda ddl: ddl.time_zone or "Nowhere/Atlantis"  # the source's global zone
    unread = DdlChange("CREATE", "srcdb", "z2", "CREATE TABLE z2 (id INT PRIMARY KEY)", seq=(9, 3, 0))
    with pytest.raises(TargetError, match="Nowhere/Atlantis"):
        w.apply_ddl(mirror, unread)
    w.apply_ddl(mirror, dataclasses.replace(unread, zone_read=True))
    assert maria.run(f"SELECT COUNT(*) FROM {maria.qt('z2')}") == [(0,)]
    used = DdlChange("CREATE", "srcdb", "z3", "CREATE TABLE z3 (id INT PRIMARY KEY, t TIMESTAMP NOT NULL "
                     "DEFAULT '2001-01-01 05:30:00')", seq=(9, 4, 0), time_zone="Nowhere/Atlantis")
    with pytest.raises(TargetError, match="Nowhere/Atlantis") as e:
        w.apply_ddl(mirror, used)
    assert "tzinfo_to_sql" in e.value.hint and e.value.table == "srcdb.z3"
    assert not maria.run(f"SHOW TABLES IN {maria.q(maria.schema)} LIKE 'z3'")
