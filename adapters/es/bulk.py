"""Talking to the search server: the index field types, and bulk with per-item results.

:func:`send` writes actions in order as NDJSON ``_bulk`` requests of at most
``EsTarget.bulk_bytes`` each (one request after the other, so per-document order holds
across them), reads every item's result, and

* resends a request whose items failed transiently (429, 503, version conflicts left after
  ``retry_on_conflict``) up to ``item_retries`` times with backoff - resending is safe
  because every action is idempotent - then raises TransientError (the job retries the chunk);
* raises TargetError for the first item that failed terminally (via failures.item_error);
* reports ``update`` items that found no document (``document_missing_exception``) to the
  caller, which applies the missing-document rule; a ``delete`` of a missing document is fine.

The same code serves Elasticsearch and OpenSearch: the server is reached through the target's
:class:`~adapters.es.api.SearchApi` (:func:`client`).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Any

import orjson
from tenacity import Retrying, retry_if_result, stop_after_attempt, wait_exponential

from adapters.es.api import SearchApi, connect
from adapters.es.config import EsTarget
from adapters.es.failures import is_transient_item, item_error

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


def client(target: EsTarget) -> SearchApi:
    """The process-wide client of a target (created on first use; elasticsearch-py or opensearch-py)."""
    return connect(target)


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
    api = client(target)
    try:
        resp = api.mapping(index) or {}
    except Exception as e:  # noqa: BLE001 - classified by the client's errors.py
        raise api.error(e, f"reading the mapping of index {index}") from None
    types: dict[str, str] = {}
    for body in resp.values():
        for name, prop in ((body.get("mappings") or {}).get("properties") or {}).items():
            types[name] = prop.get("type") or "object"
    with _lock:
        _fields[key] = types
    return types


def _dumps(obj: Any) -> bytes:
    try:
        return orjson.dumps(obj)
    except orjson.JSONEncodeError:  # e.g. an integer beyond 64 bits: the server judges it, per item
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
    """One bulk request (sent again, whole, after items that failed transiently: ``item_retries``
    times, waits doubling from 0.5 s); the ``update`` actions that found no document."""
    body = b"".join(lines)
    api = client(target)
    resends = Retrying(stop=stop_after_attempt(target.item_retries + 1), wait=wait_exponential(multiplier=0.5),
                       retry=retry_if_result(lambda r: r[1] is not None),
                       retry_error_callback=lambda rs: rs.outcome.result(), sleep=time.sleep)
    missing, transient = resends(_send, api, actions, body)
    if transient is not None:
        raise transient
    return missing


def _send(api: SearchApi, actions: list[Action], body: bytes) -> tuple[list[Action], Exception | None]:
    """Send ``body`` once: the ``update`` actions that found no document, and the first transient
    item error (None when there was none); a terminal item error is raised."""
    try:
        result = api.bulk(body)
    except Exception as e:  # noqa: BLE001 - classified by the client's errors.py
        raise api.error(e, f"bulk request of {len(actions)} action(s) to index {actions[0].index}") from None
    if not result.get("errors"):
        return [], None
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
            transient = transient or item_error(op, a.index, a.doc_id, status, err, api.product)
            continue
        raise item_error(op, a.index, a.doc_id, status, err, api.product)
    return missing, transient


def delete_all(target: EsTarget, index: str) -> int:
    """Delete every document of ``index`` (scroll + bulk delete, each with its routing: the server
    may lack ``_delete_by_query``). Returns how many were deleted."""
    api = client(target)
    n = 0
    try:
        api.refresh(index)
        for hits in api.scan_ids(index, 1000):
            send(target, [Action("delete", index, h["_id"], routing=h.get("_routing")) for h in hits])
            n += len(hits)
    except Exception as e:  # noqa: BLE001 - classified by the client's errors.py
        if _not_found(e):
            return n
        raise api.error(e, f"deleting the documents of index {index}") from None
    return n


def _not_found(exc: BaseException) -> bool:
    """A 404 answer of either client (the index is gone: nothing to delete)."""
    return getattr(exc, "status_code", None) == 404 or getattr(getattr(exc, "meta", None), "status", None) == 404
