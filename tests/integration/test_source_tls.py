"""A source that *requires* TLS: the deployment's source user is created ``REQUIRE X509``, so a
connection in clear is refused (access denied), and so is one that forgets ``source.ssl`` (pymysql
tries TLS on its own, which would pass a ``REQUIRE SSL``, but presents the client certificate only
from ``source.ssl``): any step that does not build its connection from the source's settings fails.
Through the CLI: ``sluice run`` (pre-flight checks of the server and the mapped tables, capture,
sync), ``status`` (the source's binlog end), ``etl`` (the full load's reads) and ``verify``
(source reads) all succeed with ``source.ssl`` set to the suite's CA, and the target equals the
source. The suite's MariaDB offers TLS with a throw-away CA (scripts/svc/mariadb.py)."""

from __future__ import annotations

import json
import uuid

import pymysql
import pytest
import yaml

from tests.support import sysbench
from tests.support.compare import table_rows
from tests.support.deploy import rdb_adapter, sluice, write_deployment

USER, PASSWORD = "sluice_tls", "tls-only-pw-5678"


def _sql(info: dict, *stmts: str, **kw) -> None:
    with sysbench.connect(info, **kw) as conn, conn.cursor() as cur:
        for s in stmts:
            cur.execute(s)


@pytest.fixture
def tls_source(mariadb) -> dict:
    """The suite's source, as a user that may connect only over TLS."""
    if not mariadb.get("ssl_ca"):
        pytest.fail("the suite's MariaDB offers no TLS (started by an older scripts/svc/mariadb.py): "
                    "restart it with `scripts/services stop mariadb; scripts/services start mariadb`")
    _sql(mariadb, f"CREATE OR REPLACE USER '{USER}'@'127.0.0.1' IDENTIFIED BY '{PASSWORD}' REQUIRE X509",
         f"GRANT ALL ON *.* TO '{USER}'@'127.0.0.1'")
    info = dict(mariadb, user=USER, password=PASSWORD)
    ssl = {"ca": mariadb["ssl_ca"], "cert": mariadb["ssl_cert"], "key": mariadb["ssl_key"]}
    for how in ({"ssl_disabled": True}, {}, {"ssl": {"ca": mariadb["ssl_ca"]}}):  # the premise: refused
        with pytest.raises(pymysql.err.OperationalError) as refused:
            _sql(info, "SELECT 1", **how)
        assert refused.value.args[0] == 1045, (how, refused.value)
    with sysbench.connect(info, ssl=ssl) as conn, conn.cursor() as cur:
        cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        assert (cur.fetchone() or ("", ""))[1], "the TLS user's connection is not encrypted"
    yield dict(info, ssl=ssl)
    _sql(mariadb, f"DROP USER IF EXISTS '{USER}'@'127.0.0.1'")


@pytest.fixture
def dep(tmp_path, tls_source, mariadb, mariadb_target):
    db = f"tls_{uuid.uuid4().hex[:6]}"
    _sql(mariadb, f"CREATE DATABASE `{db}`", f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v VARCHAR(10), "
         "ts TIMESTAMP(3) NULL, b VARBINARY(8))", f"CREATE TABLE `{db}`.e (id INT PRIMARY KEY, v VARCHAR(10))")
    _sql(mariadb_target, f"CREATE DATABASE `{db}_copy`",
         f"CREATE TABLE `{db}_copy`.t (id INT PRIMARY KEY, v VARCHAR(10), ts TIMESTAMP(3) NULL, b VARBINARY(8))",
         f"CREATE TABLE `{db}_copy`.e (id INT PRIMARY KEY, v VARCHAR(10))")
    table = {"groupId": "g1", "outerAdapterKey": "tgt", "dbMapping": {
        "database": db, "table": "t", "targetTable": f"{db}_copy.t", "targetPk": {"id": "id"}, "mapAll": True}}
    etl = {"groupId": "g1", "outerAdapterKey": "tgt", "dbMapping": {
        "database": db, "table": "e", "targetTable": f"{db}_copy.e", "targetPk": {"id": "id"}, "mapAll": True}}
    cfg = write_deployment(tmp_path, tls_source, name=db, include=rf"{db}\.(t|e)", master="local[1]", partitions=2,
                           groups=[{"groupId": "g1", "outerAdapters": [rdb_adapter(mariadb_target, "tgt",
                                                                                   f"{db}_copy")],
                                    "mappings": ["mappings/rdb/*.yml"]}],
                           mappings={"rdb/t.yml": table, "rdb/e.yml": etl})
    raw = yaml.safe_load(cfg.read_text())
    raw["source"]["ssl"] = tls_source["ssl"]  # verifies the server's certificate and host name; ours
    cfg.write_text(yaml.safe_dump(raw, sort_keys=False))
    yield {"cfg": str(cfg), "db": db}
    _sql(mariadb, f"DROP DATABASE IF EXISTS `{db}`")
    _sql(mariadb_target, f"DROP DATABASE IF EXISTS `{db}_copy`")


def test_every_step_connects_over_tls_to_a_source_that_requires_it(dep, mariadb, mariadb_target):
    cfg, db = dep["cfg"], dep["db"]
    sluice("capture", "--config", cfg, "--once")  # pre-flight of the server, then the binlog's end
    _sql(mariadb, f"INSERT INTO `{db}`.t VALUES (1, 'a', '2024-03-10 12:30:00.125', x'00ff'), (2, 'b', NULL, NULL)",
         f"UPDATE `{db}`.t SET v = 'c' WHERE id = 2", f"INSERT INTO `{db}`.e VALUES (1, 'x'), (2, 'y')")
    run = sluice("run", "--config", cfg, "--json")  # pre-flight (server, mapped tables), capture, sync
    rec = json.loads(run.stdout.strip().splitlines()[-1])
    assert rec["status"] == "ok", rec
    assert rec["sync"]["g1"]["inserted"] == {f"{db}.t": 2, f"{db}.e": 2}, rec
    assert table_rows(mariadb, db, "t") == table_rows(mariadb_target, f"{db}_copy", "t")
    st = json.loads(sluice("status", "--config", cfg, "--json").stdout)
    assert st["source"]["capture"]["behind_bytes"] == 0, st["source"]
    sluice("etl", "--config", cfg, "--group", "g1", "--mapping", "e.yml")  # the full load's reads
    assert table_rows(mariadb, db, "e") == table_rows(mariadb_target, f"{db}_copy", "e")
    out = sluice("verify", "--config", cfg, "--json", check=False)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]


def test_source_ssl_disabled_connects_in_plain_text(mariadb):
    """``source.ssl: {disabled: true}``: the source connections (the binlog dump's too: the same
    settings) are plain text on a server that offers TLS; without it they are encrypted."""
    from pipeline.config import parse_config
    from pipeline.source.connect import connect

    def cipher(ssl: dict | None) -> str:
        src = {"host": mariadb["host"], "port": mariadb["port"], "user": mariadb["user"],
               "password": mariadb["password"], **({"ssl": ssl} if ssl is not None else {})}
        conn = connect(parse_config({"source": src}, "sluice.yml", env={}).source)
        try:
            with conn.cursor() as cur:
                cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
                return (cur.fetchone() or ("", ""))[1]
        finally:
            conn.close()

    assert cipher(None), "the suite's MariaDB offers TLS and pymysql takes it by default"
    assert cipher({"disabled": True}) == ""
