"""The JVM side of the job on local Spark: split, route, key changes, partitioning, barriers."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from adapters.rdb import RdbTarget
from adapters.rdb.keys import KeyRules
from pipeline.job.keyfold import KeyPlan
from pipeline.job.plan import Segment, partitioned_changes, segments
from pipeline.job.routing import Route
from pipeline.store.records import read_dml


@pytest.fixture(scope="module")
def spark():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # key folds run in a Python UDF
    s = (SparkSession.builder.master("local[2]").appName("plan-test")
         .config("spark.ui.enabled", "false").config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.driver.host", "127.0.0.1").getOrCreate())
    yield s
    s.stop()


def dml(batch, seq, type_, rows, old=None, table="t", pk=("id",), ddl=False, sql=""):
    return {"id": seq, "database": "db", "table": table, "type": type_, "isDdl": ddl, "sql": sql,
            "pkNames": list(pk), "data": rows, "old": old, "mysqlType": {"id": "int(11)", "v": "varchar(9)"},
            "sqlType": None, "es": 0, "ts": 0, "gtid": None, "logfile": "f", "logpos": 4,
            "batchId": batch, "seq": seq}


def collect(spark, lines, routes, n=4, seg=Segment(None, None), keys=None):
    with tempfile.TemporaryDirectory() as tmp:  # read as the job reads batch files
        path = Path(tmp) / "b.jsonl"
        path.write_text("".join(json.dumps(x) + "\n" for x in lines))
        return _collect(read_dml(spark, [path.as_uri()], ordered=n == 1), routes, n, seg, keys)


def _collect(df, routes, n, seg, keys=None):
    out = partitioned_changes(df, seg, routes, n, keys)
    rows = out.rdd.mapPartitionsWithIndex(lambda i, it: [(i, r.asDict()) for r in it]).collect()
    for _, r in rows:  # the row images leave the JVM as JSON text
        r["d"] = json.loads(r["d"]) if r["d"] is not None else None
        r["o"] = json.loads(r["o"]) if r["o"] is not None else None
    return rows


@pytest.mark.parametrize("n", [1, 4])
def test_split_route_and_pk_change(spark, n):
    """n=4: hash-partitioned (row images parsed for the key); n=1: one streaming partition
    (a row image parsed only for an UPDATE that touches a key column): same changes."""
    lines = [
        dml(1, 0, "INSERT", [{"id": "1", "v": "a"}, {"id": "2", "v": "b"}]),
        dml(1, 1, "UPDATE", [{"id": "3", "v": "a"}], old=[{"id": "1"}]),      # key 1 -> 3
        dml(1, 2, "UPDATE", [{"id": "2", "v": "c"}], old=[{"v": "b"}]),       # plain update
        dml(1, 3, "UPDATE", [{"id": "2", "v": "d"}], old=[{"id": "2", "v": "c"}]),  # key in old, unchanged
        dml(2, 0, "DELETE", [{"id": "2", "v": "d"}]),
        dml(2, 1, "INSERT", [{"id": "9", "v": "z"}], table="other"),
    ]
    rows = collect(spark, lines, [Route(0, "db", "t", None)], n=n)
    got = sorted((r["batchId"], r["seq"], r["row"], r["sub"], r["kind"], r["d"]["id"]) for _, r in rows)
    assert got == [
        (1, 0, 0, 0, "INSERT", "1"), (1, 0, 1, 0, "INSERT", "2"),
        (1, 1, 0, 0, "DELETE", "1"), (1, 1, 0, 1, "INSERT", "3"),
        (1, 2, 0, 0, "UPDATE", "2"), (1, 3, 0, 0, "UPDATE", "2"), (2, 0, 0, 0, "DELETE", "2"),
    ]
    # the before-image of the moved row carries the old key and the unchanged values
    delete = next(r for _, r in rows if r["kind"] == "DELETE" and r["d"]["id"] == "1")
    assert delete["d"] == {"id": "1", "v": "a"} and delete["o"] is None
    plain = next(r for _, r in rows if (r["seq"], r["kind"]) == (2, "UPDATE"))
    assert plain["o"] == {"v": "b"} and plain["d"] == {"id": "2", "v": "c"}
    if n == 1:
        assert "key" not in rows[0][1]
        return
    assert sorted(r["key"] for _, r in rows) == ["1", "1", "2", "2", "2", "2", "3"]
    # all changes of one key share a partition, in seq order
    by_key: dict = {}
    for part, r in rows:
        by_key.setdefault(r["key"], set()).add(part)
    assert all(len(p) == 1 for p in by_key.values())
    key2 = [(r["batchId"], r["seq"]) for _, r in rows if r["key"] == "2"]
    assert key2 == sorted(key2)


def test_composite_key_change_in_one_partition(spark):
    lines = [dml(1, 0, "UPDATE", [{"a": "1", "b": "y", "v": "x"}], old=[{"b": None}], pk=("a", "b")),
             dml(1, 1, "UPDATE", [{"a": "1", "b": "y", "v": "z"}], old=[{"v": "x"}], pk=("a", "b"))]
    rows = [r for _, r in collect(spark, lines, [Route(0, "db", "t", None)], n=1)]
    assert [(r["seq"], r["kind"], r["d"]) for r in rows] == [
        (0, "DELETE", {"a": "1", "b": None, "v": "x"}), (0, "INSERT", {"a": "1", "b": "y", "v": "x"}),
        (1, "UPDATE", {"a": "1", "b": "y", "v": "z"})]


def test_two_mappings_and_non_concurrent(spark):
    lines = [dml(1, i, "INSERT", [{"id": str(i), "v": "x"}]) for i in range(40)]
    routes = [Route(0, "db", "t", None), Route(1, "db", "t", ("v",), concurrent=False)]
    rows = collect(spark, lines, routes, n=4)
    assert len(rows) == 80
    parts_m1 = {p for p, r in rows if r["midx"] == 1}
    assert len(parts_m1) == 1                                  # concurrent: false -> one partition
    assert len({p for p, r in rows if r["midx"] == 0}) > 1     # spread by key otherwise


def test_composite_and_null_keys(spark):
    lines = [dml(1, 0, "INSERT", [{"a": "1", "b": None, "v": "x"}, {"a": "1", "b": "", "v": "y"}], pk=("a", "b"))]
    rows = collect(spark, lines, [Route(0, "db", "t", None)])
    keys = sorted(r["key"] for _, r in rows)
    assert keys == ["1\u0001", "1\u0001\u0000"]                # NULL and '' stay distinct


def test_segments_cut_at_barriers(spark):
    class D:
        def __init__(self, b, s):
            self.seq = (b, s, 0)

    segs = segments([D(1, 5), D(2, 0)])
    assert [(s.start, s.end) for s in segs] == [(None, (1, 5)), ((1, 5), (2, 0)), ((2, 0), None)]
    lines = [dml(1, 4, "INSERT", [{"id": "1"}]), dml(1, 5, "ALTER", [], ddl=True),
             dml(1, 6, "INSERT", [{"id": "2"}]), dml(2, 1, "INSERT", [{"id": "3"}])]
    got = [sorted(r["key"] for _, r in collect(spark, lines, [Route(0, "db", "t", None)], seg=s)) for s in segs]
    assert got == [["1"], ["2"], ["3"]]


def test_one_mapping_with_two_routes_keys_each_table_by_its_own_columns(spark):
    lines = [dml(1, 0, "INSERT", [{"id": "1", "role_id": "7"}], table="user"),
             dml(1, 1, "UPDATE", [{"rid": "7", "name": "b"}], old=[{"name": "a"}], table="role", pk=("rid",))]
    routes = [Route(0, "db", "user", ("id",)), Route(0, "db", "role", None)]
    rows = collect(spark, lines, routes)
    got = sorted((r["table"], r["midx"], r["kind"], r["key"]) for _, r in rows)
    assert got == [("role", 0, "UPDATE", "7"), ("user", 0, "INSERT", "1")]


def test_segments_without_dml_are_recognised():
    from types import SimpleNamespace as NS

    from pipeline.job.barriers import count_in, dml_lines

    batches = [NS(batch_id=1, records=4), NS(batch_id=2, records=3)]
    ddl = [(1, 1), (1, 2), (2, 0)]
    segs = segments([NS(seq=(b, s, 0)) for b, s in ddl])
    counts = [(dml_lines(s, batches), count_in(s, ddl)) for s in segs]
    # (-,1,1): line 1.0 is DML; (1.1,1.2): nothing; (1.2,2.0): 1.3; (2.0,-): 2.1, 2.2
    assert counts == [(1, 0), (0, 0), (1, 0), (2, 0)]


def test_one_partition_streams_in_batch_order_without_a_sort(spark, tmp_path):
    """partitions=1: no shuffle, no sort; the ordered read must keep (batchId, seq, row, sub)
    order across files even when later files are bigger (Spark packs files by size)."""
    paths = []
    for b in range(1, 7):
        n = 5 + b * 40  # later batches are bigger
        lines = [dml(b, i, "INSERT", [{"id": f"{b}-{i}-{r}", "v": "x"} for r in range(3)]) for i in range(n)]
        lines.append(dml(b, n, "UPDATE", [{"id": f"{b}-new", "v": "y"}], old=[{"id": f"{b}-0-0"}]))
        p = tmp_path / f"{b:08d}.jsonl"
        p.write_text("".join(json.dumps(x) + "\n" for x in lines))
        paths.append(p.as_uri())
    dml_df = read_dml(spark, paths, ordered=True)
    out = partitioned_changes(dml_df, Segment(None, None), [Route(0, "db", "t", None)], 1)
    assert out.rdd.getNumPartitions() == 1
    rows = [r.asDict() for r in out.toLocalIterator()]
    order = [(r["batchId"], r["seq"], r["row"], r["sub"]) for r in rows]
    assert len(order) == sum(5 + b * 40 for b in range(1, 7)) * 3 + 6 * 2
    assert order == sorted(order)
    moved = [r["kind"] for r in rows if (r["batchId"], r["seq"]) == (6, 245)]  # the key-changing UPDATE
    assert moved == ["DELETE", "INSERT"]


@pytest.mark.parametrize("n", [1, 4])
def test_the_same_plan_generates_the_same_code(spark, tmp_path, n):
    """A repeated sync must hit Spark's codegen cache: the generated Java code of the plan is
    the same when the plan is built again (expression and plan ids aside). Python lambdas broke this:
    PySpark names each lambda variable afresh (x_1, x_2, ...) and the name is in the code, so
    every sync compiled new classes and the JIT compiled them again."""
    import contextlib
    import io
    import re

    path = tmp_path / "b.jsonl"
    path.write_text(json.dumps(dml(1, 0, "UPDATE", [{"id": "2", "v": "b"}], old=[{"id": "1"}])) + "\n")
    routes = [Route(0, "db", "t", ("id",)), Route(1, "db", "t", None)]

    def code() -> str:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            partitioned_changes(read_dml(spark, [path.as_uri()], ordered=n == 1), Segment(None, None), routes,
                                n).explain(mode="codegen")
        text = re.sub(r"plan_id=\d+", "", re.sub(r"#\d+L?", "", out.getvalue()))
        assert "Generated code" in text or "codegenStageId" in text
        return text

    spark.conf.set("spark.sql.adaptive.enabled", "false")  # AQE plans the stages only when it runs them
    try:
        first = code()
        assert code() == first
    finally:
        spark.conf.unset("spark.sql.adaptive.enabled")


def test_keys_the_target_collation_equates_share_a_partition(spark, mariadb_target):
    """(9,'Z'), (9,'z ') and (9,'z') are one row under utf8mb4_general_ci: their changes must
    meet in one partition in source order, whatever the raw bytes hash to."""
    target = RdbTarget.from_url(f"mariadb+pymysql://{mariadb_target['user']}@{mariadb_target['host']}:"
                                f"{mariadb_target['port']}/", password=mariadb_target["password"])
    keys = KeyPlan(folds={(0, "t"): (("k2", "w:utf8mb4:utf8mb4_general_ci"),)}, folders={0: KeyRules.folder(target)})
    variants = ["Z", "z ", "z", "Z  ", "á", "A", "a ", "ß", "s", "S "]
    lines, seq = [], 0
    for k1 in range(6):
        for v in variants:
            kind = "DELETE" if seq % 2 else "INSERT"
            lines.append(dml(1, seq, kind, [{"k1": str(k1), "k2": v, "v": str(seq)}], pk=("k1", "k2")))
            seq += 1
    rows = collect(spark, lines, [Route(0, "db", "t", None)], n=4, keys=keys)
    assert len(rows) == len(lines)
    groups: dict = {}
    for part, r in rows:
        folded = (r["d"]["k1"], {"z": "z", "a": "a", "á": "a", "ß": "s", "s": "s"}[r["d"]["k2"].strip().lower()])
        groups.setdefault(folded, set()).add(part)
    assert all(len(p) == 1 for p in groups.values()), groups
    assert len({p for ps in groups.values() for p in ps}) > 1  # still spread over partitions


@pytest.mark.parametrize("n", [1, 4])
def test_an_ordered_group_is_one_stream_and_keeps_key_changes_as_updates(spark, n):
    keys = KeyPlan(ordered={(0, "t"): "tgt/db.t", (0, "other"): "tgt/db.t"})
    lines = [dml(1, i, "INSERT", [{"id": str(i), "v": "a"}], table="t" if i % 2 else "other") for i in range(20)]
    lines.append(dml(2, 0, "UPDATE", [{"id": "100", "v": "a"}], old=[{"id": "1"}]))  # key 1 -> 100
    lines.append(dml(2, 1, "INSERT", [{"id": "7", "v": "x"}], table="free"))
    routes = [Route(0, "db", None, None)]
    rows = collect(spark, lines, routes, n=n, keys=keys)
    ordered = [(p, r) for p, r in rows if r["table"] in ("t", "other")]
    assert all(r["ordered"] for _, r in ordered) and not any(r["ordered"] for _, r in rows if r["table"] == "free")
    assert len({p for p, _ in ordered}) == 1
    seqs = [(r["batchId"], r["seq"]) for _, r in ordered]
    assert seqs == sorted(seqs)
    change = [r for _, r in ordered if r["batchId"] == 2]
    assert [(r["kind"], r["d"]["id"], r["o"]) for r in change] == [("UPDATE", "100", {"id": "1"})]


def _random_lines(seed: int) -> list[dict]:
    """Seeded lines of two tables: multi-row INSERTs, UPDATEs that move a key (single and composite,
    NULL and '' key parts, key columns in the before-image left unchanged), DELETEs, a DDL, a line
    of another database, a statement-format line (no rows), upper-case table names."""
    import random

    rnd = random.Random(seed)
    lines, live = [], {"t": set(), "T2": set()}
    for b in range(1, 4):
        for s in range(60):
            table = rnd.choice(["t", "T2"])
            pk = ("id",) if table == "t" else ("a", "b")

            def row(k, table=table):
                return {"id": k, "v": str(rnd.randint(0, 9))} if table == "t" else \
                    {"a": k, "b": rnd.choice([None, "", "x"]), "v": str(rnd.randint(0, 9))}
            op = rnd.random()
            if s == 30:
                lines.append(dml(b, s, "ALTER", [], ddl=True, table=table, sql="ALTER TABLE x"))
            elif s == 31:
                lines.append({**dml(b, s, "INSERT", [{"id": "1"}]), "database": "elsewhere"})
            elif s == 32:
                lines.append({**dml(b, s, "QUERY", None), "data": None})
            elif op < 0.4 or not live[table]:
                keys = [str(rnd.randint(0, 40)) for _ in range(rnd.randint(1, 4))]
                live[table].update(keys)
                lines.append(dml(b, s, "INSERT", [row(k) for k in keys], table=table, pk=pk))
            elif op < 0.8:
                k = rnd.choice(sorted(live[table]))
                new = row(str(rnd.randint(0, 40)) if rnd.random() < 0.4 else k)
                old = rnd.choice([{"v": "0"}, {pk[0]: k}, {pk[0]: k, "v": "1"}, {pk[-1]: None}])
                live[table].add(new[pk[0]])
                lines.append(dml(b, s, "UPDATE", [new], old=[old], table=table, pk=pk))
            else:
                k = rnd.choice(sorted(live[table]))
                lines.append(dml(b, s, "DELETE", [row(k)], table=table, pk=pk))
    return lines


@pytest.mark.parametrize("seed", [1, 2])
def test_the_scan_gives_each_partition_what_the_plan_gives(spark, tmp_path, seed):
    """pipeline/job/scan.py (every task reads the files, keeps its own keys) against the JVM's plan on
    the same lines: the same changes; every key's changes in one partition, in the plan's order; a
    folding writer's key-grouped rows last and by key; waived lines and lines outside the segment out."""
    from types import SimpleNamespace as NS

    from pipeline.job.feed import check_order
    from pipeline.job.scan import RoundFiles, scan_plan

    lines = _random_lines(seed)
    paths = []
    for b in (1, 2, 3):
        p = tmp_path / f"{b:08d}.jsonl"
        p.write_text("".join(json.dumps(x) + "\n" for x in lines if x["batchId"] == b))
        paths.append(p)
    routes = [Route(0, "db", "t", None), Route(0, "db", "t2", None, case_insensitive=True),
              Route(1, "db", "t", ("v",), concurrent=False), Route(2, "db", "t", None)]
    keys = KeyPlan(by_key=frozenset({0}))
    seg, skip = Segment((1, 5), (3, 30)), [(2, 7), (2, 8)]
    store = NS(capabilities=NS(local_files=True), paths=lambda batches: [str(p) for p in paths])
    batches = [NS(batch_id=b, rows=sum(len(x["data"] or ()) for x in lines if x["batchId"] == b)) for b in (1, 2, 3)]
    files = RoundFiles(store, batches)
    plan = scan_plan(files, seg, routes, keys, 3, skip)
    assert plan is not None and plan.paths == tuple(str(p) for p in paths)
    assert scan_plan(files, Segment((2, 5), None), routes, keys, 3, skip).paths == (str(paths[1]), str(paths[2]))
    assert scan_plan(files, seg, routes, KeyPlan(folds={(0, "t"): ()}), 3, skip) is None   # a folded key
    one = scan_plan(files, seg, routes, keys, 1, skip)                                    # one partition: the
    assert one is not None and one.partitions == 1                                        # task parses once
    assert scan_plan(RoundFiles(store, [NS(batch_id=1, rows=10**6)]), seg, routes, keys, 3, skip) is None
    from pipeline.job.scan import MAX_ROUND_BYTES  # wide rows: the bytes bound the task's memory too

    assert scan_plan(RoundFiles(store, [NS(batch_id=1, rows=10, size=MAX_ROUND_BYTES + 1)]), seg, routes, keys, 1,
                     skip) is None

    from pipeline.job.scan import own_changes

    def norm(midx, c, sub):
        return (midx, c.kind, c.database, c.table, json.dumps(c.data, sort_keys=True),
                json.dumps(c.old, sort_keys=True), c.seq, sub, c.fk_checks, c.pk_names)

    got, where = [], {}
    for pid in range(3):
        rows = own_changes(plan, pid)
        last = (False, "", (-1, -1, -1))
        for i in range(0, len(rows), 7):  # in pieces, as the feed checks them
            part = rows[i:i + 7]
            last = check_order(last, [x[2] for x in part], pid, [x[3] for x in part])
        for order, midx, c, hk in rows:
            got.append(norm(midx, c, order[-1]))
            assert (hk is not None) == (midx == 0)
            where.setdefault((midx, hk or order), set()).add(pid)
    assert all(len(p) == 1 for p in where.values())
    assert len({p for k, ps in where.items() if k[0] != 1 for p in ps}) == 3   # spread by key
    assert len({p for k, ps in where.items() if k[0] == 1 for p in ps}) == 1   # concurrent: false

    df = read_dml(spark, [p.as_uri() for p in paths], ordered=False)
    df = df.where(~((F.col("batchId") == 2) & F.col("seq").isin(7, 8)))
    want = [norm(r["midx"], NS(kind=r["kind"], database=r["database"], table=r["table"], data=r["d"],
                               old=r["o"], seq=(r["batchId"], r["seq"], r["row"]), fk_checks=r["fk"],
                               pk_names=tuple(json.loads(r["pkNames"]) or ())), r["sub"])
            for _, r in _collect(df, routes, 3, seg, keys)]
    assert len(got) > 200 and sorted(got) == sorted(want)
    alone = own_changes(one, 0)  # one task: every change, each key's in order, key-grouped rows last
    check_order((False, "", (-1, -1, -1)), [x[2] for x in alone], 0, [x[3] for x in alone])
    assert sorted(norm(midx, c, order[-1]) for order, midx, c, _ in alone) == sorted(want)
    assert any(x[1] == "INSERT" and x[7] == 1 for x in got)  # a moved key: DELETE (sub 0) + INSERT (sub 1)
