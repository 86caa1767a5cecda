"""The suite's Elasticsearch server (scripts/svc/elasticsearch.py), exercised for real.

One test per capability docs/services.md ("Elasticsearch") claims, and one per documented gap
(the integ-test-zip build lacks parent-join, reindex, mapper-extras, lang-painless,
analysis-common, ingest-common and rest-root): if the server ever changes, these say so.
"""

from __future__ import annotations

import uuid

import pytest
from elasticsearch import (
    ApiError,
    BadRequestError,
    ConflictError,
    Elasticsearch,
    NotFoundError,
    helpers,
)

#: how the server answers a REST endpoint whose module is absent (400 or 405)
NO_HANDLER = r"no handler found for uri|Incorrect HTTP method for uri"


@pytest.fixture
def index(es: Elasticsearch):
    """A unique index name, deleted afterwards."""
    name = f"sluice-test-{uuid.uuid4().hex[:12]}"
    yield name
    es.indices.delete(index=name, ignore_unavailable=True)


def test_info_matches_server(elasticsearch: dict, es: Elasticsearch):
    assert elasticsearch["host"] == "127.0.0.1"
    assert elasticsearch["url"] == f"http://127.0.0.1:{elasticsearch['port']}"
    assert elasticsearch["port"] not in (9200, 9300)
    assert elasticsearch["transport_port"] not in (9200, 9300, elasticsearch["port"])
    assert elasticsearch["version"].startswith("8.")
    node = next(iter(es.nodes.info(node_id="_local", metric="plugins")["nodes"].values()))
    assert node["version"] == elasticsearch["version"]
    assert sorted(m["name"] for m in node["modules"]) == elasticsearch["modules"]
    assert es.cluster.health()["status"] in ("green", "yellow")  # yellow: unassigned replicas


def test_index_get_roundtrip(es: Elasticsearch, index: str):
    doc = {"id": 7, "name": "Ada", "price": 12.5, "tags": ["a", "b"],
           "created": "2024-05-01T10:00:00Z", "meta": {"src": "binlog", "pos": 4}}
    es.indices.create(index=index, mappings={"properties": {
        "id": {"type": "long"}, "name": {"type": "keyword"}, "price": {"type": "double"},
        "created": {"type": "date"}}})
    es.index(index=index, id="7", document=doc, refresh=True)
    got = es.get(index=index, id="7")
    assert got["found"] is True
    assert got["_source"] == doc


def test_bulk_search_and_aggregate(es: Elasticsearch, index: str):
    es.indices.create(index=index, mappings={"properties": {
        "n": {"type": "long"}, "k": {"type": "keyword"}}})
    actions = [{"_op_type": "index", "_index": index, "_id": str(i),
                "_source": {"n": i, "k": "even" if i % 2 == 0 else "odd"}} for i in range(50)]
    actions.append({"_op_type": "delete", "_index": index, "_id": "0"})
    ok, errors = helpers.bulk(es, actions, refresh=True)
    assert (ok, errors) == (51, [])
    res = es.search(index=index, query={"range": {"n": {"gte": 40}}}, sort=[{"n": "asc"}],
                    size=100, aggs={"by_k": {"terms": {"field": "k"}}, "s": {"sum": {"field": "n"}}})
    assert [h["_source"]["n"] for h in res["hits"]["hits"]] == list(range(40, 50))
    assert {b["key"]: b["doc_count"] for b in res["aggregations"]["by_k"]["buckets"]} == {
        "even": 5, "odd": 5}
    assert res["aggregations"]["s"]["value"] == sum(range(40, 50))
    assert es.count(index=index)["count"] == 49


def test_partial_update_upsert_and_delete(es: Elasticsearch, index: str):
    es.index(index=index, id="1", document={"a": 1, "b": "x"})
    es.update(index=index, id="1", doc={"b": "y", "c": True})
    es.update(index=index, id="2", doc={"a": 2}, doc_as_upsert=True)
    assert es.get(index=index, id="1")["_source"] == {"a": 1, "b": "y", "c": True}
    assert es.get(index=index, id="2")["_source"] == {"a": 2}
    es.delete(index=index, id="1", refresh=True)
    with pytest.raises(NotFoundError):
        es.get(index=index, id="1")


def test_external_versioning_rejects_stale_writes(es: Elasticsearch, index: str):
    """What a replicator needs to drop out-of-order events: version_type=external."""
    es.index(index=index, id="k", document={"v": "new"}, version=20, version_type="external")
    with pytest.raises(ConflictError):
        es.index(index=index, id="k", document={"v": "old"}, version=10,
                 version_type="external")
    got = es.get(index=index, id="k")
    assert (got["_version"], got["_source"]) == (20, {"v": "new"})


def test_optimistic_concurrency_with_seq_no(es: Elasticsearch, index: str):
    first = es.index(index=index, id="1", document={"n": 1})
    es.index(index=index, id="1", document={"n": 2}, if_seq_no=first["_seq_no"],
             if_primary_term=first["_primary_term"])
    with pytest.raises(ConflictError):
        es.index(index=index, id="1", document={"n": 3}, if_seq_no=first["_seq_no"],
                 if_primary_term=first["_primary_term"])


def test_core_field_types_nested_and_alias(es: Elasticsearch, index: str):
    es.indices.create(index=index, mappings={"properties": {
        "name": {"type": "text", "fields": {"raw": {"type": "keyword"}}},
        "lines": {"type": "nested", "properties": {"sku": {"type": "keyword"},
                                                   "qty": {"type": "integer"}}},
        "attrs": {"type": "flattened"},
        "ip": {"type": "ip"},
        "ts": {"type": "date_nanos"},
        "span": {"type": "integer_range"},
        "title": {"type": "alias", "path": "name"},
    }})
    es.index(index=index, id="1", refresh=True, document={
        "name": "Blue Widget", "lines": [{"sku": "A1", "qty": 2}, {"sku": "B2", "qty": 5}],
        "attrs": {"color": "blue"}, "ip": "10.1.2.3", "ts": "2024-05-01T10:00:00.123456789Z",
        "span": {"gte": 1, "lte": 5}})
    nested = es.search(index=index, query={"nested": {"path": "lines", "query": {"bool": {
        "must": [{"term": {"lines.sku": "B2"}}, {"range": {"lines.qty": {"gte": 5}}}]}}}})
    assert nested["hits"]["total"]["value"] == 1
    text = es.search(index=index, query={"match": {"title": "widget"}})
    assert text["hits"]["total"]["value"] == 1
    flat = es.search(index=index, query={"term": {"attrs.color": "blue"}})
    assert flat["hits"]["total"]["value"] == 1


def test_index_template_and_alias(es: Elasticsearch, index: str):
    tpl = f"{index}-tpl"
    es.indices.put_index_template(name=tpl, index_patterns=[f"{index}-*"], priority=100,
                                  template={"mappings": {"properties": {"k": {"type": "keyword"}}},
                                            "aliases": {f"{index}-all": {}}})
    try:
        es.index(index=f"{index}-1", id="1", document={"k": "v"}, refresh=True)
        mapping = es.indices.get_mapping(index=f"{index}-1")
        assert mapping[f"{index}-1"]["mappings"]["properties"]["k"]["type"] == "keyword"
        assert es.count(index=f"{index}-all")["count"] == 1
    finally:
        es.indices.delete(index=f"{index}-1", ignore_unavailable=True)
        es.indices.delete_index_template(name=tpl)


def test_scroll_pit_and_more_aggregations(es: Elasticsearch, index: str):
    es.indices.create(index=index, settings={"number_of_replicas": 0}, mappings={"properties": {
        "d": {"type": "date"}, "k": {"type": "keyword"}}})
    helpers.bulk(es, ({"_index": index, "_id": str(i),
                       "_source": {"d": f"2024-0{1 + i % 3}-15", "k": f"k{i % 4}"}}
                      for i in range(30)), refresh=True)
    assert sum(1 for _ in helpers.scan(es, index=index, size=7)) == 30
    pit = es.open_point_in_time(index=index, keep_alive="1m")["id"]
    try:
        res = es.search(pit={"id": pit, "keep_alive": "1m"}, size=0, aggs={
            "m": {"date_histogram": {"field": "d", "calendar_interval": "month"}},
            "c": {"cardinality": {"field": "k"}},
            "comp": {"composite": {"sources": [{"k": {"terms": {"field": "k"}}}]}},
            "top": {"top_hits": {"size": 1}}})
    finally:
        es.close_point_in_time(id=pit)
    aggs = res["aggregations"]
    assert [b["doc_count"] for b in aggs["m"]["buckets"]] == [10, 10, 10]
    assert aggs["c"]["value"] == 4
    assert len(aggs["comp"]["buckets"]) == 4
    assert len(aggs["top"]["hits"]["hits"]) == 1
    assert es.cluster.health(index=index)["status"] == "green"


# -- documented gaps of the integ-test-zip build --------------------------------------------

def test_no_join_field_parent_join_module_absent(es: Elasticsearch, index: str):
    with pytest.raises(BadRequestError, match=r"mapper type \[join\]"):
        es.indices.create(index=index, mappings={"properties": {
            "rel": {"type": "join", "relations": {"order": "line"}}}})


def test_no_update_or_delete_by_query_reindex_module_absent(es: Elasticsearch, index: str):
    es.index(index=index, id="1", document={"n": 1}, refresh=True)
    for call in (lambda: es.update_by_query(index=index, query={"match_all": {}}),
                 lambda: es.delete_by_query(index=index, query={"match_all": {}}),
                 lambda: es.reindex(source={"index": index}, dest={"index": f"{index}-copy"})):
        with pytest.raises(ApiError, match=NO_HANDLER):
            call()


def test_no_scripts_lang_painless_absent(es: Elasticsearch, index: str):
    es.index(index=index, id="1", document={"n": 1}, refresh=True)
    with pytest.raises(BadRequestError, match="script_lang not supported"):
        es.update(index=index, id="1", script={"source": "ctx._source.n += 1"})


@pytest.mark.parametrize("field", [
    {"type": "scaled_float", "scaling_factor": 100},  # mapper-extras
    {"type": "token_count", "analyzer": "standard"},  # mapper-extras
    {"type": "search_as_you_type"}, {"type": "rank_feature"},  # mapper-extras
    {"type": "wildcard"}, {"type": "constant_keyword"}, {"type": "unsigned_long"},
    {"type": "version"}, {"type": "match_only_text"}, {"type": "geo_shape"},
    {"type": "percolator"}, {"type": "histogram"},
])
def test_missing_field_types(es: Elasticsearch, index: str, field: dict):
    with pytest.raises(BadRequestError, match=rf"mapper type \[{field['type']}\]"):
        es.indices.create(index=index, mappings={"properties": {"f": field}})


def test_no_data_streams_or_search_templates(es: Elasticsearch):
    name = f"sluice-ds-{uuid.uuid4().hex[:8]}"
    with pytest.raises(ApiError, match=NO_HANDLER):
        es.indices.create_data_stream(name=name)
    with pytest.raises(ApiError, match=NO_HANDLER):
        es.search_template(source={"query": {"match_all": {}}})


def test_analysis_only_core_analyzers(es: Elasticsearch, index: str):
    """standard/simple/whitespace/keyword/stop analyzers exist; language analyzers and the
    analysis-common tokenizers/filters (whitespace tokenizer, asciifolding, ...) do not."""
    es.indices.create(index=index, settings={"analysis": {"analyzer": {"folded": {
        "type": "custom", "tokenizer": "standard", "filter": ["lowercase"]}}}},
        mappings={"properties": {"t": {"type": "text", "analyzer": "folded"},
                                 "w": {"type": "text", "analyzer": "whitespace"}}})
    tokens = es.indices.analyze(index=index, analyzer="folded", text="Hello World")["tokens"]
    assert [t["token"] for t in tokens] == ["hello", "world"]
    with pytest.raises(BadRequestError):
        es.indices.create(index=f"{index}-en", mappings={"properties": {
            "t": {"type": "text", "analyzer": "english"}}})


def test_no_ingest_processors_ingest_common_absent(es: Elasticsearch):
    with pytest.raises(BadRequestError, match="No processor type exists"):
        es.ingest.put_pipeline(id=f"p-{uuid.uuid4().hex[:8]}",
                               processors=[{"set": {"field": "a", "value": "b"}}])


def test_no_root_endpoint_rest_root_absent(es: Elasticsearch):
    """GET / (client.info()) and HEAD / (client.ping()) need the rest-root module."""
    assert es.ping() is False
    with pytest.raises(ApiError) as err:
        es.info()
    assert err.value.meta.status == 405
