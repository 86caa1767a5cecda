"""The suite's OpenSearch (scripts/svc/opensearch.py): what runs, and the features the modules
assembled from Maven Central add to the integ-test zip. A change of server shows up here first.
"""

from __future__ import annotations

import uuid

import pytest
from opensearchpy import OpenSearch, RequestError


@pytest.fixture(scope="module")
def os_client(opensearch: dict):
    c = OpenSearch(opensearch["url"], timeout=30)
    yield c
    c.close()


@pytest.fixture
def index(os_client):
    name = f"sluice-svc-{uuid.uuid4().hex[:8]}"
    yield name
    os_client.indices.delete(index=name, params={"ignore_unavailable": "true"})


def test_service_info(opensearch, os_client):
    assert opensearch["version"].startswith("2.19.") and opensearch["user"] == "sluice-os"
    assert opensearch["port"] not in (9200, 9300) and opensearch["url"].startswith("http://127.0.0.1:")
    assert set(opensearch["modules"]) >= {"transport-netty4", "parent-join", "reindex", "lang-painless",
                                          "analysis-common"}
    root = os_client.info()                                  # GET / exists (unlike ES's integ-test build)
    assert root["version"]["distribution"] == "opensearch" and root["version"]["number"] == opensearch["version"]
    assert os_client.cluster.health()["cluster_name"] == "sluice-os"


def test_join_field_routing_and_parent_child_queries(os_client, index):
    """parent-join: a join mapping, a child routed to its parent, has_child / has_parent."""
    os_client.indices.create(index=index, body={"settings": {"number_of_shards": 3, "number_of_replicas": 0},
                                                "mappings": {"properties": {
                                                    "rel": {"type": "join", "relations": {"customer": "order"}}}}})
    os_client.index(index=index, id="1", body={"rel": "customer", "name": "ann"})
    os_client.index(index=index, id="oid_7", body={"rel": {"name": "order", "parent": "1"}}, params={"routing": "1"})
    with pytest.raises(RequestError) as refused:               # a child without routing is refused
        os_client.index(index=index, id="oid_8", body={"rel": {"name": "order", "parent": "1"}})
    assert "[routing] is missing for join field [rel]" in str(refused.value.info)
    os_client.indices.refresh(index=index)
    parents = os_client.search(index=index, body={"query": {"has_child": {"type": "order", "query": {
        "match_all": {}}}}})["hits"]["hits"]
    children = os_client.search(index=index, body={"query": {"has_parent": {"parent_type": "customer", "query": {
        "match": {"name": "ann"}}}}})["hits"]["hits"]
    assert [h["_id"] for h in parents] == ["1"]
    assert [(h["_id"], h["_routing"]) for h in children] == [("oid_7", "1")]


def test_by_query_apis_with_painless_and_analysis_common(os_client, index):
    """reindex (update/delete by query, _reindex), lang-painless scripts, analysis-common analyzers."""
    os_client.indices.create(index=index, body={"settings": {"number_of_replicas": 0}, "mappings": {
        "properties": {"txt": {"type": "text", "analyzer": "english"}, "n": {"type": "long"}}}})
    for i in range(1, 5):
        os_client.index(index=index, id=str(i), body={"txt": f"running dogs {i}", "n": i})
    os_client.indices.refresh(index=index)
    assert os_client.search(index=index, body={"query": {"match": {"txt": "run"}}})["hits"]["total"]["value"] == 4
    done = os_client.update_by_query(index=index, body={"script": {"source": "ctx._source.n += 10",
                                                                     "lang": "painless"},
                                                          "query": {"range": {"n": {"lte": 2}}}},
                                     params={"refresh": "true"})
    assert done["updated"] == 2 and not done["failures"]
    gone = os_client.delete_by_query(index=index, body={"query": {"range": {"n": {"gte": 11}}}},
                                     params={"refresh": "true"})
    assert gone["deleted"] == 2
    copied = os_client.reindex(body={"source": {"index": index}, "dest": {"index": index + "-copy"}},
                               params={"refresh": "true"})
    try:
        assert copied["created"] == 2
    finally:
        os_client.indices.delete(index=index + "-copy", params={"ignore_unavailable": "true"})
    scripted = os_client.update(index=index, id="3", body={"script": {"source": "ctx._source.n = params.v",
                                                                       "params": {"v": 99}}})
    assert scripted["result"] == "updated" and os_client.get(index=index, id="3")["_source"]["n"] == 99
