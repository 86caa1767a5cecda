"""Benchmark: a single-table esMapping through the job and through the writer vs raw ``helpers.bulk``,
on Elasticsearch (elasticsearch-py) or, with ``--server opensearch``, on OpenSearch (opensearch-py).

All three write the same N documents to fresh indices of one definition (1 shard, 0 replicas,
refresh off, explicit mapping) in the same run, in chunks of commitBatch (3000):

* raw: the server's own client's ``helpers.bulk`` of ready-made dicts, prepared before the clock starts;
* writer: ``EsWriter.apply`` + ``commit`` from the capture's Dml strings (Change records);
* job: the same rows as single-row INSERT Dml lines in a batch store (20000 lines per batch),
  applied by ``run_sync`` on ``local[P]`` Spark with ``--partitions P``: pre-flight checks,
  reading the batch files, routing and partitioning in the JVM, Arrow to the Python workers,
  the writer, the ack. SparkSession start-up is not timed; an untimed warm-up sync of
  ``--warmup`` rows into the same index (recreated afterwards) starts the Python workers first.

Each side runs ``--rounds`` times alternately; the best time of each counts. The job's index is
checked after every round: document count and a sample of documents equal to the raw ones.

    .venv/bin/python bench/es.py --docs 100000 [--partitions 1] [--rounds 2] [--server opensearch] [--record]

Uses the running ``mariadb`` (holds the mapped source table) and ``elasticsearch`` (or ``opensearch``)
services of ``$SLUICE_SERVICES_DIR`` (``scripts/services start mariadb elasticsearch opensearch``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import sys
import tempfile
import time
import uuid
from decimal import Decimal
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from adapters.base import Change  # noqa: E402
from adapters.es import EsTarget, make_writer, reset_caches  # noqa: E402
from bench import common  # noqa: E402
from pipeline.mapping.loader import parse_mapping_text  # noqa: E402

DB, TABLE = "bench_es", "bench_user"
DDL = (f"CREATE TABLE `{DB}`.`{TABLE}` (id BIGINT(20) NOT NULL PRIMARY KEY, name VARCHAR(50), email VARCHAR(80), "
       "score INT(11), balance DECIMAL(12,2), active TINYINT(1), c_time DATETIME)")
TYPES = {"id": "bigint(20)", "name": "varchar(50)", "email": "varchar(80)", "score": "int(11)",
         "balance": "decimal(12,2)", "active": "tinyint(1)", "c_time": "datetime"}
PROPS = {"name": {"type": "text"}, "email": {"type": "keyword"}, "score": {"type": "integer"},
         "balance": {"type": "double"}, "active": {"type": "boolean"}, "c_time": {"type": "date"}}
SQL = f"select t.id, t.name, t.email, t.score, t.balance, t.active, t.c_time from {TABLE} t"
BATCH = 3000
SECTIONS = {"elasticsearch": "### Through the job (bench/es.py)",
            "opensearch": "### OpenSearch through the job (bench/es.py --server opensearch)"}
INTRO = """\
| date | command | docs | partitions | raw docs/s | writer docs/s | writer ratio | job docs/s | job ratio |
|---|---|---|---|---|---|---|---|---|"""
ADAPTER_NAMES = {"elasticsearch": "es8", "opensearch": "opensearch"}


class Server:
    """The calls the bench makes, with each product's own client (raw bulk included)."""

    def __init__(self, product: str, url: str):
        self.product, self.url = product, url
        if product == "opensearch":
            from opensearchpy import OpenSearch, helpers

            self.client, self.helpers = OpenSearch(url, timeout=120), helpers
        else:
            from elasticsearch import Elasticsearch, helpers

            self.client, self.helpers = Elasticsearch(url, request_timeout=120), helpers

    def create(self, name: str, settings: dict, mappings: dict) -> None:
        if self.product == "opensearch":
            self.client.indices.create(index=name, body={"settings": settings, "mappings": mappings})
        else:
            self.client.indices.create(index=name, settings=settings, mappings=mappings)

    def delete(self, name: str) -> None:
        if self.product == "opensearch":
            self.client.indices.delete(index=name, params={"ignore_unavailable": "true"})
        else:
            self.client.indices.delete(index=name, ignore_unavailable=True)

    def bulk(self, actions) -> tuple[int, list]:
        return self.helpers.bulk(self.client, actions, chunk_size=BATCH, max_chunk_bytes=8 << 20)

    def count(self, index: str) -> int:
        self.client.indices.refresh(index=index)
        return int(self.client.count(index=index)["count"])

    def mget(self, index: str, ids: list[str]) -> list[dict]:
        if self.product == "opensearch":
            return self.client.mget(index=index, body={"ids": ids})["docs"]
        return self.client.mget(index=index, ids=ids)["docs"]


def rows(n: int) -> list[dict[str, str]]:
    """N source rows as the capture's Dml strings."""
    base = dt.datetime(2024, 1, 1)
    return [{"id": str(i), "name": f"user number {i}", "email": f"user{i}@example.com", "score": str(i % 1000),
             "balance": f"{i % 100000}.{i % 100:02d}", "active": str(i % 2),
             "c_time": (base + dt.timedelta(seconds=i)).strftime("%Y-%m-%d %H:%M:%S")} for i in range(1, n + 1)]


def raw_doc(r: dict[str, str]) -> dict:
    """The document of a row, as the raw side sends it (and as the index must hold it)."""
    return {"name": r["name"], "email": r["email"], "score": int(r["score"]), "balance": float(Decimal(r["balance"])),
            "active": r["active"] != "0", "c_time": r["c_time"].replace(" ", "T")}


def fresh_index(es: Server, name: str | None = None) -> str:
    """Create (or recreate) an empty index of the bench's definition."""
    name = name or f"sluice-bench-{uuid.uuid4().hex[:8]}"
    es.delete(name)
    es.create(name, {"number_of_shards": 1, "number_of_replicas": 0, "refresh_interval": "-1"},
              {"dynamic": "strict", "properties": PROPS})
    return name


def run_raw(es: Server, data: list[dict]) -> tuple[float, str]:
    """Seconds of ``helpers.bulk`` of the prepared documents into a fresh index."""
    index = fresh_index(es)
    docs = [raw_doc(r) for r in data]  # prepared before the clock starts: raw gets ready JSON
    t0 = time.perf_counter()
    actions = ({"_index": index, "_id": r["id"], "_source": d} for r, d in zip(data, docs, strict=True))
    ok, errors = es.bulk(actions)
    secs = time.perf_counter() - t0
    assert ok == len(data) and not errors
    return secs, index


def run_writer(es: Server, url: str, data: list[dict]) -> tuple[float, str]:
    """Seconds of ``EsWriter.apply`` + ``commit`` per chunk into a fresh index."""
    index = fresh_index(es)
    reset_caches()
    m = parse_mapping_text(f"esMapping:\n  _index: {index}\n  _id: id\n  sql: \"{SQL}\"\n  commitBatch: {BATCH}\n",
                           "bench_user.yml")
    changes = [Change("INSERT", DB, TABLE, r, None, ("id",), TYPES) for r in data]
    w = make_writer(EsTarget((url,), product=es.product), (m,))
    w.open()
    t0 = time.perf_counter()
    for i in range(0, len(changes), BATCH):
        w.apply(m, changes[i:i + BATCH])
        w.commit()
    secs = time.perf_counter() - t0
    w.close()
    return secs, index


def deployment(tmp: Path, src: dict, url: str, index: str, partitions: int, product: str) -> Path:
    """A config whose group maps ``bench_es.bench_user`` (row mode) into ``index`` through an es8
    (or opensearch) adapter."""
    mapping = {"dataSourceKey": "defaultDS", "destination": "bench", "groupId": common.GROUP,
               "esMapping": {"_index": index, "_id": "id", "sql": SQL, "commitBatch": BATCH}}
    adapter = {"name": ADAPTER_NAMES[product], "hosts": url.removeprefix("http://"), "properties": {"mode": "rest"}}
    return common.write_deployment(tmp, src, adapter, {"bench_user.yml": mapping}, partitions, src_database=DB)


def check_index(es: Server, index: str, data: list[dict], sample: int = 500) -> None:
    """The index holds exactly the N documents, and a random sample equals the raw documents."""
    count = es.count(index)
    assert count == len(data), f"{index}: {count} documents, expected {len(data)}"
    picks = random.Random(len(data)).sample(data, min(sample, len(data)))
    got = es.mget(index, [r["id"] for r in picks])
    bad = [(r["id"], g.get("_source")) for r, g in zip(picks, got, strict=True)
           if not g.get("found") or g["_source"] != raw_doc(r)]
    assert not bad, f"{index}: {len(bad)} of {len(picks)} sampled documents differ, e.g. {bad[0]}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--partitions", type=int, default=1, help="Spark partitions (and local[N] cores) of the job")
    ap.add_argument("--warmup", type=int, default=2000, help="rows of the untimed warm-up sync (0: none)")
    ap.add_argument("--server", choices=sorted(ADAPTER_NAMES), default="elasticsearch",
                    help="which service (and client library) to measure")
    ap.add_argument("--url", default=None)
    ap.add_argument("--record", action="store_true", help="add the result to docs/benchmarks.md")
    args = ap.parse_args()
    svc = common.services()
    url = args.url or svc[args.server]["url"]
    es = Server(args.server, url)
    common.create_source_table(svc["mariadb"], DB, DDL)
    data = rows(args.docs)
    raw_t: list[float] = []
    w_t: list[float] = []
    job_t: list[float] = []
    job_index = f"sluice-bench-job-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory(prefix="sluice-bench-es-") as tmpd:
        cfg_path = deployment(Path(tmpd), svc["mariadb"], url, job_index, args.partitions, args.server)
        spark, store = common.open_job(cfg_path, "sluice-bench-es")
        try:
            fresh_index(es, job_index)
            if args.warmup:
                common.fill_store(store, [common.dml(DB, TABLE, "INSERT", r, TYPES) for r in data[:args.warmup]])
                common.timed_sync(cfg_path, spark, store, args.partitions)
            base = store.cursor(common.GROUP)
            common.fill_store(store, [common.dml(DB, TABLE, "INSERT", r, TYPES) for r in data])
            for rnd in range(args.rounds):
                for side, fn, out in (("raw", lambda: run_raw(es, data), raw_t),
                                      ("writer", lambda: run_writer(es, url, data), w_t)):
                    secs, index = fn()
                    check_index(es, index, data)
                    es.delete(index)
                    out.append(secs)
                    print(f"round {rnd + 1} {side:6s}: {args.docs / secs:8.0f} docs/s ({secs:.2f} s)", flush=True)
                fresh_index(es, job_index)
                if store.cursor(common.GROUP) != base:
                    store.set_cursor(common.GROUP, base)
                secs, summary = common.timed_sync(cfg_path, spark, store, args.partitions)
                assert summary.rows == args.docs, summary.as_dict()
                check_index(es, job_index, data)
                job_t.append(secs)
                print(f"round {rnd + 1} job   : {args.docs / secs:8.0f} docs/s ({secs:.2f} s)", flush=True)
        finally:
            spark.stop()
            es.delete(job_index)
    raw, writer, job = min(raw_t), min(w_t), min(job_t)
    result = {"server": args.server, "docs": args.docs, "partitions": args.partitions,
              "raw_docs_per_s": round(args.docs / raw),
              "writer_docs_per_s": round(args.docs / writer), "writer_ratio": round(raw / writer, 2),
              "job_docs_per_s": round(args.docs / job), "job_ratio": round(raw / job, 2)}
    print(json.dumps(result))
    if args.record:
        cmd = common.command_line("bench/es.py")
        line = (f"| {dt.date.today()} | `{cmd}` | {args.docs} | {args.partitions} | {result['raw_docs_per_s']} | "
                f"{result['writer_docs_per_s']} | {result['writer_ratio']:.2f} | {result['job_docs_per_s']} | "
                f"**{result['job_ratio']:.2f}** |")
        common.record_row(REPO / "docs" / "benchmarks.md", SECTIONS[args.server], INTRO, line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
