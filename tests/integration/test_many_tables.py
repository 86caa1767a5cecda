"""Many mirrored tables (issue 38, point 5): a replayed DDL costs the same whatever the number of
tables before it. The driver reads the target's key rules before the DML after a DDL
(``GroupPlan.key_plan``); a DDL replayed on one table forgets only that table's reflection, and a
mirrored database is reflected a few hundred tables per query. Counted here on the real target:
the tables reflected over 40 CREATE TABLEs each followed by the key rules, against the 820 that
reflecting every table again after each DDL reads; and an ALTER is seen (its table re-read).
The source defaults a replayed CREATE/ALTER needs are read on one source connection per sync
(a new connection per DDL was most of a DDL's cost: a login and a TLS context)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import yaml

from adapters.base import DdlChange
from adapters.rdb import make_writer, schema
from adapters.rdb.factory import key_rules
from pipeline.config import parse_config
from pipeline.job import collations
from pipeline.mapping import load_mapping
from tests.integration.test_rdb_conformance import MariaEnv
from tests.support import sysbench

N = 40


@pytest.fixture
def maria(mariadb_target):
    e = MariaEnv(mariadb_target)
    yield e
    e.drop()


def _replay(env: MariaEnv, mapping, ddl: DdlChange) -> None:
    w = make_writer(env.target, (mapping,))
    w.open()
    try:
        w.apply_ddl(mapping, ddl)
        w.commit()
    finally:
        w.close()


def test_a_replayed_ddl_reflects_only_what_it_changed(maria, tmp_path, monkeypatch):
    path = tmp_path / "m.yml"
    path.write_text(yaml.safe_dump({"outerAdapterKey": "t", "dbMapping": {"mirrorDb": True, "database": "srcdb",
                                                                         "targetDb": maria.schema}}))
    mapping = load_mapping(path)
    reflected: list[str] = []
    real = schema._reflect_mysql_many

    def counting(conn, sch, tables, *more):
        reflected.extend(tables)
        return real(conn, sch, tables, *more)
    monkeypatch.setattr(schema, "_reflect_mysql_many", counting)
    schema.reset_caches()
    for i in range(N):
        _replay(maria, mapping, DdlChange("CREATE", "srcdb", f"t{i:02d}", f"CREATE TABLE srcdb.t{i:02d} "
                                          "(id INT PRIMARY KEY, v VARCHAR(10))", seq=(1, i + 1, 0)))
        rules = key_rules(maria.target, "rdb:t", [(0, mapping)])  # what the driver reads before the next DML
    assert not rules.ordered and len(maria.run(f"SHOW TABLES FROM {maria.q(maria.schema)}")) == N + 1  # + the ledger
    assert len(reflected) <= 2 * N, f"{len(reflected)} tables reflected for {N} DDLs"
    _replay(maria, mapping, DdlChange("ALTER", "srcdb", "t07", "ALTER TABLE srcdb.t07 ADD UNIQUE KEY uv (v)",
                                      seq=(1, N + 1, 0)))
    rules = key_rules(maria.target, "rdb:t", [(0, mapping)])
    assert set(rules.ordered) == {(0, "t07")}, "a second unique key orders the table: its reflection was renewed"


def test_the_source_defaults_of_a_run_of_ddls_are_read_on_one_connection(mariadb, monkeypatch):
    cfg = parse_config({"source": {k: mariadb[k] for k in ("host", "port", "user", "password")}})
    opened = []
    real = collations.connect_source

    def counting(c):
        opened.append(real(c))
        return opened[-1]
    monkeypatch.setattr(collations, "connect_source", counting)
    reader = collations.source_charsets_reader(SimpleNamespace(config=cfg, mappings=()))
    try:
        first = reader()
        assert first.charsets and all(reader() == first for _ in range(20)) and len(opened) == 1
        with sysbench.connect(mariadb) as c, c.cursor() as cur:  # the source ends it (a restart, a KILL)
            cur.execute(f"KILL CONNECTION {opened[0].thread_id()}")
        assert reader() == first and len(opened) == 2, "a lost connection is replaced, the read tried again"
    finally:
        reader.close()
    assert not opened[1].open
