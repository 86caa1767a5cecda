"""RDB target config: canal jdbc properties, SQLAlchemy URLs, errors naming file and key (no services)."""

from __future__ import annotations

import pickle

import pytest

from adapters.rdb import RdbTable, RdbTarget, target_from_adapter
from pipeline.mapping import parse_mapping
from sluice_common.errors import ConfigError
from sluice_common.secrets import Secret

F, K = "sluice.yml", "groups[0].outerAdapters[1]"


def test_canal_mysql_jdbc_properties():
    t = RdbTarget.from_properties({"jdbc.driverClassName": "com.mysql.jdbc.Driver",
                                   "jdbc.url": "jdbc:mysql://127.0.0.1:3306/mytest2?useUnicode=true&useSSL=false",
                                   "jdbc.username": "root", "jdbc.password": 121212}, F, K)
    assert (t.dialect, t.host, t.port, t.database, t.username) == ("mysql", "127.0.0.1", 3306, "mytest2", "root")
    assert t.password == Secret("121212") and t.tls.mode == "disable"
    assert "121212" not in t.label and "121212" not in repr(t)
    assert t.url().render_as_string(hide_password=False).startswith("mysql+pymysql://root:121212@")
    assert pickle.loads(pickle.dumps(t)) == t and hash(t) == hash(pickle.loads(pickle.dumps(t)))


def test_canal_postgresql_and_sqlite_jdbc_urls():
    t = RdbTarget.from_properties({"jdbc.url": "jdbc:postgresql://db.example:5433/postgres?sslmode=verify-full"
                                   "&currentSchema=app", "jdbc.username": "pg"}, F, K)
    assert (t.dialect, t.port, t.tls.mode) == ("postgresql", 5433, "verify-full")
    assert dict(t.query)["options"] == "-c search_path=app"
    s = RdbTarget.from_properties({"jdbc.url": "jdbc:sqlite:/tmp/x.db"}, F, K)
    assert (s.dialect, s.database) == ("sqlite", "/tmp/x.db")


def test_sqlalchemy_url_and_password_env(monkeypatch):
    monkeypatch.setenv("TGT_PW", "from-env")
    t = RdbTarget.from_properties({"url": "mariadb+pymysql://app@h:3307/d", "jdbc.passwordEnv": "TGT_PW",
                                   "pool.size": "8", "tls.mode": "require"}, F, K)
    assert (t.dialect, t.password.reveal(), t.pool_size, t.tls.mode) == ("mariadb", "from-env", 8, "require")


@pytest.mark.parametrize(("props", "key", "text"), [
    ({}, "jdbc.url", "is required"),
    ({"jdbc.url": "mysql://h/db"}, "jdbc.url", "must start with 'jdbc:'"),
    ({"jdbc.url": "jdbc:oracle:thin:@localhost:49161:XE"}, "jdbc.url", "'oracle' is not supported"),
    ({"jdbc.url": "jdbc:mysql://a:1,b:2/db"}, "jdbc.url", "multi-host"),
    ({"jdbc.url": "jdbc:mysql://h/db", "pool.size": 0}, "pool.size", "positive integer"),
    ({"jdbc.url": "jdbc:mysql://h/db", "tls.mode": "maybe"}, "tls.mode", "must be one of"),
    ({"url": "mssql+pyodbc://h/db"}, "url", "'mssql' is not supported"),
    ({"jdbc.url": "jdbc:mysql://h/db", "jdbc.password": "x", "jdbc.passwordEnv": "Y"}, "jdbc.passwordEnv",
     "give only one"),
])
def test_bad_properties_name_file_and_key(props, key, text):
    with pytest.raises(ConfigError) as exc:
        RdbTarget.from_properties(props, F, K)
    assert exc.value.file == F and exc.value.key == f"{K}.properties.{key}" and text in exc.value.problem


def test_target_from_outer_adapter_uses_its_key():
    class Adapter:
        name, key = "rdb", "mysql1"
        properties = {"jdbc.url": "jdbc:mysql://h:3306/d", "jdbc.username": "u", "jdbc.password": "p"}
    t = target_from_adapter(Adapter(), F, K)
    assert t.key == "mysql1" and t.label == "mysql+pymysql://u@h:3306/d (mysql1)"


def test_route_from_canal_db_mapping():
    m = parse_mapping({"dataSourceKey": "defaultDS", "destination": "example", "outerAdapterKey": "mysql1",
                       "dbMapping": {"database": "mytest", "table": "user", "targetTable": "mytest2.user",
                                     "targetPk": {"id": "id"}, "targetColumns": {"id": None, "name": None,
                                                                                 "role": "role_id"}}}, "user.yml")
    r = RdbTable.from_mapping(m, "user")
    assert (r.target_schema, r.target_table, r.pk) == ("mytest2", "user", (("id", "id"),))
    assert set(r.columns) == {("id", "id"), ("name", "name"), ("role_id", "role")} and r.origin == "user.yml"
    mirror = parse_mapping({"dbMapping": {"mirrorDb": True, "database": "mytest", "targetDb": "copy"}}, "m.yml")
    rm = RdbTable.from_mapping(mirror, "orders")
    assert (rm.target_schema, rm.target_table, rm.columns, rm.pk, rm.mirror_ddl) == ("copy", "orders", None, None,
                                                                                     True)
