"""``sluice repair`` online: a target that diverged (a table truncated, rows deleted, changed and
added behind the pipeline's back) is repaired while sysbench writes to the source and ``sluice run
--follow`` applies, and ends byte for byte equal to the source.

One deployment per target kind (MariaDB ``mirrorDb``, PostgreSQL ``dbMapping`` per table), one
follower each; the target is damaged and repaired twice, with 4 and with 1 partition(s).
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter

import pytest

from tests.support import sysbench
from tests.support.deploy import sluice
from tests.support.faults import Background, _pg, drop_deployment, last_json, make_deployment
from tests.support.matrix import FULL


def _follow(dep) -> Background:
    cmd = [sys.executable, "-m", "pipeline.cli", "run", "--config", str(dep.cfg), "--follow", "--interval", "0.5"]
    return Background(cmd, dep.tmp / "follow.log", dict(os.environ, PYSPARK_PYTHON=sys.executable))


def _source_text(dep, table: str) -> Counter:
    with sysbench.connect(dep.source, dep.db) as c, c.cursor() as cur:
        cur.execute(f"SELECT CAST(id AS CHAR), CAST(k AS CHAR), c, pad FROM `{table}`")
        return Counter(tuple(r) for r in cur.fetchall())


def _target_text(dep, table: str) -> Counter:
    try:
        return _target_rows(dep, table)
    except Exception as e:  # noqa: BLE001 - the follower has not created the table yet
        if "exist" not in str(e):
            raise
        return Counter()


def _target_rows(dep, table: str) -> Counter:
    if dep.kind == "mariadb":
        with sysbench.connect(dep.target, dep.names["*"]) as c, c.cursor() as cur:
            cur.execute(f"SELECT CAST(id AS CHAR), CAST(k AS CHAR), c, pad FROM `{table}`")
            return Counter(tuple(r) for r in cur.fetchall())
    with _pg(dep.target) as conn:
        rows = conn.execute(f'SELECT id::text, k::text, c::text, pad::text FROM "{dep.names[table]}"').fetchall()
    return Counter(tuple(r) for r in rows)


def differing(dep) -> int:
    """Rows that differ between source and target, every column as text, over every table."""
    n = 0
    for t in dep.table_names():
        a, b = _source_text(dep, t), _target_text(dep, t)
        n += sum(((a - b) + (b - a)).values())
    return n


def damage(dep) -> None:
    """A table truncated; rows deleted, changed and added in the other (as a person with a client would)."""
    t1, t2 = dep.table_names()
    if dep.kind == "mariadb":
        n1, n2 = (f"`{dep.names['*']}`.`{t}`" for t in (t1, t2))
    else:
        n1, n2 = (f'"{dep.names[t]}"' for t in (t1, t2))
    stmts = [f"TRUNCATE TABLE {n1}", f"DELETE FROM {n2} WHERE id % 7 = 0",
             f"UPDATE {n2} SET c = 'damaged', k = k + 1 WHERE id % 11 = 0",
             f"INSERT INTO {n2} (id, k, c, pad) VALUES (900001, 1, 'x', 'y'), (900002, 2, 'x', 'y'), "
             "(-5, 3, 'below', 'every key')"]
    if dep.kind == "mariadb":
        with sysbench.connect(dep.target) as c, c.cursor() as cur:
            for s in stmts:
                cur.execute(s)
            c.commit()
    else:
        with _pg(dep.target) as conn:
            for s in stmts:
                conn.execute(s)


def _wait_equal(dep, follower: Background, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if follower.proc.poll() is not None:
            raise AssertionError(f"the follower ended ({follower.proc.returncode}):\n{follower.output()}")
        n = differing(dep)
        if n == 0:
            return
        assert time.monotonic() < deadline, f"{n} rows still differ after {timeout:.0f} s\n{follower.output()}"
        time.sleep(1)


@pytest.mark.parametrize("kind", ["mariadb", "postgres"] if FULL else ["mariadb"])  # CI budget
def test_repair_while_sysbench_writes_and_follow_applies(kind, tmp_path, mariadb, request):
    target = request.getfixturevalue("mariadb_target" if kind == "mariadb" else "postgres")
    dep = make_deployment(kind, tmp_path, mariadb, target)
    dep.table_size = 2000
    follower = None
    try:
        with sysbench.connect(mariadb, dep.db) as c, c.cursor() as cur:  # more rows: several chunks per range
            for t in dep.table_names():
                cur.execute(f"INSERT INTO `{t}` (id, k, c, pad) SELECT id + 500, k, c, pad FROM `{t}`")
                cur.execute(f"INSERT INTO `{t}` (id, k, c, pad) SELECT id + 1000, k, c, pad FROM `{t}`")
            c.commit()
        follower = _follow(dep)
        _wait_equal(dep, follower, 300)
        for partitions in (4, 1):
            damage(dep)
            assert differing(dep) > 2000
            load = dep.workload(seconds=1800, rate=30)
            time.sleep(3)
            out = sluice("repair", "--config", str(dep.cfg), "--group", "g1", "--partitions", str(partitions),
                         "--chunk-size", "250", "--json", timeout=600)
            summary = last_json(out.stdout)
            print("repair", partitions, {k: (t["chunks"], t["lock_wait"], t["lock_held"]) for k, t in
                                         summary["tables"].items()}, summary["seconds"], flush=True)
            assert load.proc.poll() is None, "the load ended before the repair: it did not run under writes"
            tables = summary["tables"]
            assert sum(t["upserted"] for t in tables.values()) >= 2000, summary
            assert sum(t["deleted"] for t in tables.values()) >= 3, summary
            assert max(t["chunks"] for t in tables.values()) >= 8, summary
            time.sleep(2)
            load.kill()  # writes went on during the whole repair
            _wait_equal(dep, follower, 300)
            assert differing(dep) == 0
        dry = sluice("repair", "--config", str(dep.cfg), "--group", "g1", "--dry-run", "--json", check=False)
        assert dry.returncode == 0, dry.stdout + dry.stderr
        assert sum(t["differing"] for t in last_json(dry.stdout)["tables"].values()) == 0
    finally:
        if follower is not None:
            follower.kill()
        drop_deployment(dep)
