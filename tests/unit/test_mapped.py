"""What a group's mappings covered at its last sync and what changed since (pipeline/job/mapped.py):
recorded in the store's folder, compared with the mappings a sync loads. No services needed."""

from __future__ import annotations

from types import SimpleNamespace

from pipeline.job import mapped
from pipeline.mapping.model import parse_mapping


def _m(file: str, **db) -> object:
    return parse_mapping({"dbMapping": {"database": "d", "targetTable": "t", "targetPk": {"id": "id"}, **db}}, file)


def test_nothing_is_said_before_the_first_record(tmp_path):
    assert not mapped.compare(tmp_path, "g1", (_m("t.yml", table="t", mapAll=True),))


def test_a_removed_mapping_a_widened_one_and_a_new_one(tmp_path):
    t = _m("t.yml", table="t", mapAll=True, excludeColumns=["c"])
    u = _m("u.yml", table="u", targetColumns={"b": None})
    mapped.remember(tmp_path, "g1", (t, u))
    assert (tmp_path / "mapped" / "g1.json").is_file()

    wider = _m("t.yml", table="t", mapAll=True)
    v = _m("v.yml", table="v", mapAll=True)
    changes = mapped.compare(tmp_path, "g1", (wider, v))
    assert changes.dropped == {"d.u": "u.yml"} and changes.widened == {"t.yml": ["c"]} and changes.added == ["v.yml"]
    cfg = SimpleNamespace(file="sluice.yml")
    notes = mapped.notes(cfg, "g1", changes, {"d.u": 2}, 7)
    assert notes[0].startswith("skipped 2 rows of d.u: no mapping of group g1 covers it any more (u.yml read it")
    assert notes[0].endswith("sluice store set-cursor --config sluice.yml --group g1 --to 7")
    assert "t.yml now writes c: rows applied before this sync lack it" in notes[1]
    assert "--group g1 --mapping t.yml" in notes[1] and "v.yml is new since the last sync" in notes[2]


def test_a_mirror_still_covers_its_tables_and_named_columns_grow(tmp_path):
    t = _m("t.yml", table="t", targetColumns={"b": None})
    mapped.remember(tmp_path, "g1", (t,))
    mirror = parse_mapping({"dbMapping": {"mirrorDb": True, "database": "d"}}, "m.yml")
    assert not mapped.compare(tmp_path, "g1", (mirror,)).dropped  # d.* still reads d.t
    more = _m("t.yml", table="t", targetColumns={"b": None, "c": None})
    assert mapped.compare(tmp_path, "g1", (more,)).widened == {"t.yml": ["c"]}


def test_a_mapping_pointed_elsewhere_is_said_with_what_changed(tmp_path):
    """targetTable, targetPk and a re-pointed column are compared; a record from before targets were
    recorded is not (nothing to compare with), nor is a mapping whose target is the same."""
    import json

    t = _m("t.yml", table="t", targetColumns={"a": None, "b": "b"})
    es = parse_mapping({"esMapping": {"_index": "i", "_id": "_id", "sql": "SELECT a.id AS _id, a.x FROM t a"}},
                       "e.yml")
    mapped.remember(tmp_path, "g1", (t, es))
    assert not mapped.compare(tmp_path, "g1", (t, es))
    moved = _m("t.yml", table="t", targetTable="t2", targetPk={"id": "uid"}, targetColumns={"a": "z", "b": "b"})
    es2 = parse_mapping({"esMapping": {"_index": "i2", "_id": "_id", "sql": "SELECT a.id AS _id,\n a.x FROM t a"}},
                        "e.yml")
    changes = mapped.compare(tmp_path, "g1", (moved, es2))
    assert changes.moved == {"t.yml": ["column a from z (was a)", "key id=uid (was id=id)", "table t2 (was t)"],
                             "e.yml": ["index i2 (was i)"]}  # the SQL's whitespace is no change
    notes = mapped.notes(SimpleNamespace(file="s.yml"), "g1", changes, {}, 3)
    assert notes[1] == ("t.yml now writes with column a from z (was a); key id=uid (was id=id); table t2 (was t): "
                        "rows applied before this sync are where and as the old mapping wrote them; rewrite them: "
                        "sluice repair --config s.yml --group g1 --mapping t.yml")
    path = tmp_path / "mapped" / "g1.json"
    body = json.loads(path.read_text())
    for v in body["mappings"].values():
        del v["target"]  # as a sync before this record part wrote it
    path.write_text(json.dumps(body))
    assert not mapped.compare(tmp_path, "g1", (moved, es2))
    mirror = parse_mapping({"dbMapping": {"mirrorDb": True, "database": "d", "targetDb": "x"}}, "m.yml")
    mapped.remember(tmp_path, "g1", (mirror,))
    other = parse_mapping({"dbMapping": {"mirrorDb": True, "database": "d", "targetDb": "y"}}, "m.yml")
    assert mapped.compare(tmp_path, "g1", (other,)).moved == {"m.yml": ["database y (was x)"]}


def test_the_default_database_named_or_left_out_is_the_same_table(tmp_path):
    """``targetTable: t`` and ``targetTable: db.t`` on a target whose URL names database db write the
    same table: no move (and no `sluice repair` asked for). The record keeps the database the rows
    went to, so a URL pointed at another database is a move; so is another database named, a record
    of another kind of target with the same table part, and anything when no default is known."""
    plain = _m("t.yml", table="t", targetTable="t", mapAll=True)
    named = _m("t.yml", table="t", targetTable="db.t", mapAll=True)
    mapped.remember(tmp_path, "g1", (plain,))  # a record from before the database was recorded
    assert not mapped.compare(tmp_path, "g1", (named,), {"t.yml": "db"}).moved
    assert mapped.compare(tmp_path, "g1", (named,)).moved == {"t.yml": ["table db.t (was t)"]}
    mapped.remember(tmp_path, "g1", (plain,), {"t.yml": "db"})
    assert not mapped.compare(tmp_path, "g1", (named,), {"t.yml": "db"}).moved
    assert not mapped.compare(tmp_path, "g1", (plain,), {"t.yml": "db"}).moved
    assert mapped.compare(tmp_path, "g1", (plain,), {"t.yml": "b"}).moved == {"t.yml": ["table b.t (was db.t)"]}
    other = _m("t.yml", table="t", targetTable="other.t", mapAll=True)
    assert mapped.compare(tmp_path, "g1", (other,), {"t.yml": "db"}).moved == {"t.yml": ["table other.t (was db.t)"]}
    hbase = parse_mapping({"hbaseMapping": {"database": "d", "table": "t", "hbaseTable": "t", "rowKey": "id",
                                            "columns": {"x": None}}}, "t.yml")
    mapped.remember(tmp_path, "g1", (hbase,), {"t.yml": "db"})
    assert mapped.compare(tmp_path, "g1", (named,), {"t.yml": "db"}).moved == {"t.yml": ["table db.t (was t)"]}


def test_default_schemas_are_those_of_mysql_and_mariadb_urls():
    """The default database of each mapping's target: a MySQL or MariaDB URL's; a PostgreSQL schema is
    no URL database, and a URL without one gives none."""
    from pipeline.config import parse_config
    from pipeline.job.group import GroupPlan

    def target(url: str):
        cfg = parse_config({"source": {"name": "s", "host": "h", "user": "u", "password": "p", "serverId": 9},
                            "groups": [{"groupId": "g", "mappings": [], "outerAdapters": [
                                {"name": "rdb", "key": "k", "properties": {"jdbc.url": url}}]}]})
        from adapters.registry import target_from_adapter

        return target_from_adapter(cfg.group("g").outerAdapters[0], "s.yml", "groups[0].outerAdapters[0]")

    urls = {"a.yml": "jdbc:mysql://h:3306/db", "b.yml": "jdbc:mariadb://h/mdb?useSSL=false",
            "c.yml": "jdbc:postgresql://h/pg", "d.yml": "jdbc:mysql://h:3306/"}
    maps = tuple(_m(f, table="t", mapAll=True) for f in urls)
    plan = GroupPlan(None, "g", maps, tuple(urls), {f: ("rdb", target(u)) for f, u in urls.items()}, [])
    assert plan.default_schemas() == {"a.yml": "db", "b.yml": "mdb"}


def test_a_group_not_among_those_the_store_started_with_is_said_until_it_synced(tmp_path):
    """Added to a running deployment, a group's targets get only what the store holds: named at its
    syncs until one finishes (its mappings recorded); never for the groups the store started with. A
    store started before the record existed: the groups registered in it stand in."""
    old = SimpleNamespace(root=tmp_path, groups=lambda: ["g1"])
    assert mapped.joined(old, "g2") == ["g1"] and mapped.joined(old, "g1") == []
    mapped.record_start(tmp_path, ["g3", "g1"], 7)
    store = SimpleNamespace(root=tmp_path, groups=lambda: ["g1", "g2", "g3"])  # g2 registered: no matter
    assert mapped.joined(store, "g1") == [] and mapped.joined(store, "g2") == ["g1", "g3"]
    assert mapped.started(tmp_path) == {"groups": ["g1", "g3"], "afterBatch": 7, "by": "capture"}
    changes = mapped.Changes(joined=["g1", "g3"])
    assert changes
    (note,) = mapped.notes(SimpleNamespace(file="s.yml"), "g2", changes, {}, 0)
    assert note.startswith("group g2 is new to this store (it started with group g1, g3): it applies the "
                           "changes the store holds, from its first batch; rows its tables held before that")
    assert note.endswith("load them: sluice repair --config s.yml --group g2")
    mapped.remember(tmp_path, "g2", (_m("t.yml", table="t", mapAll=True),))  # a sync of it finished
    assert mapped.joined(store, "g2") == []


def test_an_adapter_an_es_id_and_hbase_cells_pointed_elsewhere():
    """The adapter key of any mapping; an ES ``_id`` turned into ``pk``; an HBase cell, separator and
    qualifier case: each named."""
    import tempfile
    from pathlib import Path

    root = Path(tempfile.mkdtemp())
    es = parse_mapping({"outerAdapterKey": "es1", "esMapping": {"_index": "i", "_id": "_id",
                                                               "sql": "SELECT a.id AS _id, a.x FROM t a"}}, "e.yml")
    hb = parse_mapping({"outerAdapterKey": "h", "hbaseMapping": {"database": "d", "table": "t", "hbaseTable": "T",
                                                                "rowKey": "id", "columns": {"x": "CF:X", "y": None}}},
                       "h.yml")
    mapped.remember(root, "g1", (es, hb))
    es2 = parse_mapping({"outerAdapterKey": "es2", "esMapping": {"_index": "i", "pk": "id",
                                                                "sql": "SELECT a.id, a.x FROM t a"}}, "e.yml")
    hb2 = parse_mapping({"outerAdapterKey": "h", "hbaseMapping": {
        "database": "d", "table": "t", "hbaseTable": "T", "rowKey": "id", "rowKeySeparator": "#",
        "uppercaseQualifier": False, "columns": {"x": "CF:XX", "y": None}}}, "h.yml")
    moved = mapped.compare(root, "g1", (es2, hb2)).moved
    assert moved["e.yml"] == ["_id none (was _id)", "adapter es2 (was es1)", "pk id (was none)",
                              "sql SELECT a.id, a.x FROM t a (was SELECT a.id AS _id, a.x FROM t a)"]
    assert moved["h.yml"] == ["cell of x CF:XX (was CF:X)", "rowKeySeparator # (was |)",
                              "uppercaseQualifier False (was True)"]


def test_a_mapping_pointed_at_a_renamed_table_names_the_rewrite_first(tmp_path):
    """The file still exists and reads another table (the source table renamed, as the pre-flight asks
    when the old name is gone): the older changes are in the new table's rows, so the note names the
    rewrite first; restoring the file (what a removed mapping's note says) would meet the old table
    gone (a new user's probe). Said too when another mapping still reads the old table (nothing is
    skipped then, but this file's target misses those changes)."""
    mapped.remember(tmp_path, "g1", (_m("t.yml", table="users", mapAll=True),))
    changes = mapped.compare(tmp_path, "g1", (_m("t.yml", table="members", mapAll=True),))
    assert changes.dropped == {"d.users": "t.yml"} and changes.repointed == {"t.yml": (["d.users"], ["d.members"])}
    (note,) = mapped.notes(SimpleNamespace(file="s.yml"), "g1", changes, {"d.users": 2}, 9)
    assert note == ("t.yml reads d.members now (d.users at the last sync): the pending changes of d.users were not "
                    "applied to its target (2 skipped: no mapping covers it now); if the table was renamed, its rows "
                    "under the new name hold them: rewrite them: sluice repair --config s.yml --group g1 --mapping "
                    "t.yml; if it was not, restore t.yml and replay: sluice store set-cursor --config s.yml --group "
                    "g1 --to 9")
    removed = mapped.compare(tmp_path, "g1", ())
    assert removed.dropped == {"d.users": "t.yml"} and not removed.repointed
    other = _m("u.yml", table="users", targetTable="u", mapAll=True)  # still reads d.users
    both = mapped.compare(tmp_path, "g1", (_m("t.yml", table="members", mapAll=True), other))
    assert not both.dropped and both.repointed == {"t.yml": (["d.users"], ["d.members"])}
    assert "the pending changes of d.users were not applied to its target; if the table was renamed" in \
        mapped.notes(SimpleNamespace(file="s.yml"), "g1", both, {}, 9)[0]


def test_es_objfields_and_skips_edited_are_said(tmp_path):
    """An ES mapping's objFields or skips edited between syncs: documents written before keep the old
    shape (a new user's probe: a field added to skips stayed in them, nothing said)."""
    sql = "SELECT a.id AS _id, a.x, a.tags, a.c_time FROM t a"
    es = parse_mapping({"esMapping": {"_index": "i", "_id": "_id", "sql": sql}}, "e.yml")
    mapped.remember(tmp_path, "g1", (es,))
    es2 = parse_mapping({"esMapping": {"_index": "i", "_id": "_id", "sql": sql, "objFields": {"tags": "array:;"},
                                      "skips": ["c_time"]}}, "e.yml")
    assert mapped.compare(tmp_path, "g1", (es2,)).moved["e.yml"] == [
        "objFields {'tags': 'array:;'} (was {})", "skips ['c_time'] (was [])"]
