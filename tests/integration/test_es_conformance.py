"""Search writer conformance on the shared golden batches (tests/support/golden.py): applied once,
twice, and partly then fully replayed, the index holds exactly the expected rows. Every test runs
against Elasticsearch and against OpenSearch (the ``search`` fixture): one adapter, two clients."""

from __future__ import annotations

import base64
import uuid

import pytest

from adapters.base import Change
from adapters.es import make_writer, reset_caches
from pipeline.mapping.loader import parse_mapping_text
from tests.support import golden
from tests.support.search import SearchServer

#: row-mode cases (single table, _id = the key column); composite_key/no_primary_key need a
#: computed or missing _id and are covered by test_es_join.py instead
CASES = [golden.basic, golden.truncate, golden.pk_swap]
PROPS = {"name": {"type": "keyword"}, "balance": {"type": "keyword"}, "note": {"type": "keyword"},
         "score": {"type": "long"}}


@pytest.fixture
def index(search: SearchServer):
    name = f"sluice-es-{uuid.uuid4().hex[:10]}"
    reset_caches()
    search.create_index(name, {"dynamic": "strict", "properties": PROPS})
    yield name
    search.delete_index(name)


def accounts_mapping(index: str):
    return parse_mapping_text(f"""esMapping:
  _index: {index}
  _id: id
  sql: "select t.id, t.name, t.balance, t.note, t.score from accounts t"
  commitBatch: 4
""", "accounts.yml")


def expected(case: golden.GoldenCase) -> dict[str, dict]:
    return {r["id"]: {"name": r["name"], "balance": r["balance"], "note": r["note"],
                      "score": None if r["score"] is None else int(r["score"])} for r in case.expected}


def run(w, m, batches) -> None:
    for b in batches:
        for i in range(0, len(b), 4):  # chunks of commitBatch
            w.apply(m, list(b[i:i + 4]))
            w.commit()


@pytest.mark.parametrize("make_case", CASES, ids=lambda f: f.__name__)
def test_golden_case(search, index, make_case):
    case = make_case()
    m = accounts_mapping(index)
    w = make_writer(search.target(), (m,))
    w.check()
    w.open()
    run(w, m, case.batches)
    assert search.docs(index) == expected(case)
    run(w, m, case.batches)                      # replay everything
    assert search.docs(index) == expected(case)
    w.close()


@pytest.mark.parametrize("make_case", CASES, ids=lambda f: f.__name__)
def test_golden_partial_then_full_replay(search, index, make_case):
    case = make_case()
    m = accounts_mapping(index)
    w = make_writer(search.target(), (m,))
    w.open()
    first = list(case.batches[0])
    run(w, m, [first[: len(first) // 2]])        # a crash after part of the first batch
    run(w, m, case.batches)                      # the next run replays from the cursor
    assert search.docs(index) == expected(case)


def test_update_of_missing_document_upserts_the_row(search, index):
    """Row mode's missing-document rule: the UPDATE carries the whole row as ``upsert``."""
    t = golden.ACCOUNTS
    row = t.row(id="5", name="five", balance="5.00", note=None, score="1")
    change, after = t.update(row, note="late")
    m = accounts_mapping(index)
    w = make_writer(search.target(), (m,))
    w.apply(m, [change])
    assert search.docs(index) == {"5": {"name": "five", "balance": "5.00", "note": "late", "score": 1}}


#: key kinds and their ``_id`` (docs/es.md: the key's value converted as a field is)
ID_KINDS = [("varbinary(8)", ["a\x00\x01", "\x00", "\x00\xff"],
             lambda v: base64.b64encode(v.encode("latin-1")).decode()),
            ("decimal(10,4)", ["-12.5000", "0.0001", "99999.9999"], str),
            ("datetime(6)", ["2024-02-29 23:59:59.000001", "1970-01-01 00:00:00.000000", "2038-01-19 03:14:08.500000"],
             lambda v: v.replace(" ", "T")),
            ("varchar(20)", ["ü🚀", "Zz", "zZ "], str)]


@pytest.mark.parametrize("mysql_type, values, doc_id", ID_KINDS, ids=[k[0] for k in ID_KINDS])
def test_ids_of_every_key_kind(search, index, mysql_type, values, doc_id):
    """Insert, update, key change (DELETE + INSERT, as the job splits it), delete, replay."""
    m = parse_mapping_text(f"""esMapping:
  _index: {index}
  _id: k
  sql: "select t.k, t.name from kt t"
""", "kt.yml")
    types = {"k": mysql_type, "name": "varchar(40)"}

    def ch(kind, k, name, old=None):
        return Change(kind, "golden_src", "kt", {"k": k, "name": name}, old, ("k",), types)

    a, b, c = values
    batches = [[ch("INSERT", a, "one"), ch("INSERT", b, "two")],
               [ch("UPDATE", a, "uno", {"name": "one"}), ch("DELETE", b, "two"), ch("INSERT", c, "two")],
               [ch("DELETE", a, "uno"), ch("INSERT", a, "again")]]
    w = make_writer(search.target(), (m,))
    w.open()
    run(w, m, batches)
    run(w, m, batches)
    run(w, m, [batches[1][:1], *batches])
    assert search.docs(index) == {doc_id(c): {"name": "two"}, doc_id(a): {"name": "again"}}
    w.close()
