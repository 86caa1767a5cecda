"""The RDB writer's ordered groups against real MariaDB and PostgreSQL: unique values moving
within a chunk, real key-changing UPDATEs under ON UPDATE CASCADE, recorded positions that make
replays skip, terminal errors for constraints the source does not have, generated columns."""

from __future__ import annotations

import pytest

from adapters.base import Change
from adapters.rdb import RdbTable, make_writer
from sluice_common.errors import RowError
from tests.integration.test_rdb_conformance import MariaEnv, PgEnv

INT, TXT = "int(11)", "varchar(40)"


@pytest.fixture(scope="module", params=["mariadb", "postgresql"])
def db(request):
    e = MariaEnv(request.getfixturevalue("mariadb_target")) if request.param == "mariadb" \
        else PgEnv(request.getfixturevalue("postgres"))
    yield e
    e.drop()


def ch(kind, table, data, old=None, seq=(1, 0, 0), types=None) -> Change:
    types = types or {c: INT if c in ("id", "pid", "n", "a", "b") else TXT for c in data}
    return Change(kind, "src", table, data, old, ("id",), types, seq, True)


def numbered(changes: list[Change], batch: int = 1) -> list[Change]:
    return [c._replace(seq=(batch, i, 0)) for i, c in enumerate(changes)]


def run(env, routes, chunks, scope="store-x:g1"):
    w = make_writer(env.target, tuple(routes.values()))
    w.track(scope)
    w.open()
    try:
        for chunk in chunks:
            w.apply(routes[chunk[0].table], chunk)
            w.commit()
    except BaseException:
        w.rollback()
        raise
    finally:
        w.close()
    return w


def table(env, name, cols, extra=""):
    env.run(f"CREATE TABLE {env.qt(name)} ({cols}{extra})")
    return RdbTable(target_table=name, target_schema=env.schema)


def rows(env, name, order="id"):
    return env.run(f"SELECT * FROM {env.qt(name)} ORDER BY {order}")


def test_unique_values_moving_within_a_chunk(db):
    r = table(db, "u1", "id INT PRIMARY KEY, email VARCHAR(40), CONSTRAINT u1_email UNIQUE (email)")
    run(db, {"u1": r}, [numbered([ch("INSERT", "u1", {"id": "1", "email": "e1"}),
                                  ch("INSERT", "u1", {"id": "2", "email": "e2"})])])
    swap = numbered([  # a swap through a temporary value, and a deleted row's email taken by a new row
        ch("UPDATE", "u1", {"id": "1", "email": "tmp"}, {"email": "e1"}),
        ch("UPDATE", "u1", {"id": "2", "email": "e1"}, {"email": "e2"}),
        ch("UPDATE", "u1", {"id": "1", "email": "e2"}, {"email": "tmp"}),
        ch("DELETE", "u1", {"id": "2", "email": "e1"}),
        ch("INSERT", "u1", {"id": "3", "email": "e1"}),
    ], batch=2)
    w = run(db, {"u1": r}, [swap])
    assert rows(db, "u1") == [(1, "e2"), (3, "e1")]
    assert sum(w.stats.updated.values()) == 3 and sum(w.stats.inserted.values()) == 1


def test_recorded_positions_make_a_replay_skip(db):
    r = table(db, "u2", "id INT PRIMARY KEY, email VARCHAR(40), CONSTRAINT u2_email UNIQUE (email)")
    history = numbered([ch("INSERT", "u2", {"id": "1", "email": "a"}), ch("INSERT", "u2", {"id": "2", "email": "c"}),
                        ch("UPDATE", "u2", {"id": "1", "email": "x"}, {"email": "a"}),
                        ch("UPDATE", "u2", {"id": "1", "email": "b"}, {"email": "x"}),
                        ch("UPDATE", "u2", {"id": "2", "email": "x"}, {"email": "c"})])
    run(db, {"u2": r}, [history[:2], history[2:]])
    # without the recorded position, replaying the history over the newer target would refuse
    # "x" for id 1 (id 2 holds it); with it, the replay skips what the target holds
    w = run(db, {"u2": r}, [history[:2], history[2:]])
    assert sum(w.stats.skipped.values()) == 5 and rows(db, "u2") == [(1, "b"), (2, "x")]
    got = db.run(f"SELECT scope, tbl, batch_id, seq, row_no FROM {db.qt('_sluice_progress')} WHERE tbl = 'u2'")
    assert got == [("store-x:g1", "u2", 1, 4, 0)]
    # another scope (a new store) has no position: everything is applied again
    with pytest.raises(RowError) as e:
        run(db, {"u2": r}, [history[:2], history[2:3], history[3:]], scope="store-y:g1")
    assert rows(db, "u2") == [(1, "b"), (2, "x")]
    assert "u2" in str(e.value) and "email" in str(e.value)


def test_a_rolled_back_chunk_records_no_position(db):
    r = table(db, "u3", "id INT PRIMARY KEY, v VARCHAR(40)")
    w = make_writer(db.target, (r,))
    w.track("store-z:g1")
    w.open()
    w.apply(r, numbered([ch("INSERT", "u3", {"id": "1", "v": "a"})]))
    w.rollback()
    w.apply(r, numbered([ch("INSERT", "u3", {"id": "1", "v": "a"})]))
    w.commit()
    w.close()
    assert rows(db, "u3") == [(1, "a")]


def test_key_changes_are_updates_that_cascade(db):
    p = table(db, "fp", "id INT PRIMARY KEY, code VARCHAR(40)")
    c = table(db, "fc", f"id INT PRIMARY KEY, pid INT, CONSTRAINT fc_p FOREIGN KEY (pid) REFERENCES {db.qt('fp')} "
                        "(id) ON DELETE CASCADE ON UPDATE CASCADE")
    routes = {"fp": p, "fc": c}
    parents = [ch("INSERT", "fp", {"id": "1", "code": "a"}), ch("INSERT", "fp", {"id": "2", "code": "b"})]
    children = [ch("INSERT", "fc", {"id": i, "pid": p}) for i, p in (("10", "1"), ("11", "1"), ("20", "2"))]
    run(db, routes, [numbered(parents), numbered(children)])
    # parent 1 re-keyed to 5 (the binlog has no row events for its children), parent 2 deleted
    run(db, routes, [numbered([ch("UPDATE", "fp", {"id": "5", "code": "a"}, {"id": "1"})], batch=2),
                     numbered([ch("DELETE", "fp", {"id": "2", "code": "b"})], batch=3)])
    assert rows(db, "fp") == [(5, "a")]
    assert rows(db, "fc") == [(10, 5), (11, 5)]


def test_a_constraint_the_source_does_not_have_is_a_terminal_error(db):
    r = table(db, "u4", "id INT PRIMARY KEY, email VARCHAR(40), CONSTRAINT u4_only UNIQUE (email)")
    with pytest.raises(RowError) as e:
        run(db, {"u4": r}, [numbered([ch("INSERT", "u4", {"id": "1", "email": "same"}),
                                      ch("INSERT", "u4", {"id": "2", "email": "same"})])])
    text = str(e.value)
    assert "u4" in text and "'2'" in text and ("u4_only" in text or "email" in text)
    assert rows(db, "u4") == []  # nothing of the chunk stayed


def test_generated_columns_are_computed_by_the_target(db):
    gen = "AS (a + b) STORED" if db.family == "mysql" else "GENERATED ALWAYS AS (a + b) STORED"
    r = table(db, "g1", f"id INT PRIMARY KEY, a INT, b INT, s INT {gen}")
    types = {"id": INT, "a": INT, "b": INT, "s": INT}
    plain = [Change("INSERT", "src", "g1", {"id": "1", "a": "2", "b": "3", "s": "5"}, None, ("id",), types, (1, 0, 0)),
             Change("UPDATE", "src", "g1", {"id": "1", "a": "4", "b": "3", "s": "7"}, {"a": "2", "s": "5"}, ("id",),
                    types, (1, 1, 0))]
    run(db, {"g1": r}, [plain])
    assert rows(db, "g1") == [(1, 4, 3, 7)]


def test_a_full_load_over_existing_rows_does_not_cascade(db):
    """``sluice etl`` upserts; on MySQL an existing key is deleted and inserted again, which must
    not delete the row's children through ON DELETE CASCADE (PostgreSQL upserts in place)."""
    p = table(db, "lp", "id INT PRIMARY KEY, code VARCHAR(40)")
    c = table(db, "lc", f"id INT PRIMARY KEY, pid INT, CONSTRAINT lc_p FOREIGN KEY (pid) REFERENCES {db.qt('lp')} "
                        "(id) ON DELETE CASCADE")
    run(db, {"lp": p, "lc": c}, [numbered([ch("INSERT", "lp", {"id": "1", "code": "a"})]),
                                 numbered([ch("INSERT", "lc", {"id": "10", "pid": "1"})], batch=2)])
    types = {"id": INT, "code": TXT}
    load = [Change("UPSERT", "src", "lp", {"id": "1", "code": "loaded"}, None, ("id",), types),
            Change("UPSERT", "src", "lp", {"id": "2", "code": "new"}, None, ("id",), types)]
    w = make_writer(db.target, (p,))
    w.open()
    w.apply(p, load)
    w.commit()
    w.close()
    assert rows(db, "lp") == [(1, "loaded"), (2, "new")] and rows(db, "lc") == [(10, 1)]
