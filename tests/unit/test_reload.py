"""The hints that bring a mirror's missing target tables over (pipeline/job/reload.py): the
commands are quoted for a shell and name only the tables missing; and which tables the pending DDL
makes (pipeline/job/mirrorcheck.py: those are left to their replay)."""

from __future__ import annotations

import shlex
from types import SimpleNamespace

import yaml

from adapters.rdb.config import RdbTarget
from pipeline.job.mirrorcheck import _made_by_pending
from pipeline.job.reload import missing_table_error, tables_hint
from pipeline.mapping import load_mappings


def _plan(tmp_path):
    (tmp_path / "m.yml").write_text(yaml.safe_dump({"dbMapping": {"mirrorDb": True, "database": "shop",
                                                                  "targetDb": "shop copy"}}))
    (tmp_path / "t.yml").write_text(yaml.safe_dump({"dbMapping": {"database": "crm", "table": "c",
                                                                  "targetTable": "c", "mapAll": True,
                                                                  "targetPk": {"id": "id"}}}))
    mappings = tuple(load_mappings([str(tmp_path / "m.yml"), str(tmp_path / "t.yml")]))
    target = RdbTarget.from_url("mysql://app@db.example:3307/x")
    cfg = SimpleNamespace(source=SimpleNamespace(host="src.example", port=3306, user="repl"),
                          file="/etc/sluice dir/sluice.yml")
    return SimpleNamespace(config=cfg, group_id="g1", mappings=mappings, mapping_target=("t", "t"),
                           targets={"t": ("rdb", target)})


def test_the_hint_names_only_the_missing_tables_quoted_for_a_shell(tmp_path):
    plan = _plan(tmp_path)
    hint = tables_hint(plan, plan.targets["t"][1], "shop copy", "shop", ("orders", "odd name"))
    dump = hint.split("source: ", 1)[1].split(" (give each", 1)[0]
    left, right = dump.split(" | ")
    assert shlex.split(left)[-3:] == ["shop", "orders", "odd name"] and "--skip-add-drop-table" in left
    assert shlex.split(right)[-1] == "shop copy" and "-h db.example -P 3307 -u app" in right
    repair = shlex.split(hint.split("load the rows: ", 1)[1].split("; then sync again", 1)[0])
    assert repair == ["sluice", "repair", "--config", "/etc/sluice dir/sluice.yml", "--group", "g1",
                      "--table", "shop.orders", "--table", "shop.odd name"]
    keyless = tables_hint(plan, plan.targets["t"][1], "shop", "shop", ("orders", "log"), ("log",))
    assert "--table shop.orders; then sync again; log has no primary key, so a repair cannot load it: load " \
           "the group again with `sluice bootstrap --config '/etc/sluice dir/sluice.yml' --force`" in keyless
    assert "--table shop.log" not in keyless


def test_a_failed_partition_of_a_mirrored_table_gets_the_mirror_fix_and_others_keep_theirs(tmp_path):
    plan = _plan(tmp_path)
    error = "target table shop copy.orders does not exist on X\n  fix: create it"
    assert missing_table_error(plan, error, "crm.c") == error  # a table mapping: its own hint
    assert missing_table_error(plan, error, None) == error
    pg = SimpleNamespace(**{**vars(plan), "targets": {"t": ("rdb", RdbTarget.from_url("postgresql://a@h/x"))}})
    assert missing_table_error(pg, error, "shop.orders") == error  # no DDL replayed there: its own hint


def test_what_the_pending_ddl_makes_is_left_to_its_replay():
    """Only a CREATE TABLE, a RENAME TABLE's new names and an ALTER TABLE ... RENAME make a table; an
    ALTER, TRUNCATE or index of a missing table does not (its replay would fail)."""
    class Store:
        def pending(self, group):
            return [SimpleNamespace(ddl=()), SimpleNamespace(ddl=(3,))]

        def ddl_records(self, batches):
            assert len(batches) == 1  # only the batch with DDL is read
            return [{"type": "CREATE", "table": "Orders", "sql": "CREATE TABLE `Orders` (id INT)"},
                    {"type": "RENAME", "table": "a", "sql": "RENAME TABLE a TO `b 2`, shop.c TO shop.`D`"},
                    {"type": "ALTER", "table": "e", "sql": "ALTER TABLE e RENAME COLUMN x TO y, RENAME TO f"},
                    {"type": "ALTER", "table": "g", "sql": "ALTER TABLE g ADD COLUMN h INT"},
                    {"type": "TRUNCATE", "table": "v", "sql": "TRUNCATE v"}]

    assert _made_by_pending(SimpleNamespace(group_id="g1"), Store()) == {"orders", "b 2", "d", "f"}

    class Unindexed(Store):
        def ddl_records(self, batches):
            return None

    assert _made_by_pending(SimpleNamespace(group_id="g1"), Unindexed()) is None
