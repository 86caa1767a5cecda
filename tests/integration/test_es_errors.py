"""errors.py classifies every Elasticsearch and OpenSearch failure, and retries what is transient.

The suite's servers cannot be made to answer 429/503 on demand, so the classifiers are tested
with constructed elasticsearch-py and opensearch-py exceptions and bulk item results; the
transient path of a real bulk is exercised against a closed port (connection refused) with both
clients. Also: the config of an ``outerAdapters`` entry, a client pointed at the other product,
and ``relations`` documents (join field + routing) as built; OpenSearch stores them
(test_opensearch_join.py), the suite's Elasticsearch cannot (no parent-join module).
"""

from __future__ import annotations

import socket
import uuid
from dataclasses import replace

import elastic_transport
import opensearchpy
import pytest
from elasticsearch import ApiError, BadRequestError

from adapters import registry
from adapters.base import Change
from adapters.es import EsTarget, make_writer, target_from_adapter
from adapters.es.chunk import ChunkApplier
from adapters.es.errors import EsItemError, EsTransientError, from_exception, item_error
from adapters.es.plan import doc_plan
from adapters.opensearch import errors as os_errors
from adapters.opensearch import target_from_adapter as os_target_from_adapter
from pipeline.config import OuterAdapter, parse_config
from pipeline.mapping.loader import parse_mapping_text
from sluice_common.errors import ConfigError, TargetError, TransientError


def _meta(status: int) -> elastic_transport.ApiResponseMeta:
    node = elastic_transport.NodeConfig("http", "127.0.0.1", 9200)
    return elastic_transport.ApiResponseMeta(status, "1.1", elastic_transport.HttpHeaders(), 0.01, node)


@pytest.mark.parametrize("status,etype,transient", [
    (429, "es_rejected_execution_exception", True),
    (429, "rejected_execution_exception", True),      # OpenSearch's name for it
    (503, "unavailable_shards_exception", True),
    (409, "version_conflict_engine_exception", True),
    (500, "circuit_breaking_exception", True),
    (400, "mapper_parsing_exception", False),
    (400, "strict_dynamic_mapping_exception", False),
    (403, "security_exception", False),
    (404, "index_not_found_exception", False),
])
def test_bulk_item_classification(status, etype, transient):
    err = item_error("index", "users", "42", status, {"type": etype, "reason": "why",
                                                      "caused_by": {"type": "x", "reason": "deeper"}})
    assert isinstance(err, TransientError if transient else TargetError)
    assert isinstance(err, EsTransientError) == transient
    text = str(err)
    assert "users" in text and "_id=42" in text and etype in text and "deeper" in text
    if not transient:
        assert isinstance(err, EsItemError) and err.key == "_id=42"


def test_api_errors_classification():
    busy = ApiError("busy", _meta(429), {"error": {"type": "es_rejected_execution_exception", "reason": "queue"}})
    assert isinstance(from_exception(busy, "bulk", "http://h:9200"), TransientError)
    bad = BadRequestError("bad", _meta(400), {"error": {"type": "parse_exception", "reason": "nope"}})
    e = from_exception(bad, "bulk", "http://h:9200")
    assert isinstance(e, TargetError) and not isinstance(e, TransientError) and "parse_exception" in str(e)
    down = elastic_transport.ConnectionError("refused")
    assert isinstance(from_exception(down, "bulk", "http://h:9200"), TransientError)
    slow = elastic_transport.ConnectionTimeout("timed out")
    assert "timed out" in str(from_exception(slow, "bulk", "http://h:9200"))


def test_opensearch_client_errors_classification():
    """opensearch-py's exceptions (adapters/opensearch/errors.py): the same rules, its own classes."""
    busy = opensearchpy.TransportError(429, "rejected_execution_exception",
                                       {"error": {"type": "rejected_execution_exception", "reason": "queue full"}})
    e = os_errors.from_exception(busy, "bulk", "http://h:9200")
    assert isinstance(e, TransientError) and "OpenSearch at http://h:9200 answered HTTP 429" in str(e)
    bad = opensearchpy.RequestError(400, "mapper_parsing_exception",
                                    {"error": {"type": "mapper_parsing_exception", "reason": "nope"}})
    e = os_errors.from_exception(bad, "bulk", "http://h:9200")
    assert isinstance(e, TargetError) and not isinstance(e, TransientError) and "mapper_parsing_exception" in str(e)
    denied = opensearchpy.AuthorizationException(403, "security_exception", {"error": "no permissions"})
    e = os_errors.from_exception(denied, "bulk", "http://h:9200")
    assert not isinstance(e, TransientError) and "security.auth" in e.hint
    down = opensearchpy.ConnectionError("N/A", "refused", ConnectionRefusedError("refused"))
    assert isinstance(os_errors.from_exception(down, "bulk", "http://h:9200"), TransientError)
    slow = opensearchpy.ConnectionTimeout("TIMEOUT", "timed out", TimeoutError("read timed out"))
    assert "timed out to OpenSearch" in str(os_errors.from_exception(slow, "bulk", "http://h:9200"))


@pytest.mark.parametrize("name", ["es8", "opensearch"])
def test_unreachable_cluster_is_transient_and_hides_the_password(name):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: connection refused
    adapter = OuterAdapter(name=name, key="es1", hosts=f"127.0.0.1:{port}",
                           properties={"mode": "rest", "security.auth": "elastic:s3cr3t-pw"})
    target = registry.target_from_adapter(adapter, "sluice.yml", "groups[0].outerAdapters[0]")
    assert target.product == ("opensearch" if name == "opensearch" else "elasticsearch")
    target = replace(target, request_timeout=2, item_retries=0)
    m = parse_mapping_text("esMapping:\n  _index: x\n  _id: id\n  sql: select t.id, t.a from t t\n", "m.yml")
    w = registry.make_writer(registry.kind_of(name), target, (m,))
    with pytest.raises(TransientError) as e:
        w.apply(m, [Change("INSERT", "db", "t", {"id": "1", "a": "x"}, mysql_type={"id": "int", "a": "text"})])
    assert "s3cr3t" not in str(e.value) and "could not connect" in str(e.value)
    assert target.product_name in str(e.value)


def test_a_real_429_is_transient_then_lands(search):
    """The server's in-flight request breaker lowered below a bulk request's size: every bulk gets
    HTTP 429 ``circuit_breaking_exception``, which each client raises its own way and the adapter
    classifies as transient; with the breaker restored the same chunk lands."""
    index = f"sluice-429-{uuid.uuid4().hex[:8]}"
    m = parse_mapping_text(f"esMapping:\n  _index: {index}\n  _id: id\n  sql: select t.id, t.a from t t\n", "m.yml")
    changes = [Change("INSERT", "db", "t", {"id": str(i), "a": "x" * 200}, mysql_type={"id": "int", "a": "text"})
               for i in range(40)]
    w = make_writer(search.target(item_retries=0), (m,))
    setting = "network.breaker.inflight_requests.limit"
    search.create_index(index)
    try:
        search.cluster_setting(setting, "2kb")
        try:
            with pytest.raises(TransientError) as e:
                w.apply(m, changes)
        finally:
            search.cluster_setting(setting, None)
        assert "429" in str(e.value) and "circuit_breaking_exception" in str(e.value)
        assert ("OpenSearch" if search.is_os else "Elasticsearch") in str(e.value)
        w.apply(m, changes)                                   # the retry of the chunk lands
        assert len(search.docs(index)) == 40
    finally:
        search.delete_index(index)


def test_each_client_refuses_the_other_product(search):
    """elasticsearch-py refuses OpenSearch (its product check; canal's adapter fails there too);
    the opensearch adapter refuses a server that is not OpenSearch. Both say which name to use."""
    m = parse_mapping_text("esMapping:\n  _index: x\n  _id: id\n  sql: select t.id from t t\n", "m.yml")
    other = "elasticsearch" if search.is_os else "opensearch"
    w = make_writer(search.target(product=other), (m,))
    with pytest.raises(TargetError) as e:
        w.check()
    assert ("name: opensearch" if search.is_os else "name: es8") in (e.value.hint or "") + str(e.value)


def test_target_from_canal_adapter_and_sources():
    cfg = parse_config({"source": {"host": "db1", "port": 3307, "user": "cdc", "password": "pw"},
                        "srcDataSources": {"defaultDS": {"url": "jdbc:mysql://db2:3306/mytest?useUnicode=true",
                                                         "username": "root", "password": "121212"}}})
    adapter = OuterAdapter(name="es", hosts="127.0.0.1:9200,https://es2:9243",
                           properties={"mode": "rest", "security.auth": "test:123456", "cluster.name": "c1"})
    t = target_from_adapter(adapter, "f.yml", "k", cfg=cfg)
    assert t.hosts == ("http://127.0.0.1:9200", "https://es2:9243") and t.username == "test"
    assert t.cluster_name == "c1" and "123456" not in repr(t) and "123456" not in t.label
    ds = dict(t.sources)["defaultDS"]
    assert (ds.host, ds.port, ds.database, ds.user) == ("db2", 3306, "mytest", "root")
    assert t.default_source.host == "db1"
    with pytest.raises(ConfigError, match="transport client"):
        target_from_adapter(OuterAdapter(name="es", hosts="h:9300", properties={"mode": "transport"}), "f", "k")
    m = parse_mapping_text("dataSourceKey: other\nesMapping:\n  _index: x\n  _id: id\n  sql: select t.id from t t\n",
                           "m.yml")
    with pytest.raises(ConfigError, match="other"):
        t.source_for(m)
    o = os_target_from_adapter(OuterAdapter(name="opensearch", key="os1", hosts="127.0.0.1:9200",
                                            properties={"security.auth": "admin:pw"}), "f.yml", "k", cfg=cfg)
    assert o.product == "opensearch" and o.product_name == "OpenSearch" and dict(o.sources) == dict(t.sources)
    kw = o.client_kwargs()
    assert kw["http_auth"] == ("admin", "pw") and kw["hosts"] == ["http://127.0.0.1:9200"] and "use_ssl" not in kw
    with pytest.raises(ConfigError, match="REST only"):
        os_target_from_adapter(OuterAdapter(name="opensearch", hosts="h:9300", properties={"mode": "transport"}),
                               "f", "k")
    with pytest.raises(ConfigError, match="OpenSearch HTTP address"):
        os_target_from_adapter(OuterAdapter(name="opensearch"), "f", "k")


def test_id_must_come_from_the_main_table():
    m = parse_mapping_text("esMapping:\n  _index: x\n  _id: rid\n  sql: select a.id, b.id as rid from a a "
                           "left join b b on b.id = a.bid\n", "m.yml")
    with pytest.raises(ConfigError, match="main table"):
        doc_plan(m)


def test_relations_documents_carry_join_field_and_routing():
    """Parent/child documents (canal's customer/biz_order): built and routed, but not sent -
    the suite's server has no join field type, so this stops at the bulk actions."""
    child = parse_mapping_text("""esMapping:
  _index: customer
  _id: _id
  relations:
    customer_order:
      name: order
      parent: customer_id
  sql: "select concat('oid_', t.id) as _id, t.customer_id, t.id as order_id from biz_order t"
  skips: [customer_id]
""", "biz_order.yml")
    parent = parse_mapping_text("""esMapping:
  _index: customer
  _id: id
  relations:
    customer_order:
      name: customer
  sql: "select t.id, t.name from customer t"
""", "customer.yml")
    types = {"id": "bigint(20)", "name": "varchar(20)"}
    plan = doc_plan(parent)
    app = ChunkApplier(EsTarget(("http://127.0.0.1:1",)), plan, parent, None)
    from adapters.es.plan import Op
    op = Op("index_row", {"id": "7", "name": "ann"}, types, {"id": "id", "name": "name"})
    app._resolve_ids([op])
    actions, _ = app._row_actions([op])
    assert actions[0].doc_id == "7" and actions[0].body == {"name": "ann", "customer_order": "customer"}
    cplan = doc_plan(child)
    assert cplan.parent_column == "customer_id" and cplan.relation.parent_field == "customer_id"
    capp = ChunkApplier(EsTarget(("http://127.0.0.1:1",)), cplan, child, None)
    doc = capp._db_doc(["_id", "customer_id", "order_id"], [253, 8, 8], ("oid_5", 7, 5))
    assert doc.doc_id == "oid_5" and doc.routing == "7"
    assert doc.body == {"order_id": 5, "customer_order": {"name": "order", "parent": "7"}}


def test_check_refuses_relations_without_a_join_field(search):
    m = parse_mapping_text("esMapping:\n  _index: sluice-no-join\n  _id: id\n  relations:\n    j:\n      name: p\n"
                           "  sql: select t.id from t t\n", "m.yml")
    with pytest.raises(TargetError, match="no join field"):
        make_writer(search.target(), (m,)).check()
