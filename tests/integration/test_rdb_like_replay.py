"""``CREATE TABLE t LIKE other.s`` replayed on a real MariaDB mirror, ``other`` a database no
mapping of the target mirrors (adapters/rdb/like.py; issue 35 case 10): with the definition the job
read from the source the effect is replayed (LIKE's own rules: no foreign key, no counter), without
it the replay is refused naming the statement, its position and the table, and the fix the message
names (create the table, sync again) works. The e2e test_mirror_foreign_ddl.py runs the path
through capture and Spark."""

from __future__ import annotations

import pytest

from adapters.base import DdlChange
from adapters.rdb import RdbTable, make_writer
from sluice_common.errors import TargetError
from tests.integration.test_rdb_conformance import MariaEnv

#: ``SHOW CREATE TABLE tmpl.t`` as MariaDB 10.11 prints it
DEFINITION = ("CREATE TABLE `t` (\n  `id` int(11) NOT NULL AUTO_INCREMENT,\n  `p` int(11) DEFAULT NULL,\n"
              "  `n` varchar(5) NOT NULL DEFAULT 'x',\n  PRIMARY KEY (`id`),\n  KEY `p` (`p`),\n"
              "  CONSTRAINT `t_ibfk_1` FOREIGN KEY (`p`) REFERENCES `p` (`id`),\n"
              "  CONSTRAINT `n_set` CHECK (`n` <> '')\n"
              ") ENGINE=InnoDB AUTO_INCREMENT=1001 DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci")


@pytest.fixture(scope="module")
def maria(mariadb_target):
    e = MariaEnv(mariadb_target)
    yield e
    e.drop()


def _tables(env: MariaEnv) -> set[str]:
    return {r[0] for r in env.run("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s",
                                  (env.schema,))}


def test_the_effect_is_replayed_from_the_definition_read_at_the_source(maria):
    mirror = RdbTable(target_table="", target_schema=maria.schema, mirror_ddl=True)
    ddl = DdlChange("CREATE", "shop", "a", "CREATE TABLE a LIKE tmpl.t", seq=(3, 16, 0), like=(DEFINITION, ""))
    w = make_writer(maria.target, (mirror,))
    w.apply_ddl(mirror, ddl)
    w.apply_ddl(mirror, ddl)  # a replayed batch: the ledger says applied
    show = maria.run(f"SHOW CREATE TABLE {maria.qt('a')}")[0][1]
    assert "FOREIGN KEY" not in show and "AUTO_INCREMENT=" not in show
    assert "DEFAULT 'x'" in show and "KEY `p` (`p`)" in show and "CHECK (`n` <> '')" in show
    assert not {t for t in _tables(maria) if t.startswith("_sluice_like_")}


def test_an_unknown_definition_is_refused_by_name_and_the_fix_works(maria):
    mirror = RdbTable(target_table="", target_schema=maria.schema, mirror_ddl=True)
    why = "tmpl.u was last created, altered or renamed at 1795788001 (Unix time), not before the statement ran"
    ddl = DdlChange("CREATE", "shop", "b", "CREATE TABLE b (LIKE tmpl.u)", seq=(3, 17, 0), like=("", why))
    w = make_writer(maria.target, (mirror,))
    for _ in range(2):  # the next run stops at it again: never applied approximately
        with pytest.raises(TargetError) as e:
            w.apply_ddl(mirror, ddl)
        assert "`CREATE TABLE b (LIKE tmpl.u)` (shop, batch 3 seq 17)" in e.value.message
        assert "copies tmpl.u" in e.value.message and why in e.value.message
        assert e.value.hint.startswith(f"create {maria.schema}.b on the target as the source created it")
        assert e.value.table == "shop.b" and "b" not in _tables(maria)
    maria.run(f"CREATE TABLE {maria.qt('b')} (id int PRIMARY KEY, v int)")  # the fix, then sync again
    w.apply_ddl(mirror, ddl)
    w.apply_ddl(mirror, ddl)


def test_a_timestamp_default_is_the_instant_the_source_copied(maria):
    """The definition was read in a UTC session (its TIMESTAMP default printed in UTC), and the LIKE
    ran in a session zone of its own (the binlog names it): the copy's default is the source's
    instant, not the UTC text read again in the statement's zone."""
    mirror = RdbTable(target_table="", target_schema=maria.schema, mirror_ddl=True)
    definition = ("CREATE TABLE `s` (\n  `id` int(11) NOT NULL,\n"
                  "  `t` timestamp NOT NULL DEFAULT '2001-01-01 00:00:00',\n  PRIMARY KEY (`id`)\n"
                  ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci")
    ddl = DdlChange("CREATE", "shop", "c", "CREATE TABLE c LIKE tmpl.s", seq=(3, 18, 0), like=(definition, ""),
                    time_zone="America/New_York")
    w = make_writer(maria.target, (mirror,))
    w.apply_ddl(mirror, ddl)
    maria.run(f"INSERT INTO {maria.qt('c')} (id) VALUES (1)")
    assert maria.run(f"SELECT UNIX_TIMESTAMP(t) FROM {maria.qt('c')}") == [(978307200,)]  # 2001-01-01 00:00 UTC
