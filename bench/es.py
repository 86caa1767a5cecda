"""Benchmark: a single-table esMapping through the ES Writer vs raw ``helpers.bulk``.

Both write the same N documents to fresh indices (1 shard, 0 replicas, refresh off) in the
same run, in chunks of commitBatch (3000). The writer starts from the capture's Dml strings
(Change records) and converts values by the index mapping; raw bulk gets ready-made dicts.
Each side runs ``--rounds`` times alternately; the best time of each counts.

    .venv/bin/python bench/es.py --docs 100000 [--url http://127.0.0.1:9200] [--append docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
import uuid
from decimal import Decimal
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from elasticsearch import Elasticsearch, helpers  # noqa: E402

from adapters.base import Change  # noqa: E402
from adapters.es import EsTarget, make_writer, reset_caches  # noqa: E402
from pipeline.mapping.loader import parse_mapping_text  # noqa: E402

TYPES = {"id": "bigint(20)", "name": "varchar(50)", "email": "varchar(80)", "score": "int(11)",
         "balance": "decimal(12,2)", "active": "tinyint(1)", "c_time": "datetime"}
PROPS = {"name": {"type": "text"}, "email": {"type": "keyword"}, "score": {"type": "integer"},
         "balance": {"type": "double"}, "active": {"type": "boolean"}, "c_time": {"type": "date"}}
BATCH = 3000


def es_url(arg: str | None) -> str:
    if arg:
        return arg
    state = REPO / ".sluice" / "services" / "services.json"
    return json.loads(state.read_text())["elasticsearch"]["url"]


def rows(n: int) -> list[dict[str, str]]:
    base = dt.datetime(2024, 1, 1)
    return [{"id": str(i), "name": f"user number {i}", "email": f"user{i}@example.com", "score": str(i % 1000),
             "balance": f"{i % 100000}.{i % 100:02d}", "active": str(i % 2),
             "c_time": (base + dt.timedelta(seconds=i)).strftime("%Y-%m-%d %H:%M:%S")} for i in range(1, n + 1)]


def raw_doc(r: dict[str, str]) -> dict:
    return {"name": r["name"], "email": r["email"], "score": int(r["score"]), "balance": float(Decimal(r["balance"])),
            "active": r["active"] != "0", "c_time": r["c_time"].replace(" ", "T")}


def fresh_index(es: Elasticsearch) -> str:
    name = f"sluice-bench-{uuid.uuid4().hex[:8]}"
    es.indices.create(index=name, settings={"number_of_shards": 1, "number_of_replicas": 0, "refresh_interval": "-1"},
                      mappings={"dynamic": "strict", "properties": PROPS})
    return name


def run_raw(es: Elasticsearch, data: list[dict]) -> tuple[float, str]:
    index = fresh_index(es)
    docs = [raw_doc(r) for r in data]  # prepared before the clock starts: raw gets ready JSON
    t0 = time.perf_counter()
    actions = ({"_index": index, "_id": r["id"], "_source": d} for r, d in zip(data, docs, strict=True))
    ok, errors = helpers.bulk(es, actions, chunk_size=BATCH, max_chunk_bytes=8 << 20)
    secs = time.perf_counter() - t0
    assert ok == len(data) and not errors
    return secs, index


def run_writer(es: Elasticsearch, url: str, data: list[dict]) -> tuple[float, str]:
    index = fresh_index(es)
    reset_caches()
    m = parse_mapping_text(f"""esMapping:
  _index: {index}
  _id: id
  sql: "select t.id, t.name, t.email, t.score, t.balance, t.active, t.c_time from bench_user t"
  commitBatch: {BATCH}
""", "bench_user.yml")
    changes = [Change("INSERT", "bench", "bench_user", r, None, ("id",), TYPES) for r in data]
    w = make_writer(EsTarget((url,)), (m,))
    w.open()
    t0 = time.perf_counter()
    for i in range(0, len(changes), BATCH):
        w.apply(m, changes[i:i + BATCH])
        w.commit()
    secs = time.perf_counter() - t0
    w.close()
    return secs, index


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--url", default=None)
    ap.add_argument("--append", default=None, help="append the result line to this markdown file")
    args = ap.parse_args()
    url = es_url(args.url)
    es = Elasticsearch(url, request_timeout=120)
    data = rows(args.docs)
    raw_t, w_t = [], []
    for _ in range(args.rounds):
        for fn, out in ((lambda: run_raw(es, data), raw_t), (lambda: run_writer(es, url, data), w_t)):
            secs, index = fn()
            es.indices.refresh(index=index)
            assert es.count(index=index)["count"] == args.docs
            es.indices.delete(index=index)
            out.append(secs)
    raw, writer = min(raw_t), min(w_t)
    ratio = raw / writer
    result = {"docs": args.docs, "raw_bulk_s": round(raw, 2), "writer_s": round(writer, 2),
              "raw_docs_per_s": round(args.docs / raw), "writer_docs_per_s": round(args.docs / writer),
              "ratio": round(ratio, 3)}
    print(json.dumps(result))
    if args.append:
        line = (f"| {dt.date.today()} | `.venv/bin/python bench/es.py --docs {args.docs}` | {args.docs} | "
                f"{result['raw_docs_per_s']} | {result['writer_docs_per_s']} | **{ratio:.2f}** |\n")
        with open(args.append, "a", encoding="utf-8") as f:
            f.write(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
