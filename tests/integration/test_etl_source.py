"""The load's read side against the real MariaDB source.

* Values: a row read by the load's SELECT is the same Dml strings (and ``mysqlType``) the
  capture stage produces from the binlog, for the every-type golden row and the capture
  suite's edge-value table.
* Range splitting: integer, composite and string keys, an empty table and skewed integer keys
  are split into ranges that together read every row exactly once (paged by key).
* ``etlCondition`` with ``{}`` parameters (also on a joined table of an ES mapping).
"""

from __future__ import annotations

import uuid

import pymysql
import pytest

from pipeline.capture import run_capture
from pipeline.config import load_config
from pipeline.etl import partition as P
from pipeline.etl import source as S
from pipeline.etl.plan import TableLoad, table_loads
from pipeline.etl.values import row_decoder
from pipeline.mapping.model import parse_mapping
from tests.integration.test_capture_types import DDL, ROWS
from tests.integration.test_rdb_conformance import MariaEnv, apply
from tests.support import golden, sysbench
from tests.support.capture_check import all_records, mark_start, replay, write_config
from tests.support.golden import EVERY_TYPE


def _read_all(cfg, load: TableLoad) -> list[tuple]:
    """Every raw row of every range of ``load``, in order, through the executor's pager."""
    ctx = P.EtlContext(None, cfg.source, (load,), (), None)
    out = []
    for rng in load.ranges:
        for page in P.read_pages(ctx, load, rng):
            out += page
    return out


def _mirror(db: str, **extra):
    return parse_mapping({"dbMapping": {"mirrorDb": True, "database": db, **extra}}, "mirror.yml")


@pytest.fixture(scope="module")
def src_env(mariadb):
    env = MariaEnv(mariadb)  # a schema on the *source* server: what is written there is in the binlog
    yield env
    env.drop()


def test_select_strings_equal_binlog_strings(src_env, mariadb, tmp_path):
    env, db = src_env, src_env.schema
    config = write_config(mariadb, tmp_path, f"{db}\\..*")
    mark_start(config)
    route = env.create(EVERY_TYPE, name="every_type")
    apply(env, route, [[EVERY_TYPE.insert(golden.every_type_row())]])
    with sysbench.connect(mariadb, db) as conn, conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode='NO_ENGINE_SUBSTITUTION'")
        cur.execute("SET SESSION time_zone='America/New_York'")
        cur.execute(DDL.format(db=f"`{db}`"))
        for row in ROWS:
            cur.execute(f"INSERT INTO types VALUES {row}")
        cur.execute("UPDATE types SET vc='changed', bu=bu-1 WHERE id=1")
    cfg = load_config(config)
    run_capture(cfg)
    records = [r for r in all_records(str(cfg.store_dir()), db) if not r["isDdl"]]
    captured = replay(records)
    types = {r["table"]: r["mysqlType"] for r in records}
    conn = S.connect(cfg.source)
    try:
        loads = table_loads(conn, _mirror(db), 0, (), 1)
    finally:
        conn.close()
    assert {ld.meta.table for ld in loads} == {"every_type", "types"}
    for ld in loads:
        decode = row_decoder(ld.meta.columns)
        nk = len(ld.meta.pk)
        got = {tuple(d[k] for k in ld.meta.pk): d for d in (decode(r[nk:]) for r in _read_all(cfg, ld))}
        want = captured[f"{db}.{ld.meta.table}"]
        assert got.keys() == want.keys()
        for key, row in want.items():
            for col, value in row.items():
                assert got[key][col] == value, (ld.meta.table, key, col)
        assert ld.meta.mysql_types() == types[ld.meta.table], ld.meta.table
    every = next(ld for ld in loads if ld.meta.table == "every_type")
    assert every.meta.pk == ("id",)
    got = row_decoder(every.meta.columns)(_read_all(cfg, every)[0][1:])
    assert got == golden.every_type_row()  # and both equal the golden Dml strings


# -- range splitting -------------------------------------------------------------------------------
TABLES = {
    "int_pk": ("CREATE TABLE {t} (id BIGINT PRIMARY KEY, v INT)",
               "INSERT INTO {t} SELECT seq, seq % 7 FROM seq_1_to_20000"),
    "composite": ("CREATE TABLE {t} (region VARCHAR(10), n INT, v INT, PRIMARY KEY (region, n))",
                  "INSERT INTO {t} SELECT ELT(1 + seq % 5, 'eu', 'us', 'Asia', 'a', 'Ü'), seq, seq "
                  "FROM seq_1_to_12000"),
    "string_pk": ("CREATE TABLE {t} (code VARCHAR(40) PRIMARY KEY, v INT) DEFAULT CHARSET=utf8mb4",
                  "INSERT INTO {t} SELECT CONCAT(ELT(1 + seq % 4, 'a', 'B', 'é', 'Z'), MD5(seq)), seq "
                  "FROM seq_1_to_9000"),
    "empty": ("CREATE TABLE {t} (id INT PRIMARY KEY)", None),
    "skewed": ("CREATE TABLE {t} (id BIGINT UNSIGNED PRIMARY KEY, v INT)",
               "INSERT INTO {t} SELECT IF(seq <= 9000, seq, 1000000000000 + seq * 1000), seq FROM seq_1_to_12000"),
    "no_pk": ("CREATE TABLE {t} (a INT, b VARCHAR(5))", "INSERT INTO {t} SELECT seq, 'x' FROM seq_1_to_3000"),
}


@pytest.fixture(scope="module")
def split_db(mariadb):
    db = f"etl_split_{uuid.uuid4().hex[:6]}"
    with sysbench.connect(mariadb) as c, c.cursor() as cur:
        cur.execute("SET SESSION sql_log_bin = 0")
        cur.execute(f"CREATE DATABASE `{db}`")
        cur.execute(f"USE `{db}`")
        for name, (ddl, fill) in TABLES.items():
            cur.execute(ddl.format(t=name))
            if fill:
                cur.execute(fill.format(t=name))
            cur.execute(f"ANALYZE TABLE {name}")
    yield db
    with sysbench.connect(mariadb) as c, c.cursor() as cur:
        cur.execute("SET SESSION sql_log_bin = 0")
        cur.execute(f"DROP DATABASE `{db}`")


@pytest.mark.parametrize("table", list(TABLES))
def test_ranges_read_every_row_exactly_once(mariadb, tmp_path, split_db, table):
    cfg = load_config(write_config(mariadb, tmp_path, ".*"))
    conn = S.connect(cfg.source)
    try:
        m = parse_mapping({"dbMapping": {"database": split_db, "table": table, "targetTable": "x",
                                         "targetPk": {"id": "id"}, "mapAll": True, "readBatch": 777}}, "m.yml")
        load = table_loads(conn, m, 0, (), 4)[0]
        with conn.cursor() as cur:
            cur.execute(f"SELECT COUNT(*) FROM `{split_db}`.`{table}`")
            count = int(cur.fetchone()[0])
    finally:
        conn.close()
    ranges = load.ranges
    per_range = []
    for rng in ranges:
        per_range.append(len(_read_all(cfg, TableLoad(**{**load.__dict__, "ranges": (rng,)}))))
    rows = _read_all(cfg, load)
    nk = len(load.meta.pk)
    keys = [tuple(r[:nk]) if nk else tuple(r) for r in rows]
    assert len(rows) == count and sum(per_range) == count
    if nk:
        assert len(set(keys)) == count, "a key was read twice"
    if table in ("empty", "no_pk"):
        assert len(ranges) == 1
    else:
        assert len(ranges) == 4, ranges
        ideal = count / len(ranges)
        assert max(per_range) <= 2.2 * ideal, (table, per_range)  # balanced, skewed keys too


# -- etlCondition ----------------------------------------------------------------------------------
def test_etl_condition_with_params_filters_the_load(mariadb, tmp_path, split_db):
    cfg = load_config(write_config(mariadb, tmp_path, ".*"))
    m = parse_mapping({"dbMapping": {"database": split_db, "table": "int_pk", "targetTable": "x",
                                     "targetPk": {"id": "id"}, "mapAll": True,
                                     "etlCondition": "where v = {} and id <= {}"}}, "m.yml")
    conn = S.connect(cfg.source)
    try:
        load = table_loads(conn, m, 0, ("3", "10000"), 3)[0]
        with pytest.raises(Exception, match="placeholder"):
            table_loads(conn, m, 0, ("3",), 3)
    finally:
        conn.close()
    rows = _read_all(cfg, load)
    assert len(rows) == sum(1 for i in range(1, 10001) if i % 7 == 3)
    assert all(r[2] == "3" for r in rows)


def test_es_condition_may_read_a_joined_table(mariadb, tmp_path, split_db):
    cfg = load_config(write_config(mariadb, tmp_path, ".*"))
    m = parse_mapping({"esMapping": {
        "_index": "x", "_id": "id", "etlCondition": "where c.region = {}",
        "sql": f"select a.id, a.v, c.region from {split_db}.int_pk a "
               f"left join {split_db}.composite c on c.n = a.id"}}, "es.yml")
    conn = S.connect(cfg.source)
    try:
        load = table_loads(conn, m, 0, ("eu",), 2)[0]
    finally:
        conn.close()
    rows = _read_all(cfg, load)
    assert load.meta.table == "int_pk" and [c.name for c in load.meta.columns] == ["id", "v"]
    assert sorted(int(r[0]) for r in rows) == [n for n in range(1, 12001) if n % 5 == 0]  # region 'eu'


def test_broken_source_connection_is_a_transient_error(mariadb):
    from pipeline.config import SourceConfig
    from sluice_common.errors import SourceError, TransientError

    with pytest.raises((TransientError, SourceError)):
        S.connect(SourceConfig(host="127.0.0.1", port=1, user="root", connectTimeout=2))
    assert S.is_transient(pymysql.err.OperationalError(2013, "Lost connection"))
    assert not S.is_transient(pymysql.err.ProgrammingError(1064, "syntax"))
