"""canal's parent/child example (es8/customer.yml + es8/biz_order.yml) and what its index must hold.

Both mappings write one index with a ``join`` field ``customer_order`` (customer -> order):
customers are parents (``_id`` = ``t.id``), orders are children (``_id`` computed by the SQL as
``concat('oid_', t.id)``, routed to ``customer_id``, which ``skips`` keeps out of the document).
:func:`expected` runs the two mapping SQLs on the source, as the files hold them, and builds
every document, its ``_id`` and its routing independently of the adapter; :func:`actual`
reads the same from the server. Tests compare them as canonical JSON bytes.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import orjson
import yaml

REPO = Path(__file__).resolve().parents[2]
CANAL_ES8 = REPO.parent / "shared" / "reference" / "canal-mappings" / "es8"
FILES = ("customer.yml", "biz_order.yml")
TYPES = {"customer": {"id": "bigint(20)", "name": "varchar(50)", "email": "varchar(80)", "c_time": "datetime"},
         "biz_order": {"id": "bigint(20)", "customer_id": "bigint(20)", "serial_code": "varchar(30)",
                       "c_time": "datetime"}}
DDL = ("CREATE TABLE `{db}`.customer (id BIGINT PRIMARY KEY, name VARCHAR(50), email VARCHAR(80), c_time DATETIME)",
       "CREATE TABLE `{db}`.biz_order (id BIGINT PRIMARY KEY, customer_id BIGINT, serial_code VARCHAR(30), "
       "c_time DATETIME)")
#: the index definition of customer.yml's comment, without the pre-7.x ``_doc`` type level
PROPERTIES = {"id": {"type": "long"}, "name": {"type": "text"}, "email": {"type": "text"},
              "order_id": {"type": "long"}, "order_serial": {"type": "text"}, "order_time": {"type": "date"},
              "customer_order": {"type": "join", "relations": {"customer": "order"}}}


def canal_text(name: str, index: str | None = None) -> str:
    """A canal example file as it is (or with another ``_index``)."""
    text = (CANAL_ES8 / name).read_text()
    return text if index is None else text.replace("_index: customer", f"_index: {index}")


def mapping_sql(name: str) -> str:
    return yaml.safe_load(canal_text(name))["esMapping"]["sql"]


def _json(v: Any) -> Any:
    if isinstance(v, dt.datetime):
        return v.isoformat()  # DATETIME: wall clock, no zone (docs/es.md)
    return v


def expected(run_sql, where: dict[str, str] | None = None) -> dict[str, tuple[str | None, dict]]:
    """``_id`` -> (routing, ``_source``) of every document the two mapping SQLs give now.

    ``run_sql(sql) -> (column names, rows)``; ``where``: file -> a condition appended to its SQL
    (a full load's etlCondition with its parameter filled in)."""
    out: dict[str, tuple[str | None, dict]] = {}
    names, rows = run_sql(mapping_sql("customer.yml") + " " + (where or {}).get("customer.yml", ""))
    for r in rows:
        row = dict(zip(names, r, strict=True))
        out[str(row["id"])] = (None, {"name": row["name"], "email": row["email"], "customer_order": "customer"})
    names, rows = run_sql(mapping_sql("biz_order.yml") + " " + (where or {}).get("biz_order.yml", ""))
    for r in rows:
        row = dict(zip(names, r, strict=True))
        parent = None if row["customer_id"] is None else str(row["customer_id"])
        out[row["_id"]] = (parent, {"order_id": row["order_id"], "order_serial": row["order_serial"],
                                    "order_time": _json(row["order_time"]),
                                    "customer_order": {"name": "order", "parent": parent}})
    return out


def actual(server, index: str) -> dict[str, tuple[str | None, dict]]:
    """``_id`` -> (routing, ``_source``) of every document in the index; an ``_id`` held twice
    (the same document on two shards: a child moved without deleting the old copy) fails."""
    hits = server.hits(index)
    ids = [h["_id"] for h in hits]
    assert len(ids) == len(set(ids)), f"documents held twice: {sorted(i for i in ids if ids.count(i) > 1)}"
    return {h["_id"]: (h.get("_routing"), h["_source"]) for h in hits}


def canonical(docs: dict[str, tuple[str | None, dict]]) -> bytes:
    """Canonical JSON bytes of a document set (sorted ids and keys)."""
    return orjson.dumps({k: [r, s] for k, (r, s) in docs.items()}, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2)


def parents_with_children(server, index: str) -> set[str]:
    """Customers a ``has_child`` query finds: only children on their parent's shard count."""
    q = {"has_child": {"type": "order", "query": {"match_all": {}}}}
    return {h["_id"] for h in server.hits(index, q)}


def children_with_parent(server, index: str) -> set[str]:
    q = {"has_parent": {"parent_type": "customer", "query": {"match_all": {}}}}
    return {h["_id"] for h in server.hits(index, q)}
