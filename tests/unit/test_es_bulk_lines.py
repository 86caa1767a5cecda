"""The bulk body lines the Elasticsearch writer sends (no server needed)."""

from __future__ import annotations

import json

from adapters.es.bulk import Action, _lines


def test_lines_are_compact_utf8_json_with_routing_and_retries():
    doc = {"name": "café 表", "n": 3, "ok": True, "x": None, "tags": ["a"], "o": {"k": 1.5}}
    head, body, end = _lines(Action("index", "i", "7", doc, routing="r1")).split(b"\n")
    assert json.loads(head) == {"index": {"_index": "i", "_id": "7", "routing": "r1"}}
    assert json.loads(body) == doc and "café 表".encode() in body and b", " not in body and end == b""
    update = json.loads(_lines(Action("update", "i", "7", {"doc": {}})).split(b"\n")[0])
    assert update["update"]["retry_on_conflict"] == 3
    assert _lines(Action("delete", "i", "7")) == b'{"delete":{"_index":"i","_id":"7"}}\n'


def test_an_integer_beyond_64_bits_is_sent_for_elasticsearch_to_judge():
    """orjson refuses it; the line falls back to the standard encoder (ES answers 400 for the item,
    a row error, as before orjson)."""
    body = _lines(Action("index", "i", "1", {"n": 2**70})).split(b"\n")[1]
    assert body == b'{"n":1180591620717411303424}'


def test_the_es_password_is_masked_in_logs_once_a_client_exists():
    from adapters.es.bulk import client
    from adapters.es.config import EsTarget
    from pipeline.logs import mask
    from pipeline.secrets import Secret

    client(EsTarget(hosts=("http://127.0.0.1:9",), username="elastic", password=Secret("es-Pw-5l9q")))
    assert mask("connect failed for elastic:es-Pw-5l9q@127.0.0.1") == "connect failed for elastic:***@127.0.0.1"
