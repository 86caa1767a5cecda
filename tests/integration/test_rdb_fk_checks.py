"""Changes the source applied with foreign key checks off are applied so on the target, in the
order the binlog has them: MySQL 9 (``innodb_native_foreign_keys=OFF``) runs cascades in the SQL
layer and logs the cascaded child rows, flagged ``NO_FOREIGN_KEY_CHECKS``, *ahead of* the parent
row that caused them. Here are the rows MySQL 9.7 logged for ``UPDATE p SET id = 1002 WHERE id =
2`` and then ``DELETE FROM p WHERE id = 1002`` (children ``ON UPDATE/DELETE CASCADE``, grandchildren
``ON DELETE SET NULL``), applied in that order into MariaDB, MySQL and PostgreSQL targets
with the same foreign keys: the child moved to parent 1002 before that parent exists must not be
refused (``1452``), and the target's own cascades, running for the parent rows, find nothing left
to do. Without the flag (``fk_checks`` True) the first change is refused, as before."""

from __future__ import annotations

import pytest

from adapters.base import Change
from adapters.rdb import RdbTable, make_writer
from adapters.rdb.config import RdbTarget
from sluice_common.errors import TargetError
from tests.integration.test_rdb_conformance import MariaEnv, PgEnv


class MysqlEnv(MariaEnv):
    def __init__(self, info: dict):
        super().__init__(info)
        self.target = RdbTarget.from_url(f"mysql+pymysql://{info['user']}@{info['host']}:{info['port']}/"
                                         f"{self.schema}", password=info["password"])


@pytest.fixture(params=["mariadb_target", "mysql_target", "postgres"])
def db(request):
    info = request.getfixturevalue(request.param)
    e = {"mariadb_target": MariaEnv, "mysql_target": MysqlEnv, "postgres": PgEnv}[request.param](info)
    e.run(f"CREATE TABLE {e.qt('p')} (id INT PRIMARY KEY)")
    e.run(f"CREATE TABLE {e.qt('c')} (id INT PRIMARY KEY, pid INT, CONSTRAINT fk_c FOREIGN KEY (pid) "
          f"REFERENCES {e.qt('p')} (id) ON DELETE CASCADE ON UPDATE CASCADE)")
    e.run(f"CREATE TABLE {e.qt('gc')} (id INT PRIMARY KEY, cid INT, CONSTRAINT fk_gc FOREIGN KEY (cid) "
          f"REFERENCES {e.qt('c')} (id) ON DELETE SET NULL ON UPDATE CASCADE)")
    e.run(f"INSERT INTO {e.qt('p')} VALUES (1), (2)")
    e.run(f"INSERT INTO {e.qt('c')} VALUES (20, 2), (21, 2)")
    e.run(f"INSERT INTO {e.qt('gc')} VALUES (100, 20), (101, 21)")
    yield e
    e.drop()


def _ch(kind, table, data, old=None, checks=True) -> Change:
    return Change(kind, "src", table, data, old, ("id",), {c: "int" for c in data}, (1, 0, 0), True, checks)


#: as MySQL 9.7 logged them (event flags 0x12 for the cascaded rows: NO_FOREIGN_KEY_CHECKS_F | USE_SQL_FOREIGN_KEY_F)
LOGGED = [
    _ch("UPDATE", "c", {"id": "20", "pid": "1002"}, {"pid": "2"}, checks=False),
    _ch("UPDATE", "c", {"id": "21", "pid": "1002"}, {"pid": "2"}, checks=False),
    _ch("UPDATE", "p", {"id": "1002"}, {"id": "2"}),
    _ch("DELETE", "c", {"id": "20", "pid": "1002"}, checks=False),
    _ch("UPDATE", "gc", {"id": "100", "cid": None}, {"cid": "20"}, checks=False),
    _ch("DELETE", "c", {"id": "21", "pid": "1002"}, checks=False),
    _ch("UPDATE", "gc", {"id": "101", "cid": None}, {"cid": "21"}, checks=False),
    _ch("DELETE", "p", {"id": "1002"}),
]


def _apply(env, changes: list[Change]) -> None:
    routes = {t: RdbTable(target_table=t, target_schema=env.schema) for t in ("p", "c", "gc")}
    w = make_writer(env.target, tuple(routes.values()))
    w.track("store-x:g1")
    w.open()
    try:
        for i, c in enumerate(changes):  # a chunk per change here: each route is one table
            w.apply(routes[c.table], [c._replace(seq=(1, i, 0))])
            w.commit()
    except BaseException:
        w.rollback()
        raise
    finally:
        w.close()


def test_rows_logged_without_foreign_key_checks_apply_in_logged_order(db):
    _apply(db, LOGGED)
    assert db.run(f"SELECT id FROM {db.qt('p')} ORDER BY id") == [(1,)]
    assert db.run(f"SELECT id FROM {db.qt('c')} ORDER BY id") == []
    assert db.run(f"SELECT id, cid FROM {db.qt('gc')} ORDER BY id") == [(100, None), (101, None)]


def test_with_checks_the_child_ahead_of_its_parent_is_refused(db):
    with pytest.raises(TargetError, match="1452|23503"):
        _apply(db, [c._replace(fk_checks=True) for c in LOGGED])
