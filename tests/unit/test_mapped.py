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
