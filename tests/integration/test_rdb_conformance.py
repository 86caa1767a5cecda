"""RDB writer conformance: the golden batches against real MariaDB, PostgreSQL and SQLite.

MariaDB runs twice: as installed, and with the server's messages in German (``lc_messages =
de_DE``, as a German-speaking DBA may set it): duplicate keys are told apart by error code, never
by the English text, so every case must come out the same (issue #40, 3).
"""

from __future__ import annotations

import sqlite3
import uuid
from contextlib import contextmanager
from dataclasses import replace

import psycopg
import pymysql
import pytest

from adapters.base import ApplyStats, Change
from adapters.rdb import RdbTable, RdbTarget, make_writer
from adapters.rdb.values import suggest_type
from sluice_common.errors import TargetError
from tests.support import golden
from tests.support.golden import GoldenTable


class Env:
    """One target database: raw SQL for setup/inspection, and the writer's target config."""

    family: str
    target: RdbTarget
    schema: str | None

    def q(self, name: str) -> str:
        ch = "`" if self.family == "mysql" else '"'
        return ch + name.replace(ch, ch + ch) + ch

    def qt(self, name: str) -> str:
        return f"{self.q(self.schema)}.{self.q(name)}" if self.schema else self.q(name)

    def run(self, sql: str, params: tuple = ()) -> list[tuple]:
        raise NotImplementedError

    def text(self, col: str) -> str:
        return {"mysql": f"CAST({self.q(col)} AS CHAR)", "postgresql": f"{self.q(col)}::text",
                "sqlite": f"CAST({self.q(col)} AS TEXT)"}[self.family]

    def create(self, table: GoldenTable, name: str | None = None, **route_kw) -> RdbTable:
        name = name or f"{table.name}_{uuid.uuid4().hex[:6]}"
        cols = [f"{self.q(c)} {suggest_type(self.family, t)}" for c, t in table.columns]
        if table.pk:
            cols.append(f"PRIMARY KEY ({', '.join(self.q(c) for c in table.pk)})")
        cols += [f"UNIQUE ({', '.join(self.q(c) for c in u)})" for u in table.unique]
        self.run(f"CREATE TABLE {self.qt(name)} ({', '.join(cols)})")
        return RdbTable(target_table=name, target_schema=self.schema, **route_kw)

    def rows(self, route: RdbTable, cols: tuple[str, ...], order: tuple[str, ...] = ()) -> list[dict]:
        order_sql = ", ".join(self.q(c) for c in order) if order else ", ".join(self.q(c) for c in cols)
        got = self.run(f"SELECT {', '.join(self.text(c) for c in cols)} FROM {self.qt(route.target_table)} "
                       f"ORDER BY {order_sql}")
        return [dict(zip(cols, r, strict=True)) for r in got]


class MariaEnv(Env):
    family = "mysql"
    #: the server's message language while this env is in use (None: as installed)
    lc_messages: str | None = None

    def __init__(self, info: dict):
        self.info, self.schema = info, f"rdbt_{uuid.uuid4().hex[:8]}"
        self.conn = pymysql.connect(host=info["host"], port=info["port"], user=info["user"],
                                    password=info["password"], autocommit=True, charset="utf8mb4")
        self.run(f"CREATE DATABASE {self.q(self.schema)}")
        self.target = RdbTarget.from_url(f"mariadb+pymysql://{info['user']}@{info['host']}:{info['port']}/"
                                         f"{self.schema}", password=info["password"])

    def run(self, sql: str, params: tuple = ()) -> list[tuple]:
        with self.conn.cursor() as cur:
            cur.execute("SET time_zone = '+00:00'")
            cur.execute(sql, params or None)
            return list(cur.fetchall())

    def drop(self) -> None:
        self.run(f"DROP DATABASE {self.q(self.schema)}")
        self.conn.close()


class PgEnv(Env):
    family = "postgresql"

    def __init__(self, info: dict):
        self.info, self.schema = info, f"rdbt_{uuid.uuid4().hex[:8]}"
        self.conn = psycopg.connect(host=info["host"], port=info["port"], user=info["user"],
                                    password=info["password"], dbname=info["database"], autocommit=True)
        self.run(f"CREATE SCHEMA {self.q(self.schema)}")
        self.target = RdbTarget.from_url(f"postgresql+psycopg://{info['user']}@{info['host']}:{info['port']}/"
                                         f"{info['database']}", password=info["password"])

    def run(self, sql: str, params: tuple = ()) -> list[tuple]:
        self.conn.execute("SET TIME ZONE 'UTC'")
        cur = self.conn.execute(sql, params or None)
        return list(cur.fetchall()) if cur.description else []

    def drop(self) -> None:
        self.run(f"DROP SCHEMA {self.q(self.schema)} CASCADE")
        self.conn.close()


class SqliteEnv(Env):
    family = "sqlite"

    def __init__(self, path: str):
        self.schema = None
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.target = RdbTarget(dialect="sqlite", database=path)

    def run(self, sql: str, params: tuple = ()) -> list[tuple]:
        return list(self.conn.execute(sql, params).fetchall())

    def drop(self) -> None:
        self.conn.close()


@contextmanager
def server_messages(info: dict, language: str):
    """The MariaDB server's ``lc_messages`` set globally (new sessions get it) while in use."""
    admin = pymysql.connect(host=info["host"], port=info["port"], user=info["user"], password=info["password"],
                            autocommit=True)
    with admin.cursor() as cur:
        cur.execute("SELECT @@GLOBAL.lc_messages")
        before = cur.fetchone()[0]
        cur.execute("SET GLOBAL lc_messages = %s", (language,))
    try:
        yield
    finally:
        with admin.cursor() as cur:
            cur.execute("SET GLOBAL lc_messages = %s", (before,))
        admin.close()


@pytest.fixture(scope="module", params=["mariadb", "mariadb-de", "postgresql", "sqlite"])
def env(request, tmp_path_factory):
    if request.param == "mariadb-de":
        info = request.getfixturevalue("mariadb_target")
        with server_messages(info, "de_DE"):
            e = MariaEnv(info)
            e.lc_messages = "de_DE"
            yield e
            e.drop()
        return
    if request.param == "mariadb":
        e = MariaEnv(request.getfixturevalue("mariadb_target"))
    elif request.param == "postgresql":
        e = PgEnv(request.getfixturevalue("postgres"))
    else:
        e = SqliteEnv(str(tmp_path_factory.mktemp("rdb") / "target.db"))
    yield e
    e.drop()


def apply(env: Env, route: RdbTable, batches, mappings=None) -> ApplyStats:
    w = make_writer(env.target, mappings or (route,))
    w.open()
    try:
        for batch in batches:
            w.apply(route, list(batch))
            w.commit()
    except BaseException:
        w.rollback()
        raise
    finally:
        w.close()
    return w.stats


def expected_rows(case: golden.GoldenCase) -> list[dict]:
    return list(case.expected)


@pytest.mark.parametrize("make_case", golden.CASES, ids=lambda f: f.__name__)
def test_golden_case(env, make_case):
    case = make_case()
    route = env.create(case.table)
    apply(env, route, case.batches)
    assert env.rows(route, case.table.names, case.table.pk) == expected_rows(case)


@pytest.mark.parametrize("make_case", golden.CASES, ids=lambda f: f.__name__)
def test_batches_applied_twice_give_the_same_state(env, make_case):
    case = make_case()
    route = env.create(case.table)
    first = apply(env, route, case.batches)
    second = apply(env, route, case.batches)
    assert env.rows(route, case.table.names, case.table.pk) == expected_rows(case)
    assert sum(first.skipped.values()) == 0 or case.name == "pk_swap"
    existing = {tuple(r[c] for c in case.table.pk) for r in case.expected}
    if case.name == "basic":  # the first batch's inserts of keys that exist at the end are skipped
        keys = [tuple(c.data[k] for k in case.table.pk) for c in case.batches[0]]
        assert sum(second.skipped.values()) == sum(1 for k in keys if k in existing) == 6


@pytest.mark.parametrize("make_case", golden.CASES, ids=lambda f: f.__name__)
def test_replay_after_partial_apply(env, make_case):
    case = make_case()
    route = env.create(case.table)
    apply(env, route, case.batches[:1])
    apply(env, route, [case.batches[1][: len(case.batches[1]) // 2]] if len(case.batches) > 1 else [])
    apply(env, route, case.batches)  # the job replays everything not acked
    assert env.rows(route, case.table.names, case.table.pk) == expected_rows(case)


def test_one_big_chunk_keeps_per_key_order(env):
    case = golden.basic()
    route = env.create(case.table)
    apply(env, route, [case.changes])
    assert env.rows(route, case.table.names, case.table.pk) == expected_rows(case)


def test_table_without_primary_key(env):
    case = golden.no_primary_key()
    route = env.create(case.table)
    stats = apply(env, route, case.batches)
    got = env.rows(route, case.table.names)
    assert sorted(got, key=str) == sorted(case.expected, key=str)
    assert sum(stats.updated.values()) == 1 and sum(stats.deleted.values()) == 1


def test_secondary_unique_conflict_is_terminal(env):
    t = GoldenTable("uniq", (("id", "int(11)"), ("email", "varchar(40)")), pk=("id",), unique=(("email",),))
    route = env.create(t)
    apply(env, route, [[t.insert(t.row(id="1", email="a@x"))]])
    batch = [t.insert(t.row(id="1", email="a@x")), t.insert(t.row(id="2", email="a@x"))]
    with pytest.raises(TargetError) as exc:
        apply(env, route, [batch])
    assert route.target_table in str(exc.value)
    if env.family != "postgresql":  # PostgreSQL's own DETAIL names the key instead
        assert "'2'" in str(exc.value)
    if getattr(env, "lc_messages", None) == "de_DE":  # the writer's own session spoke German
        assert "Doppelter Eintrag" in str(exc.value), exc.value
    assert env.rows(route, t.names) == [{"id": "1", "email": "a@x"}]


WEIRD = ["we`ird", 'quo"te', "sp ace", "select", "ünï 名前", "pct%s"]


def test_weird_identifiers_work_and_cannot_inject(env):
    cols = tuple((name, "varchar(30)") for name in WEIRD)
    t = GoldenTable("tbl `x\" ; drop", (("id", "int(11)"), *cols), pk=("id",))
    route = env.create(t, name="tbl `x\" ; drop table ü")
    values = {c: f"v'{i}`\"; --" for i, (c, _) in enumerate(cols)}
    rows = [t.row(id=str(i), **values) for i in range(3)]
    upd, after = t.update(rows[1], **{"select": "new ' value"})
    apply(env, route, [[t.insert(r) for r in rows], [upd, t.delete(rows[2])], [t.insert(rows[0])]])
    assert env.rows(route, t.names, ("id",)) == [rows[0], after]


def test_mapped_columns_rename_and_target_pk(env):
    src = GoldenTable("people", (("pid", "int(11)"), ("full_name", "varchar(30)"), ("secret", "varchar(10)")),
                      pk=("pid",))
    tgt = GoldenTable("people_t", (("person_id", "int(11)"), ("name", "varchar(30)")), pk=("person_id",))
    route = replace(env.create(tgt), columns=(("pid", "person_id"), ("full_name", "name")),
                    pk=(("person_id", "pid"),))
    r = src.row(pid="7", full_name="Ann", secret="s")
    upd, _ = src.update(r, full_name="Anna", secret="t")
    apply(env, route, [[src.insert(r)], [upd], [src.insert(r)]])
    assert env.rows(route, ("person_id", "name")) == [{"person_id": "7", "name": "Anna"}]


def test_new_source_column_fails_or_is_ignored(env):
    t = GoldenTable("narrow", (("id", "int(11)"), ("a", "varchar(5)")), pk=("id",))
    route = env.create(t)
    wide = Change("INSERT", "golden_src", t.name, {"id": "1", "a": "x", "added": "y"}, None, ("id",),
                  {"id": "int(11)", "a": "varchar(5)", "added": "varchar(5)"})
    with pytest.raises(TargetError, match="source column added of golden_src.narrow is not in target table"):
        apply(env, route, [[wide]])
    apply(env, replace(route, on_new_column="ignore"), [[wide]])
    assert env.rows(route, t.names) == [{"id": "1", "a": "x"}]


def test_update_matching_no_row_is_counted_not_an_error(env):
    t = golden.ACCOUNTS
    route = env.create(t)
    upd, _ = t.update(t.row(id="99", name="ghost", balance="1.00"), name="still ghost")
    w = make_writer(env.target, (route,))
    w.open()
    w.apply(route, [upd, t.delete(t.row(id="98"))])
    w.commit()
    w.close()
    assert sum(w.stats.updated.values()) == 0 and sum(w.missed.values()) == 2


def test_check_names_missing_table_and_column(env):
    t = golden.ACCOUNTS
    route = env.create(t)
    make_writer(env.target, (route,)).check()
    with pytest.raises(TargetError, match="does not exist"):
        make_writer(env.target, (replace(route, target_table="nope"),)).check()
    with pytest.raises(TargetError, match="has no column nick"):
        make_writer(env.target, (replace(route, columns=(("name", "nick"),)),)).check()
    with pytest.raises(TargetError, match=r"no primary key or unique index on \(name\)"):
        make_writer(env.target, (replace(route, pk=(("name", "name"),)),)).check()


def test_inserts_of_every_chunk_are_committed(env):
    """One writer, several chunks of INSERTs, a commit after each: every chunk is in the target
    after the writer closed (the MySQL INSERT path renders literals; it must stay inside the
    connection's transaction, not beside it)."""
    t = GoldenTable("chunks", (("id", "int(11)"), ("v", "varchar(20)")), pk=("id",))
    route = env.create(t)
    batches = [[t.insert(t.row(id=str(b * 10 + i), v=f"100% {b}'{i}")) for i in range(3)] for b in range(4)]
    stats = apply(env, route, batches)
    assert sum(stats.inserted.values()) == 12
    assert len(env.rows(route, t.names)) == 12


def _key_rows(env: Env, route: RdbTable) -> list[tuple]:
    hexed = {"mysql": "HEX(kb)", "postgresql": "upper(encode(kb, 'hex'))", "sqlite": "hex(kb)"}[env.family]
    kt = "to_char(kt, 'YYYY-MM-DD HH24:MI:SS.US')" if env.family == "postgresql" else env.text("kt")
    got = env.run(f"SELECT {hexed}, {env.text('kd')}, {kt}, ks, v FROM {env.qt(route.target_table)}")
    return sorted(tuple(x) for x in got)


def _expected_key_rows(rows: list[dict]) -> list[tuple]:
    return sorted((r["kb"].encode("latin-1").hex().upper(), r["kd"], r["kt"], r["ks"], r["v"]) for r in rows)


@pytest.mark.parametrize("how", ["once", "twice", "partial_then_all"])
def test_keys_of_every_kind(env, how):
    batches, expected = golden.keys_of_every_kind()
    route = env.create(golden.KEYS)
    if how == "partial_then_all":
        apply(env, route, [batches[0], batches[1][:2]])
    apply(env, route, batches)
    if how == "twice":
        apply(env, route, batches)
    assert _key_rows(env, route) == _expected_key_rows(expected)


def test_an_interleaved_oltp_chunk_keeps_per_key_order_in_few_runs(env):
    """sysbench-like chunks (UPDATE, UPDATE, DELETE + INSERT of random keys) are regrouped into
    waves of whole runs; every key's changes keep their order, so the end state is the model's. Each
    key's changes are folded (adapters/rdb/fold.py); replayed onto rows that are ahead of them (a
    crash before the ack), they end in the same state."""
    import random

    t = GoldenTable("oltp", (("id", "int(11)"), ("k", "int(11)"), ("c", "varchar(20)")), pk=("id",))
    route = env.create(t)
    rnd, model = random.Random(5), {}
    first = []
    for i in range(1, 41):
        model[i] = t.row(id=str(i), k="0", c="init")
        first.append(t.insert(model[i]))
    chunk = []
    for n in range(300):
        i = rnd.randint(1, 40)
        if i in model:
            ch, model[i] = t.update(model[i], k=str(n))
            chunk.append(ch)
            j = rnd.randint(1, 40)
            if j in model:
                chunk.append(t.delete(model.pop(j)))
        else:
            model[i] = t.row(id=str(i), k=str(n), c=f"new{n}")
            chunk.append(t.insert(model[i]))
    stats = apply(env, route, [first, chunk])
    assert sum(stats.folded.values()) > 50  # 40 hot keys: each key's changes in the chunk folded
    def by_id(rows):
        return sorted(rows, key=lambda r: int(r["id"]))
    assert by_id(env.rows(route, t.names)) == by_id(model.values())
    apply(env, route, [first, chunk[:150]])  # a replay from before the chunk: the rows are ahead of it
    apply(env, route, [chunk[150:]])
    assert by_id(env.rows(route, t.names)) == by_id(model.values())
    w = make_writer(env.target, (route,))
    w.open()
    waves = w.sequence.waves(route, chunk)
    w.close()
    runs = 1 + sum(1 for a, b in zip(waves, waves[1:], strict=False) if (a.kind, a.old and tuple(a.old)) !=
                   (b.kind, b.old and tuple(b.old)))
    before = 1 + sum(1 for a, b in zip(chunk, chunk[1:], strict=False) if a.kind != b.kind)
    assert runs * 5 < before, (runs, before)
