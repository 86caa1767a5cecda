"""`sluice repair`'s summary line: a dry run says what a repair would write and delete (it writes
nothing, so the written counts are 0: a new user's probe read "would write 0 rows and deleted 0"
for one missing and one extra row)."""

from __future__ import annotations

from pipeline.commands.repair_cmd import summary_lines


def _out(dry: bool, **counts) -> dict:
    t = {"target": "db.t", "chunks": 1, "differing": 1, "repaired": 0, "missing": 1, "changed": 2, "extra": 1,
         "upserted": 0, "deleted": 0, "lock_wait": 0.0, "lock_held": 0.0, "keys": [], **counts}
    return {"group": "g1", "dry_run": dry, "tables": {"src.t": t}, "seconds": 0.1, "waived": []}


def test_a_dry_run_says_what_it_would_write_and_delete():
    assert summary_lines(_out(True))[-1] == ("repair g1 (dry run): 1 tables, 4 differing rows, would write 3 rows "
                                             "and delete 1 in 0.1 s")
    assert summary_lines(_out(False, upserted=3, deleted=1))[-1] == ("repair g1: 1 tables, 4 differing rows, wrote 3 "
                                                                     "rows and deleted 1 in 0.1 s")
