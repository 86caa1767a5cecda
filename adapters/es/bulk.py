"""Talking to Elasticsearch: pooled clients, the index field types, and bulk with per-item results.

:func:`send` writes actions in order as NDJSON ``_bulk`` requests of at most
``EsTarget.bulk_bytes`` each (one request after the other, so per-document order holds
across them), reads every item's result, and

* resends a request whose items failed transiently (429, 503, version conflicts left after
  ``retry_on_conflict``) up to ``item_retries`` times with backoff - resending is safe
  because every action is idempotent - then raises TransientError (the job retries the chunk);
* raises TargetError for the first item that failed terminally (via errors.item_error);
* reports ``update`` items that found no document (``document_missing_exception``) to the
  caller, which applies the missing-document rule; a ``delete`` of a missing document is fine.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Any

import elasticsearch
import orjson

from adapters.es.config import EsTarget
from adapters.es.errors import from_exception, is_transient_item, item_error
from pipeline.logs import register_secret

_clients: dict[EsTarget, elasticsearch.Elasticsearch] = {}
_fields: dict[tuple[EsTarget, str], dict[str, str]] = {}
_lock = threading.Lock()


@dataclass(slots=True)
class Action:
    """One bulk action: ``op`` index | update | delete; ``body`` the document or update body."""

    op: str
    index: str
    doc_id: str
    body: dict | None = None
    routing: str | None = None
    tag: Any = None  # the caller's bookkeeping (what to do when the document is missing)


def client(target: EsTarget) -> elasticsearch.Elasticsearch:
    """The process-wide client of a target (created on first use)."""
    with _lock:
        c = _clients.get(target)
        if c is None:
            register_secret(target.password.reveal())  # masked in every log line from now on
            # orjson also decodes the responses (a bulk response holds an item per action)
            c = _clients[target] = elasticsearch.Elasticsearch(**target.client_kwargs(),
                                                               serializer=elasticsearch.OrjsonSerializer())
        return c


def reset() -> None:
    """Forget the cached index field types (the job calls this after DDL)."""
    with _lock:
        _fields.clear()


def field_types(target: EsTarget, index: str) -> dict[str, str]:
    """Top-level field -> ES type of an index (or alias); {} when the index does not exist yet."""
    key = (target, index)
    hit = _fields.get(key)
    if hit is not None:
        return hit
    try:
        resp = client(target).indices.get_mapping(index=index)
        types: dict[str, str] = {}
        for body in resp.body.values():
            for name, prop in ((body.get("mappings") or {}).get("properties") or {}).items():
                types[name] = prop.get("type") or ("object" if "properties" in prop else "object")
    except elasticsearch.NotFoundError:
        types = {}
    except Exception as e:  # noqa: BLE001 - classified in errors.py
        raise from_exception(e, f"reading the mapping of index {index}", target.label) from None
    with _lock:
        _fields[key] = types
    return types


def _dumps(obj: Any) -> bytes:
    try:
        return orjson.dumps(obj)
    except orjson.JSONEncodeError:  # e.g. an integer beyond 64 bits: Elasticsearch judges it, per item
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _lines(a: Action) -> bytes:
    meta: dict[str, Any] = {"_index": a.index, "_id": a.doc_id}
    if a.routing is not None:
        meta["routing"] = a.routing
    if a.op == "update":
        meta["retry_on_conflict"] = 3
    head = _dumps({a.op: meta})
    if a.body is None:
        return head + b"\n"
    return b"".join((head, b"\n", _dumps(a.body), b"\n"))


def send(target: EsTarget, actions: list[Action]) -> list[Action]:
    """Apply ``actions`` in order; return the update actions whose document was missing."""
    missing: list[Action] = []
    start, size, chunk = 0, 0, []
    encoded = [_lines(a) for a in actions]
    for i, data in enumerate(encoded):
        if chunk and size + len(data) > target.bulk_bytes:
            missing += _request(target, actions[start:i], chunk)
            start, size, chunk = i, 0, []
        chunk.append(data)
        size += len(data)
    if chunk:
        missing += _request(target, actions[start:], chunk)
    return missing


def _request(target: EsTarget, actions: list[Action], lines: list[bytes]) -> list[Action]:
    body = b"".join(lines)
    es = client(target)
    delay = 0.5
    for attempt in range(target.item_retries + 1):
        try:
            resp = es.bulk(operations=body)
        except Exception as e:  # noqa: BLE001 - classified in errors.py
            raise from_exception(e, f"bulk request of {len(actions)} action(s) to index {actions[0].index}",
                                 target.label) from None
        result = resp.body
        if not result.get("errors"):
            return []
        missing, transient = [], None
        for a, item in zip(actions, result["items"], strict=True):
            (op, res), = item.items()
            err = res.get("error")
            if err is None:
                continue
            status = int(res.get("status", 0))
            if op == "update" and status == 404 and isinstance(err, dict) \
                    and err.get("type") == "document_missing_exception":
                missing.append(a)
                continue
            if is_transient_item(status, err):
                transient = transient or item_error(op, a.index, a.doc_id, status, err)
                continue
            raise item_error(op, a.index, a.doc_id, status, err)
        if transient is None:
            return missing
        if attempt == target.item_retries:
            raise transient
        time.sleep(delay)
        delay *= 2
    return []  # pragma: no cover - the loop returns or raises


def delete_all(target: EsTarget, index: str) -> int:
    """Delete every document of ``index`` (scroll + bulk delete; the server may lack
    ``_delete_by_query``). Returns how many were deleted."""
    es = client(target)
    n = 0
    try:
        es.indices.refresh(index=index)
        resp = es.search(index=index, scroll="2m", size=1000, source=False, sort=["_doc"])
        scroll_id = resp.get("_scroll_id")
        while True:
            hits = resp["hits"]["hits"]
            if not hits:
                break
            send(target, [Action("delete", index, h["_id"], routing=h.get("_routing")) for h in hits])
            n += len(hits)
            resp = es.scroll(scroll_id=scroll_id, scroll="2m")
            scroll_id = resp.get("_scroll_id")
        if scroll_id:
            es.clear_scroll(scroll_id=scroll_id)
    except elasticsearch.NotFoundError:
        return n
    except Exception as e:  # noqa: BLE001 - classified in errors.py
        raise from_exception(e, f"deleting the documents of index {index}", target.label) from None
    return n
