"""Benchmark the RDB writer against raw drivers on the running target service.

    .venv/bin/python bench/rdb_writer.py --rows 1000000 [--target mariadb-target|postgres] [--no-append]

1. INSERT: ``Writer.apply`` of N single-row INSERT changes vs raw multi-row ``executemany`` of
   the same rows into an identical table (same chunking, one commit per chunk).
2. UPDATE-heavy: ``Writer.apply`` of N/4 UPDATE changes (one changed column, random keys,
   some keys repeated) vs a canal-style baseline: one UPDATE statement per row.
Prints the ratios and appends them, with the command, to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from adapters.base import Change  # noqa: E402
from adapters.rdb import RdbTable, RdbTarget, make_writer  # noqa: E402
from adapters.rdb.client import engine_for  # noqa: E402

COLS = {"id": "bigint(20)", "name": "varchar(40)", "amount": "decimal(12,2)", "ts": "datetime(6)",
        "note": "varchar(100)"}
DDL = {"mysql": "id BIGINT PRIMARY KEY, name VARCHAR(40), amount DECIMAL(12,2), ts DATETIME(6), note VARCHAR(100)",
       "postgresql": "id BIGINT PRIMARY KEY, name VARCHAR(40), amount NUMERIC(12,2), ts TIMESTAMP(6), "
                     "note VARCHAR(100)"}


def service(name: str) -> dict:
    sdir = Path(os.environ.get("SLUICE_SERVICES_DIR", REPO / ".sluice" / "services"))
    state = json.loads((sdir / "services.json").read_text())
    if name not in state:
        sys.exit(f"service {name} is not running: scripts/services start {name}")
    return state[name]


def target_for(name: str) -> tuple[RdbTarget, str]:
    info = service(name)
    if name == "postgres":
        url = f"postgresql+psycopg://{info['user']}@{info['host']}:{info['port']}/{info['database']}"
        return RdbTarget.from_url(url, password=info["password"]), "postgresql"
    url = f"mariadb+pymysql://{info['user']}@{info['host']}:{info['port']}/"
    return RdbTarget.from_url(url, password=info["password"]), "mysql"


def row(i: int) -> dict[str, str | None]:
    return {"id": str(i), "name": f"name {i}", "amount": f"{i % 100000}.{i % 100:02d}",
            "ts": f"2024-01-{1 + i % 28:02d} 12:{i % 60:02d}:00.{i % 1000000:06d}", "note": None}


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--chunk", type=int, default=3000, help="changes per transaction (canal commitBatch)")
    ap.add_argument("--target", default="mariadb-target", choices=["mariadb-target", "postgres"])
    ap.add_argument("--repeat", type=int, default=2, help="INSERT passes of each (best is kept)")
    ap.add_argument("--no-append", action="store_true")
    args = ap.parse_args()
    target, family = target_for(args.target)
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    engine = engine_for(target)
    q = engine.dialect.identifier_preparer.quote_identifier
    raw = engine.raw_connection()
    cur = raw.cursor()
    cur.execute(f"CREATE {'DATABASE' if family == 'mysql' else 'SCHEMA'} {q(schema)}")
    for t in ("w", "raw", "uw", "ub"):
        cur.execute(f"CREATE TABLE {q(schema)}.{t} ({DDL[family]})")
    raw.commit()
    n, chunk = args.rows, args.chunk
    data = [row(i) for i in range(n)]
    changes = [Change("INSERT", "src", "t", d, None, ("id",), COLS) for d in data]
    tuples = [tuple(d.values()) for d in data]
    try:
        w = make_writer(target, ())
        w.open()
        route = RdbTable("w", schema)

        def writer_insert(route=route, changes=changes) -> None:
            for a in range(0, n, chunk):
                w.apply(route, changes[a:a + chunk])
                w.commit()

        sql = f"INSERT INTO {q(schema)}.raw (id, name, amount, ts, note) VALUES (%s, %s, %s, %s, %s)"

        def raw_insert() -> None:
            for a in range(0, n, chunk):
                cur.executemany(sql, tuples[a:a + chunk])
                raw.commit()

        def fresh(table: str) -> None:
            cur.execute(f"TRUNCATE TABLE {q(schema)}.{table}")
            raw.commit()

        t_raw = t_w = float("inf")
        for _ in range(args.repeat):  # alternate, best of each: cache and flush effects hit both
            fresh("raw")
            t_raw = min(t_raw, timed(raw_insert))
            fresh("w")
            t_w = min(t_w, timed(writer_insert))
        # UPDATE-heavy: prefill two tables, then the same updates through the writer and one per row
        m = max(1000, n // 4)
        base = [row(i) for i in range(m)]
        for t in ("uw", "ub"):
            cur.executemany(f"INSERT INTO {q(schema)}.{t} (id, name, amount, ts, note) VALUES (%s, %s, %s, %s, %s)",
                            [tuple(d.values()) for d in base])
        raw.commit()
        rnd = random.Random(7)
        ups = []
        for k in range(m):
            i = rnd.randrange(m)
            after = {**base[i], "amount": f"{k}.{k % 100:02d}", "note": f"u{k}"}
            ups.append(Change("UPDATE", "src", "t", after, {"amount": base[i]["amount"], "note": base[i]["note"]},
                              ("id",), COLS))
            base[i] = after
        uroute = RdbTable("uw", schema)

        def writer_update() -> None:
            for a in range(0, m, chunk):
                w.apply(uroute, ups[a:a + chunk])
                w.commit()

        usql = f"UPDATE {q(schema)}.ub SET amount = %s, note = %s WHERE id = %s"

        def per_row_update() -> None:
            for a in range(0, m, chunk):
                for c in ups[a:a + chunk]:
                    cur.execute(usql, (c.data["amount"], c.data["note"], c.data["id"]))
                raw.commit()

        t_base = timed(per_row_update)
        t_wu = timed(writer_update)
        cur.execute(f"SELECT count(*) FROM {q(schema)}.uw a JOIN {q(schema)}.ub b ON a.id = b.id "
                    + ("WHERE a.amount <=> b.amount AND a.note <=> b.note" if family == "mysql" else
                       "WHERE a.amount IS NOT DISTINCT FROM b.amount AND a.note IS NOT DISTINCT FROM b.note"))
        same = cur.fetchone()[0]
        w.close()
    finally:
        cur.execute(f"DROP {'DATABASE' if family == 'mysql' else 'SCHEMA'} {q(schema)}"
                    + (" CASCADE" if family == "postgresql" else ""))
        raw.commit()
        raw.close()
    ins_ratio, upd_ratio = t_raw / t_w, t_base / t_wu
    lines = [
        f"insert: writer {n / t_w:,.0f} rows/s, raw executemany {n / t_raw:,.0f} rows/s, ratio {ins_ratio:.2f} "
        "(target >= 0.70)",
        f"update-heavy: writer {m / t_wu:,.0f} rows/s, one statement per row {m / t_base:,.0f} rows/s, "
        f"speed-up {upd_ratio:.1f}x (target >= 5x); {same}/{m} rows identical",
    ]
    print("\n".join(lines))
    if not args.no_append:
        cmd = ".venv/bin/python bench/rdb_writer.py " + " ".join(sys.argv[1:])
        stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        with open(REPO / "docs" / "benchmarks.md", "a", encoding="utf-8") as f:
            f.write(f"\n## RDB writer ({args.target}, {stamp})\n\n`{cmd}`\n\n" + "".join(f"- {x}\n" for x in lines))


if __name__ == "__main__":
    main()
