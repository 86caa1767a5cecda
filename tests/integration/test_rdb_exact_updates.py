"""What an UPDATE writes (docs/rdb.md, "What an UPDATE sets"), on MariaDB, PostgreSQL and SQLite:
every mapped column of the after-image, changed or not, and nothing else; and target tables
with triggers refused by name at pre-flight."""

from __future__ import annotations

import pytest

from adapters.base import Change
from adapters.rdb import make_writer
from sluice_common.errors import TargetMismatchError
from tests.integration.test_rdb_conformance import apply, env  # noqa: F401 - the fixture
from tests.support.golden import GoldenTable

T = GoldenTable("stamped", (("id", "int(11)"), ("a", "varchar(10)"), ("b", "varchar(10)"), ("c", "varchar(10)")),
                pk=("id",))


def test_an_update_sets_every_column_of_its_image_and_only_those(env):  # noqa: F811
    route = env.create(T)
    rows = [T.row(id=str(i), a=f"a{i}", b=f"b{i}", c=f"c{i}") for i in (1, 2, 3)]
    apply(env, route, [[T.insert(r) for r in rows]])
    env.run(f"UPDATE {env.qt(route.target_table)} SET b = 'drift'")  # what a target's ON UPDATE/trigger did
    full, _ = T.update(rows[0], a="A1")
    # a partial image (binlog_row_image MINIMAL/NOBLOB): the key and the columns the image has
    part = Change("UPDATE", T.database, T.name, {"id": "2", "a": "A2", "b": "b2"}, {"a": "a2"}, T.pk, T.mysql_type)
    same, _ = T.update(rows[2], c="c3")  # a change of a column this mapping does not hold: nothing to write
    narrow = route.__class__(**{**route.__dict__, "columns": (("id", "id"), ("a", "a"), ("b", "b")),
                                "pk": (("id", "id"),)})
    apply(env, route, [[full, part]])
    apply(env, narrow, [[same]])
    assert env.rows(route, T.names, ("id",)) == [
        {"id": "1", "a": "A1", "b": "b1", "c": "c1"},   # b: the image's value, though unchanged
        {"id": "2", "a": "A2", "b": "b2", "c": "c2"},   # c: not in the image, kept
        {"id": "3", "a": "a3", "b": "drift", "c": "c3"},  # nothing mapped changed: not written
    ]


def test_check_refuses_a_target_table_with_a_trigger(env):  # noqa: F811
    route = env.create(T)
    table = env.qt(route.target_table)
    name = env.q("tg_" + route.target_table)
    if env.family == "mysql":
        env.run(f"CREATE TRIGGER {env.q(env.schema)}.{name} BEFORE UPDATE ON {table} "
                "FOR EACH ROW SET NEW.b = 'x'")
    elif env.family == "postgresql":
        env.run(f"CREATE FUNCTION {env.q(env.schema)}.tg() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN NEW.b := 'x'; RETURN NEW; END $$")
        env.run(f"CREATE TRIGGER {name} BEFORE UPDATE ON {table} "
                f"FOR EACH ROW EXECUTE FUNCTION {env.q(env.schema)}.tg()")
    else:
        env.run(f"CREATE TRIGGER {name} AFTER UPDATE ON {table} "
                f"BEGIN UPDATE {table} SET b = 'x' WHERE id = NEW.id; END")
    with pytest.raises(TargetMismatchError, match=f"tg_{route.target_table}") as exc:
        make_writer(env.target, (route,)).check()
    assert route.target_table in exc.value.message and exc.value.hint
    if env.family == "postgresql":  # a disabled trigger does not fire: accepted
        env.run(f"ALTER TABLE {table} DISABLE TRIGGER {name}")
    else:
        env.run(f"DROP TRIGGER {env.q(env.schema) + '.' if env.schema else ''}{name}")
    make_writer(env.target, (route,)).check()
