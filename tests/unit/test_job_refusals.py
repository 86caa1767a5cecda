"""Which barrier records stop a group (pipeline/job/refusals.py): statement-format writes, rolled-back
transactions and partial row images of tables the group maps, unless a repair's waiver covers them."""

from __future__ import annotations

from types import SimpleNamespace

from pipeline.job.refusals import find
from pipeline.job.routing import Route

POS = {"logfile": "mysql-bin.000002", "logpos": 500}


def _plan(*routes: Route, kind: str = "rdb") -> SimpleNamespace:
    n = max(r.midx for r in routes) + 1
    return SimpleNamespace(routes=list(routes), targets={"t": (kind, None)}, mapping_target=["t"] * n,
                           mappings=[SimpleNamespace(file=f"m{i}.yml") for i in range(n)])


def _rec(table: str, sql: str = "UPDATE t SET n = n + 1", db: str = "d", **extra) -> dict:
    return {"batchId": 3, "seq": 7, "database": db, "table": table, "isDdl": False, "type": "QUERY", "sql": sql,
            **POS, **extra}


def _waiver(*tables: str, logpos: int = 900) -> dict:
    return {("d", t): {"logfile": "mysql-bin.000002", "logpos": logpos} for t in tables}


def test_a_statement_stops_only_groups_that_map_its_table():
    plan = _plan(Route(0, "d", "t", None))
    ref = find(_rec("t"), plan, {})
    assert ref is not None and ref.position == "mysql-bin.000002:500" and "statement-format write to d.t" in ref.problem
    assert find(_rec("other"), plan, {}) is None
    assert find(_rec("t"), plan, _waiver("t")) is None             # repaired after it
    assert find(_rec("t"), plan, _waiver("t", logpos=400)) is not None  # repaired before it: not covered


def test_a_statement_of_unknown_table_needs_every_mapped_table_repaired():
    plan = _plan(Route(0, "d", "a", None), Route(1, "d", "b", None))
    rec = _rec("", sql="DO f()")
    assert "a table of d" in find(rec, plan, {}).problem
    assert find(rec, plan, _waiver("a")) is not None
    assert find(rec, plan, _waiver("a", "b")) is None
    assert find(_rec("", db="e"), plan, {}) is None  # no mapping of database e


def test_an_es_mapping_of_any_database_is_hit():
    plan = _plan(Route(0, None, "t", None), kind="es")
    assert find(_rec("t", db="shop"), plan, {}) is not None
    assert find(_rec("", db="shop"), plan, {}) is not None


def test_a_rolled_back_transaction_says_so():
    ref = find(_rec("t", sql="ROLLBACK"), _plan(Route(0, "d", "t", None)), {})
    assert "rolled back" in ref.problem and "non-transactional" in ref.problem


def test_partial_images_are_refused_where_inexact():
    cols = {"id": "int", "n": "int", "s": "varchar(10)"}
    insert = _rec("t", type="INSERT", mysqlType=cols, pkNames=["id"], partial={"after": ["id", "n"]})
    update = _rec("t", type="UPDATE", mysqlType=cols, pkNames=["id"], old=[{"n": "1"}],
                  partial={"before": ["id"], "after": ["id", "n"]})
    rdb = _plan(Route(0, "d", "t", None))
    assert "an INSERT" in find(insert, rdb, {}).problem
    assert find(update, rdb, {}) is None                                   # by an unchanged key: exact
    assert "needs the whole row" in find(update, _plan(Route(0, "d", "t", None), kind="es"), {}).problem
    rekey = {**update, "old": [{"id": "2"}]}
    assert "changes the key" in find(rekey, rdb, {}).problem
    assert find(insert, rdb, _waiver("t")) is None                        # repaired past it
