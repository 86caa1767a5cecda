"""esMapping.sql: the SELECT forms accepted, their parsed form, and each refusal."""

from __future__ import annotations

import pytest

from pipeline.mapping import ColumnRef, JoinKey, parse_mapping, parse_select
from sluice_common.errors import ConfigError

pytestmark = pytest.mark.unit


def es_error(sql: str) -> str:
    with pytest.raises(ConfigError) as info:
        parse_mapping({"esMapping": {"_index": "i", "_id": "id", "sql": sql}}, "idx.yml")
    assert info.value.key == "esMapping.sql" and str(info.value).startswith("idx.yml: esMapping.sql: ")
    return info.value.problem


def test_several_joins_with_anded_keys_aliases_and_functions():
    q = parse_select("""
        SELECT a.id AS id, a.name nick, CONCAT(a.first, ' ', b.last) AS full_name,
               IFNULL(c.label, 'none') AS label, `a`.`c_time`, a.n + 1 AS next_n,
               CASE WHEN a.kind = 1 THEN 'x' ELSE b.kind END AS kind,
               CAST(a.price AS DECIMAL(10, 2)) AS price, DATE_ADD(a.t, INTERVAL 1 DAY) AS later,
               a.role_id, a.tenant, b.id AS role_key
        FROM mytest.user AS a
        LEFT OUTER JOIN role b ON b.id = a.role_id AND b.tenant = a.tenant
        LEFT JOIN label c ON (c.role_id = b.id);  -- trailing comment
    """)
    assert (q.main.schema, q.main.name, q.main.alias, q.main.key) == ("mytest", "user", "a", "mytest.user")
    assert [(j.table.name, j.table.alias) for j in q.joins] == [("role", "b"), ("label", "c")]
    assert q.joins[0].keys == (JoinKey("id", ColumnRef("a", "role_id")), JoinKey("tenant", ColumnRef("a", "tenant")))
    assert q.joins[1].keys == (JoinKey("role_id", ColumnRef("b", "id")),)
    assert q.field_names == ("id", "nick", "full_name", "label", "c_time", "next_n", "kind", "price", "later",
                             "role_id", "tenant", "role_key")
    full = q.field("full_name")
    assert full.columns == (ColumnRef("a", "first"), ColumnRef("b", "last")) and not full.is_simple
    assert full.expression == "CONCAT(a.first, ' ', b.last)"
    assert q.field("kind").columns == (ColumnRef("a", "kind"), ColumnRef("b", "kind"))
    assert q.field("c_time").is_simple and q.field("c_time").columns == (ColumnRef("a", "c_time"),)
    assert q.field("price").columns == (ColumnRef("a", "price"),)
    assert [f.name for f in q.fields_reading("b")] == ["full_name", "kind", "role_key"]
    assert [f.name for f in q.fields_reading("b", "id")] == ["role_key"]
    assert q.columns_of("c") == ("label", "role_id")


def test_single_table_columns_need_no_alias():
    q = parse_select("select id, name as n, upper(name) as up from user")
    assert q.main.alias == "user"
    assert q.field("n").columns == (ColumnRef("user", "name"),)


@pytest.mark.parametrize("sql, problem", [
    ("", "is empty"),
    ("update t set a = 1", "must be a SELECT statement"),
    ("select * from t", "SELECT * is not supported"),
    ("select t.* from t", "SELECT * is not supported"),
    ("select distinct t.id from t", "SELECT DISTINCT is not supported"),
    ("select t.id from t where t.id > 1", "a WHERE clause is not supported"),
    ("select t.id from t group by t.id", "GROUP BY is not supported"),
    ("select t.id from t having t.id > 1", "HAVING is not supported"),
    ("select t.id from t order by t.id", "ORDER BY is not supported"),
    ("select t.id from t limit 10", "LIMIT is not supported"),
    ("select t.id from t union select u.id from u", "UNION is not supported"),
    ("select count(t.id) as id from t", "aggregate function COUNT() is not supported"),
    ("select group_concat(t.x) as id from t", "aggregate function GROUP_CONCAT() is not supported"),
    ("select (select 1) as id from t", "subqueries are not supported"),
    ("select t.id from (select 1 as id) t", "subqueries are not supported"),
    ("select t.id from t left join (select * from r) r on r.id = t.id", "subqueries are not supported"),
    ("select t.id from t where exists (select 1)", "a WHERE clause is not supported"),
    ("select t.id from t inner join r on r.id = t.id", "only LEFT JOIN is supported (as in canal), not INNER"),
    ("select t.id from t right join r on r.id = t.id", "only LEFT JOIN is supported (as in canal), not RIGHT"),
    ("select t.id from t join r on r.id = t.id", "only LEFT JOIN is supported"),
    ("select t.id from t cross join r", "only LEFT JOIN is supported"),
    ("select t.id from t, r", "comma joins (FROM a, b) are not supported"),
    ("select t.id from t left join r using (id)", "JOIN ... USING is not supported"),
    ("select t.id from t left join r on r.id > t.id", "join conditions must be equalities"),
    ("select t.id from t left join r on r.id = 1", "must compare two columns"),
    ("select t.id from t left join r on r.id = t.id or r.x = t.id", "OR in a join condition"),
    ("select t.id from t left join r on upper(r.id) = t.id", "must compare two columns"),
    ("select t.id from t left join r on r.id = r.y", "must compare a column of 'r'"),
    ("select t.id from t left join r on r.id = q.id", "unknown table alias 'q'"),
    ("select t.id, r.x from t left join r on r.k = t.k", "select t.k (or r.k) as a field"),
    ("select id from t left join r on r.id = t.id", "column 'id' needs a table alias"),
    ("select t.id, t.name as id from t", "field 'id' is selected twice"),
    ("select t.id, concat(t.a, t.b) from t", "needs a field name: add AS <name>"),
    ("select t.id from t left join r t on t.id = t.id", "table alias 't' is used twice"),
    ("select t.id from t left join r on r.id = t.id left join s on s.x = t.id where 1", "WHERE"),
    ("select t.id from t @", "unexpected character '@'"),
    ("with x as (select 1) select x.id from x", "WITH (common table expressions) is not supported"),
])
def test_refused_sql(sql, problem):
    assert problem in es_error(sql)


def test_refusal_says_where():
    assert es_error("select t.id from t\n  where t.id = 1").endswith("(near 'where t.id = 1')")
