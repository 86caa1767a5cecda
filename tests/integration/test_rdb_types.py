"""Every MySQL type at its edges arrives equal in MariaDB, and by the documented mapping in PostgreSQL."""

from __future__ import annotations

import json

import pytest

from adapters.rdb import make_writer, schema
from adapters.rdb.values import suggest_type
from sluice_common.dmlvalues import float32_text
from tests.integration.test_rdb_conformance import Env, MariaEnv, PgEnv, apply
from tests.support import golden
from tests.support.golden import EVERY_TYPE, EVERY_TYPE_VALUES


@pytest.fixture(scope="module")
def maria(mariadb_target):
    e = MariaEnv(mariadb_target)
    yield e
    e.drop()


@pytest.fixture(scope="module")
def pg(postgres):
    e = PgEnv(postgres)
    yield e
    e.drop()


def _apply_twice(env: Env):
    route = env.create(EVERY_TYPE)
    row = golden.every_type_row()
    stats = apply(env, route, [[EVERY_TYPE.insert(row)]])
    again = apply(env, route, [[EVERY_TYPE.insert(row)]])
    assert sum(stats.inserted.values()) == 1 and sum(again.skipped.values()) == 1
    return route, row


def _mysql_render(col: str, mysql_type: str, q) -> str:
    base = mysql_type.split("(")[0].split()[0]
    if base == "bit":
        return f"CAST({q(col)} + 0 AS CHAR)"
    if base in ("varbinary", "binary", "blob"):
        return f"HEX({q(col)})"
    if base == "float":
        return f"CAST({q(col)} AS DOUBLE)"
    return f"CAST({q(col)} AS CHAR)"


def test_every_type_row_is_equal_in_mariadb(maria):
    route, row = _apply_twice(maria)
    assert_every_type_row_mariadb(maria, route, row["id"])


def assert_every_type_row_mariadb(maria, route, key: str, **instead: str) -> None:
    """Every column of the golden every-type row (key ``key``) equal to the source's (``instead``: other values)."""
    exprs = [_mysql_render(c, t, maria.q) for c, t, _ in EVERY_TYPE_VALUES]
    got = maria.run(f"SELECT {', '.join(exprs)} FROM {maria.qt(route.target_table)} WHERE id = {int(key)}")[0]
    for (col, mysql_type, want), value in zip(EVERY_TYPE_VALUES, got, strict=True):
        want = instead.get(col, want)
        if mysql_type.startswith(("varbinary", "binary", "blob")):
            value, want = value, want.encode("latin-1").hex().upper()
        elif mysql_type == "float":
            value = float32_text(float(value))
        elif mysql_type == "json":
            value, want = json.loads(value), json.loads(want)
        assert value == want, col
    # the instant, not only the text: TIMESTAMP read in the server's zone is 01:30 EDT (first of two)
    local = maria.run(f"SELECT CONVERT_TZ(ts6, '+00:00', 'America/New_York'), UNIX_TIMESTAMP(ts6) "
                      f"FROM {maria.qt(route.target_table)} WHERE id = {int(key)}")[0]
    assert str(local[0]) == "2024-11-03 01:30:00.654321" and float(local[1]) == 1730611800.654321


def test_every_type_row_follows_the_documented_postgresql_mapping(pg):
    route, row = _apply_twice(pg)
    assert_every_type_row_postgresql(pg, route, row["id"])


def assert_every_type_row_postgresql(pg, route, key: str) -> None:
    """Every column of the golden every-type row (key ``key``) by docs/rdb.md "Values"."""
    row = golden.every_type_row()
    cols = [c for c, _, _ in EVERY_TYPE_VALUES]
    where = f"WHERE id = {int(key)}"
    got = dict(zip(cols, pg.run(f"SELECT {', '.join(pg.text(c) for c in cols)} FROM "
                                f"{pg.qt(route.target_table)} {where}")[0], strict=True))
    blob, binv, bin4, j, f32, f32b, f32max = pg.run(
        f"SELECT blob, bin, bin4, j, f32::float8, f32b::float8, f32max::float8 FROM {pg.qt(route.target_table)} "
        f"{where}")[0]
    expected_text = {
        "id": key, "u64": "18446744073709551615", "i64": "-9223372036854775808", "tiny1": "255",
        "tiny_s": "-128", "med_u": "16777215", "bit64": "1" * 64, "bit5": "00101",
        "dec": row["dec"], "f64": "2.2250738585072014e-308", "d": "2024-02-29", "d0": "-infinity",
        "dt6": "2024-11-03 01:30:00.123456", "dt0": "-infinity", "ts6": "2024-11-03 05:30:00.654321+00",
        "ts0": "-infinity", "tm": "-838:59:59", "tm2": "25:00:01", "y": "0", "e": "", "e2": "large",
        "s": "a,c", "txt": row["txt"], "ch": "ab", "nul": None,
    }
    by_value = ("blob", "bin", "bin4", "j", "f32", "f32b", "f32max")
    assert sorted([*expected_text, *by_value]) == sorted(cols)  # every column is compared
    for col, want in expected_text.items():
        assert got[col] == want, col
    assert bytes(blob) == bytes(range(256)) and bytes(binv) == row["bin"].encode("latin-1")
    assert bytes(bin4) == b"\x00\x01\x00\x00"
    assert j == json.loads(row["j"])
    assert float32_text(f32) == row["f32"] and float32_text(f32b) == row["f32b"]
    assert float32_text(f32max) == row["f32max"]
    types = dict(pg.run("SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = %s "
                        "AND table_name = %s", (pg.schema, route.target_table)))
    assert types["u64"] == "numeric" and types["bit64"] == "bit varying" and types["tm"] == "interval"
    assert types["ts6"] == "timestamp with time zone" and types["j"] == "jsonb" and types["blob"] == "bytea"


def test_suggested_postgresql_types_are_documented():
    assert suggest_type("postgresql", "bigint(20) unsigned") == "numeric(20,0)"
    assert suggest_type("postgresql", "tinyint(1) unsigned") == "smallint"
    assert suggest_type("postgresql", "int(10) unsigned") == "bigint"
    assert suggest_type("postgresql", "bit(64)") == "bit varying(64)"
    assert suggest_type("postgresql", "enum('a','b')") == "text"
    assert suggest_type("postgresql", "year(4)") == "smallint"
    assert suggest_type("sqlite", "decimal(10,2)") == "TEXT"


def test_value_that_does_not_fit_names_row_and_column(pg):
    t = golden.GoldenTable("flags", (("id", "int(11)"), ("flag", "tinyint(1)")), pk=("id",))
    route = pg.create(t)
    pg.run(f"ALTER TABLE {pg.qt(route.target_table)} ALTER COLUMN flag TYPE boolean USING flag <> 0")
    w = make_writer(pg.target, (route,))
    w.open()
    with pytest.raises(Exception, match=r"key \{id='3'\}: value '2' of column flag cannot be written"):
        w.apply(route, [t.insert(t.row(id="3", flag="2"))])
    w.rollback()
    w.close()


def test_a_json_column_that_would_normalize_the_source_text_names_a_fix_that_works(pg):
    """A MariaDB JSON naming a key twice into ``jsonb`` (which keeps the last key, where MariaDB's
    functions read the first) is refused; the ALTER the refusal names (``json``, not the ``jsonb``
    the column has) followed, the text arrives as written."""
    t = golden.GoldenTable("dupkeys", (("id", "int(11)"), ("j", "json")), pk=("id",))
    route = pg.create(t)
    assert pg.run("SELECT data_type FROM information_schema.columns WHERE table_name = %s AND column_name = 'j'",
                  (route.target_table.split(".")[-1],)) == [("jsonb",)]
    w = make_writer(pg.target, (route,))
    w.open()
    with pytest.raises(Exception, match="keeps only the last of an object's duplicate keys") as refused:
        w.apply(route, [t.insert(t.row(id="1", j='{"a":1,"a":2}'))])
    w.rollback()
    w.close()
    alter = refused.value.hint.split("give it the source's kind: ", 1)[1].split(" (restate")[0]
    assert alter.endswith(" TYPE json"), alter
    pg.run(alter)
    schema.reset_caches()  # a new sync reflects the table afresh
    w = make_writer(pg.target, (route,))
    w.open()
    w.apply(route, [t.insert(t.row(id="1", j='{"a":1,"a":2}'))])
    w.commit()
    w.close()
    assert pg.run(f"SELECT j::text FROM {pg.qt(route.target_table)}") == [('{"a":1,"a":2}',)]


def test_rendered_insert_literals_equal_the_drivers_parameters(maria):
    """MySQL INSERTs run as rendered literals (adapters/rdb/literals.py): every value must come
    out exactly as pymysql renders the converted value when it is a bound parameter, NULLs and
    the awkward strings included; a value that does not convert leaves it to the parameter path."""
    from adapters.rdb import literals

    route = maria.create(EVERY_TYPE)
    full = {**golden.every_type_row(), "e": "small"}
    nulls = {c: None for c in full} | {"id": "2"}
    odd = {**full, "id": "-3", "txt": "'\\\x00\x1a\n\r\"%%s%(a)s\U0001F680", "ch": "", "dec": "-0.0"}
    changes = [EVERY_TYPE.insert(r) for r in (full, nulls, odd)]
    w = make_writer(maria.target, (route,))
    w.open()
    try:
        plan = w.plan(w.route(route, EVERY_TYPE.database, EVERY_TYPE.name), changes[0])
        raw = literals.driver_connection(w.conn)
        assert raw is not None
        want = ",".join("(" + ",".join(raw.escape(v) for v in r) + ")" for r in w.chunk().rows(plan, changes))
        assert literals.insert_values(plan, changes, raw) == want
        for c in changes:  # row by row too (a column without NULLs takes the fast branch)
            row = w.chunk().rows(plan, [c])[0]
            assert literals.insert_values(plan, [c], raw) == "(" + ",".join(map(raw.escape, row)) + ")"
        bad = EVERY_TYPE.insert({**full, "id": "4", "u64": "12x"})
        assert literals.insert_values(plan, [bad], raw) is None
    finally:
        w.rollback()
        w.close()
    stats = apply(maria, route, [changes])
    assert sum(stats.inserted.values()) == 3
    got = maria.run(f"SELECT id, CAST(txt AS CHAR) FROM {maria.qt(route.target_table)} ORDER BY id")
    assert [(i, t) for i, t in got] == [(-3, odd["txt"]), (1, full["txt"]), (2, None)]


def test_large_values_are_cut_into_statements_within_the_byte_budget(maria):
    """A table with a LOB column: rendered multi-row INSERTs stay under maxStatementBytes."""
    import dataclasses

    from adapters.rdb import chunk

    t = golden.GoldenTable("lob", (("id", "int(11)"), ("body", "mediumtext")), pk=("id",))
    route = maria.create(t)
    rows = [t.row(id=str(i), body=("x'\\" * 3000)[: 5000 + i]) for i in range(40)]
    target = dataclasses.replace(maria.target, max_statement_bytes=64 * 1024)
    w = make_writer(target, (route,))
    w.open()
    try:
        changes = [t.insert(r) for r in rows]
        plan = w.plan(w.route(route, t.database, t.name), changes[0])
        cuts = w.chunk().chunks(plan, changes, 2, row_size=lambda c: chunk.row_bytes(plan.getter(c.data)))
        assert len(cuts) > 3 and cuts[0][0] == 0 and cuts[-1][1] == 40
        w.apply(route, changes)
        w.commit()
    finally:
        w.close()
    got = maria.run(f"SELECT id, body FROM {maria.qt(route.target_table)} ORDER BY id")
    assert [(str(i), b) for i, b in got] == [(r["id"], r["body"]) for r in rows]


def test_rendered_updates_set_every_type_as_the_drivers_parameters(maria):
    """MySQL UPDATE runs render key and set values as literals too (ChunkApply.update_rendered): each
    literal is what pymysql makes of the converted value as a bound parameter, and rows updated
    from all-NULL to the every-type values (one multi-row statement, then a single-row one)
    read back equal, as inserted rows do."""
    from adapters.rdb import literals

    route = maria.create(EVERY_TYPE)
    full = {**golden.every_type_row(), "e": "small"}
    blank = [{c: None for c in full} | {"id": k} for k in ("1", "2", "3")]
    apply(maria, route, [[EVERY_TYPE.insert(r) for r in blank]])
    rest = {c: v for c, v in full.items() if c != "id"}
    odd = {**rest, "txt": "'\\\x00\x1a\n\r\"%%s%(a)s\U0001F680", "ch": "", "dec": "-0.0"}
    ups = [EVERY_TYPE.update(blank[0], **rest)[0], EVERY_TYPE.update(blank[1], **odd)[0]]
    w = make_writer(maria.target, (route,))
    w.open()
    try:
        plan = w.plan(w.route(route, EVERY_TYPE.database, EVERY_TYPE.name), ups[0])
        raw = literals.driver_connection(w.conn)
        order = plan.key_pos + plan.set_columns(ups[0])
        rows = w.chunk().rows(plan, ups)
        assert literals.literal_columns(plan, ups, order, raw) == [[raw.escape(r[i]) for r in rows] for i in order]
    finally:
        w.rollback()
        w.close()
    stats = apply(maria, route, [ups, [EVERY_TYPE.update(blank[2], **rest)[0]]])
    assert sum(stats.updated.values()) == 3
    for key in ("1", "3"):
        assert_every_type_row_mariadb(maria, route, key, e="small", id=key)
    got = maria.run(f"SELECT CAST(txt AS CHAR), CAST(ch AS CHAR) FROM {maria.qt(route.target_table)} WHERE id = 2")
    assert got == [(odd["txt"], "")]
