"""``sluice verify`` against the real targets: MariaDB (checksums), PostgreSQL (normalized rows),
Elasticsearch and HBase (counts + samples). Targets are filled through the adapters' own
writers from Dml text, then differences are planted and must be listed exactly."""

from __future__ import annotations

import json
import uuid

import happybase
import psycopg
import pymysql
import pytest
import yaml
from elasticsearch import Elasticsearch

from adapters.base import Change
from adapters.registry import make_writer
from pipeline.config import load_config
from pipeline.job.group import load_group
from pipeline.ops.verify import verify
from pipeline.ops.verify_source import source_columns
from sluice_common.normalize import dml_text
from tests.support.deploy import rdb_adapter, sluice

TYPED = ("CREATE TABLE typed (region VARCHAR(8) NOT NULL, id INT NOT NULL, u BIGINT UNSIGNED, b BIT(10), "
         "t1 TINYINT(1), f FLOAT, d DOUBLE, dc DECIMAL(12,3), dt DATETIME(6), ts TIMESTAMP(3) NULL, dd DATE, "
         "tm TIME(6), y YEAR, j JSON, bin VARBINARY(8), e ENUM('a','b'), s SET('x','y'), "
         "txt TEXT CHARACTER SET utf8mb4, ch CHAR(4), PRIMARY KEY (region, id))")
PG_TYPED = ("CREATE TABLE {t} (region varchar(8), id integer, u numeric(20,0), b bit varying(10), t1 smallint, "
            "f real, d double precision, dc numeric(12,3), dt timestamp(6), ts timestamptz(3), dd date, tm interval, "
            "y smallint, j jsonb, bin bytea, e text, s text, txt text, ch char(4), PRIMARY KEY (region, id))")


def _conn(info: dict, db: str | None = None):
    return pymysql.connect(host=info["host"], port=info["port"], user=info["user"], password=info["password"],
                           database=db, autocommit=True, charset="utf8mb4")


def _rows(i: int) -> tuple:
    """Row ``i`` of ``typed``; row 7 has zero dates (PostgreSQL holds them as -infinity, which verify
    could not read: a new user's probe)."""
    return ("eu" if i % 2 else "us", i, 18446744073709551615 - i, i % 1024, i % 3, i / 7, i / 3, f"{i}.125",
            "0000-00-00 00:00:00" if i == 7 else f"2024-03-10 02:30:00.{i:06d}", f"2024-11-03 05:30:00.{i % 1000:03d}",
            "2024-00-10" if i == 7 else "2024-02-29",
            f"-{i % 838}:59:59.5", 1901 + i % 200, json.dumps({"k": i, "ü": [1, "🚀"]}), bytes([0, i % 256, 255]),
            "ab"[i % 2], "x,y" if i % 3 else "", f"text ü🚀 {i}", "ab" if i % 2 else None)


@pytest.fixture(scope="module")
def dep(tmp_path_factory, mariadb, mariadb_target, postgres, elasticsearch, hbase):
    tmp = tmp_path_factory.mktemp("ops_verify")
    db = f"opsv_{uuid.uuid4().hex[:6]}"
    tdb, pgt, index, htable = f"{db}_copy", f"{db}_typed", f"{db.replace('_', '-')}-people", f"OPSV_{db[-6:]}"
    with _conn(mariadb) as c, c.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{db}`")
        cur.execute(f"USE `{db}`")
        cur.execute("SET time_zone = '+00:00', sql_mode = ''")  # zero dates
        cur.execute(TYPED)
        cur.executemany("INSERT INTO typed VALUES (" + ", ".join(["%s"] * 19) + ")", [_rows(i) for i in range(1, 121)])
        cur.execute("CREATE TABLE nokey (a INT, b VARCHAR(10))")
        cur.executemany("INSERT INTO nokey VALUES (%s, %s)", [(i % 5, f"v{i % 3}") for i in range(30)])
        cur.execute("CREATE TABLE people (id BIGINT PRIMARY KEY, name VARCHAR(40), score INT, born DATETIME)")
        cur.executemany("INSERT INTO people VALUES (%s, %s, %s, %s)",
                        [(i, f"p{i} ü", i * 10, f"2020-01-{i % 28 + 1:02d} 10:00:00") for i in range(1, 81)])
        cur.execute("CREATE TABLE amounts (id BIGINT PRIMARY KEY, name VARCHAR(40), amount DECIMAL(10,2), "
                    "ratio DOUBLE)")
        cur.executemany("INSERT INTO amounts VALUES (%s, %s, %s, %s)",
                        [(i, f"a{i}" if i % 4 else None, f"{i}.50", i / 9) for i in range(1, 61)])
    with _conn(mariadb_target) as c, c.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{tdb}`")
    pg = psycopg.connect(host=postgres["host"], port=postgres["port"], user=postgres["user"],
                         password=postgres["password"], dbname=postgres["database"], autocommit=True)
    pg.execute(PG_TYPED.format(t=pgt))
    mappings = {
        "rdb/mirror.yml": {"groupId": "gmy", "outerAdapterKey": "my",
                           "dbMapping": {"mirrorDb": True, "database": db, "targetDb": tdb}},
        "rdb/pg.yml": {"groupId": "gpg", "outerAdapterKey": "pg", "dbMapping": {
            "database": db, "table": "typed", "targetTable": pgt, "targetPk": {"region": "region", "id": "id"},
            "mapAll": True}},
        "es/people.yml": {"groupId": "ges", "outerAdapterKey": "es", "esMapping": {
            "_index": index, "_id": "_id", "sql": "SELECT p.id AS _id, p.name, p.score, p.born FROM people p"}},
        "hbase/amounts.yml": {"groupId": "ghb", "outerAdapterKey": "hb", "hbaseMapping": {
            "mode": "STRING", "database": db, "table": "amounts", "hbaseTable": htable, "autoCreateTable": True,
            "columns": {"id": "ROWKEY", "name": "NAME"}}},
    }
    for f, body in mappings.items():
        (tmp / "mappings" / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp / "mappings" / f).write_text(yaml.safe_dump(body, sort_keys=False))
    cfg = {"source": {"name": db, "host": mariadb["host"], "port": mariadb["port"], "user": mariadb["user"],
                      "password": mariadb["password"]},
           "srcDataSources": {"defaultDS": {"url": f"jdbc:mysql://{mariadb['host']}:{mariadb['port']}/{db}",
                                            "username": mariadb["user"], "password": mariadb["password"]}},
           "store": {"path": str(tmp / "store")},
           "groups": [
               {"groupId": "gmy", "outerAdapters": [rdb_adapter(mariadb_target, "my", tdb)],
                "mappings": ["mappings/rdb/mirror.yml"]},
               {"groupId": "gpg", "outerAdapters": [rdb_adapter(postgres, "pg", postgres["database"], "postgresql")],
                "mappings": ["mappings/rdb/pg.yml"]},
               {"groupId": "ges", "outerAdapters": [{"name": "es8", "key": "es", "hosts": elasticsearch["url"]}],
                "mappings": ["mappings/es/*.yml"]},
               {"groupId": "ghb", "outerAdapters": [{"name": "hbase", "key": "hb",
                                                     "hosts": f"{hbase['host']}:{hbase['port']}"}],
                "mappings": ["mappings/hbase/*.yml"]}]}
    path = tmp / "sluice.yml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    config = load_config(path)
    _fill(config, mariadb, mariadb_target, db, tdb)
    yield {"cfg": config, "path": path, "db": db, "tdb": tdb, "pg": pg, "pgt": pgt, "index": index,
           "htable": htable, "es": Elasticsearch(elasticsearch["url"]), "hbase": hbase}
    with _conn(mariadb) as c, c.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{db}`")
    with _conn(mariadb_target) as c, c.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{tdb}`")
    pg.execute(f'DROP TABLE IF EXISTS "{pgt}"')
    pg.close()
    Elasticsearch(elasticsearch["url"]).indices.delete(index=index, ignore_unavailable=True)
    conn = happybase.Connection(hbase["host"], hbase["port"])
    if htable.encode() in conn.tables():
        conn.delete_table(htable, disable=True)


def _changes(src: dict, db: str, table: str) -> list[Change]:
    with _conn(src, db) as c, c.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
        cols, pk = source_columns(cur, db, table)
        # FLOAT as the stored float32 (its text has 6 digits), as capture and the full load send it
        cur.execute(f"SELECT {', '.join(f'CAST(`{n}` AS DOUBLE)' if dt == 'float' else f'`{n}`' for n, dt, _ in cols)} "
                    f"FROM `{table}`")
        rows = cur.fetchall()
    types = {n: ct for n, _, ct in cols}
    return [Change("INSERT", db, table, {n: dml_text(dt, ct, v) for (n, dt, ct), v in zip(cols, r, strict=True)},
                   pk_names=tuple(pk), mysql_type=types) for r in rows]


def _fill(cfg, src, tgt, db, tdb) -> None:
    with _conn(src, db) as a, _conn(tgt, tdb) as b, a.cursor() as ca, b.cursor() as cb:
        for t in ("typed", "nokey", "people", "amounts"):  # the mirror: the same DDL, rows copied in UTC sessions
            ca.execute(f"SHOW CREATE TABLE `{t}`")
            cb.execute(ca.fetchone()[1])
            ca.execute("SET time_zone = '+00:00'")
            cb.execute("SET time_zone = '+00:00', sql_mode = ''")
            ca.execute("SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s "
                       "AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION", (db, t))
            sel = ", ".join(f"CAST(`{n}` AS DOUBLE)" if dt == "float" else f"`{n}`" for n, dt in ca.fetchall())
            ca.execute(f"SELECT {sel} FROM `{t}`")  # FLOAT as the stored float32, not its 6-digit text
            rows = ca.fetchall()
            cb.executemany(f"INSERT INTO `{t}` VALUES ({', '.join(['%s'] * len(rows[0]))})", rows)
    for group, table in (("gpg", "typed"), ("ges", "people"), ("ghb", "amounts")):
        plan = load_group(cfg, group)
        kind, target = plan.targets[plan.mapping_target[0]]
        m = plan.mappings[0]
        w = make_writer(kind, target, (m,))
        if kind == "hbase":
            w.check()  # creates the table (autoCreateTable)
        w.open()
        w.apply(m, _changes(src, db, table))
        w.commit()
        w.close()


def _by_group(results) -> dict:
    return {r.mapping.split("/")[-1]: r for r in results}


def test_equal_targets_verify_clean(dep):
    res = verify(dep["cfg"], chunk=25, sample=1000)
    by = {(r.kind, r.source.split(".")[-1]): r for r in res}
    assert set(by) == {("rdb", "typed"), ("rdb", "nokey"), ("rdb", "people"), ("rdb", "amounts"),
                       ("es", "people"), ("hbase", "amounts")}
    assert len([r for r in res if r.kind == "rdb"]) == 5   # typed twice: the mirror and PostgreSQL
    for r in res:
        assert r.ok and r.differing == 0 and r.error is None, r.as_dict()
    pg = next(r for r in res if "pg" in r.mapping)
    assert pg.method.startswith("rows") and pg.chunks > 4 and pg.source_rows == pg.target_rows == 120
    my = next(r for r in res if "mirror" in r.mapping and r.source.endswith("typed"))
    assert my.method.startswith("checksum") and my.differing_chunks == 0
    assert by[("es", "people")].sampled == 80 and by[("hbase", "amounts")].sampled == 60


def test_planted_differences_are_listed(dep, mariadb_target):
    with _conn(mariadb_target, dep["tdb"]) as c, c.cursor() as cur:
        cur.execute("UPDATE typed SET ts = '2001-01-01 00:00:00' WHERE region='us' AND id=10")
        cur.execute("DELETE FROM typed WHERE region='eu' AND id=119")
        cur.execute("INSERT INTO nokey VALUES (99, 'x')")
    dep["pg"].execute(f"UPDATE \"{dep['pgt']}\" SET dc = dc + 0.001 WHERE region='eu' AND id=1")
    dep["pg"].execute(f"DELETE FROM \"{dep['pgt']}\" WHERE region='us' AND id=2")
    dep["pg"].execute(f"INSERT INTO \"{dep['pgt']}\" (region, id) VALUES ('zz', 1)")
    es = dep["es"]
    es.update(index=dep["index"], id="5", doc={"name": "changed"}, refresh=True)
    es.delete(index=dep["index"], id="6", refresh=True)
    table = happybase.Connection(dep["hbase"]["host"], dep["hbase"]["port"]).table(dep["htable"])
    table.put(b"7", {b"CF:NAME": b"changed"})
    table.delete(b"8")
    res = verify(dep["cfg"], chunk=25, sample=1000)
    my = {r.source.split(".")[-1]: r for r in res if "mirror" in r.mapping}
    assert (my["typed"].changed, my["typed"].missing, my["typed"].extra) == ([("us", 10)], [("eu", 119)], [])
    assert 1 <= my["typed"].differing_chunks <= 2 and my["typed"].changed_columns == {"ts": 1}
    assert my["nokey"].extra == [(99, "x")] and my["nokey"].differing == 1
    pg = next(r for r in res if "pg" in r.mapping)
    assert (pg.changed, pg.missing, pg.extra) == ([("eu", 1)], [("us", 2)], [("zz", 1)])
    by = _by_group(res)
    assert (by["people.yml"].changed, by["people.yml"].missing) == (["5"], ["6"])
    assert by["people.yml"].target_rows == 79 and not by["people.yml"].ok
    assert (by["amounts.yml"].changed, by["amounts.yml"].missing) == ([("7",)], [("8",)])

    # the CLI: one mapping, exit 5 (differences found), the keys in the JSON
    out = sluice("verify", "--config", str(dep["path"]), "--mapping", "mappings/rdb/pg.yml", "--json", check=False)
    assert out.returncode == 5
    doc = json.loads(out.stdout)
    assert doc["differing_rows"] == 3 and doc["tables"][0]["keys"] == {
        "missing": [["us", 2]], "extra": [["zz", 1]], "changed": [["eu", 1]]}


def test_verify_names_the_repair_and_repair_makes_the_planted_differences_equal(dep):
    """Continues from the planted differences: verify prints the repair command for each table that
    differs, and ``sluice repair`` (here its driver, in one Spark session) makes every one of them equal
    again -- typed values through MariaDB and PostgreSQL targets, an ES document, an HBase row; a table
    without a key is refused by name while the others of its mapping are repaired."""
    from pipeline.config import SparkConfig
    from pipeline.job.session import get_spark
    from pipeline.repair.driver import RepairFailed, run_repair

    out = sluice("verify", "--config", str(dep["path"]), "--json", check=False)
    assert out.returncode == 5
    cmds = {t["source"].split(".")[-1] + "@" + t["group"]: t["repair"] for t in json.loads(out.stdout)["tables"]}
    assert cmds["typed@gpg"] == f"sluice repair --config {dep['path']} --group gpg --table {dep['db']}.typed"
    assert cmds["people@ges"].endswith("--group ges --mapping mappings/es/people.yml") or \
        cmds["people@ges"].endswith("--group ges --mapping " + str(dep["path"].parent / "mappings/es/people.yml"))
    assert cmds["amounts@gmy"] is None  # equal: nothing to repair
    cfg = dep["cfg"]
    spark = get_spark(SparkConfig(master="local[2]", partitions=2), "sluice-repair-tests")
    with pytest.raises(RepairFailed) as e:
        run_repair(cfg, load_group(cfg, "gmy"), spark, chunk=25, partitions=2)
    assert "nokey has no primary key" in e.value.message
    mine = e.value.summary.tables[f"{dep['db']}.typed"]
    assert (mine.missing, mine.changed, mine.extra, mine.upserted) == (1, 1, 0, 2)
    for g in ("gpg", "ges", "ghb"):
        run_repair(cfg, load_group(cfg, g), spark, chunk=25, partitions=2)
    left = [r.as_dict() for r in verify(cfg, chunk=25, sample=1000) if not r.ok]
    assert [r["source"].split(".")[-1] for r in left] == ["nokey"], left


@pytest.mark.parametrize("kind", ["postgresql", "mariadb", "mariadb unsorted"])
def test_a_ci_text_key_under_another_order_on_the_target_compares_equal(kind, mariadb, mariadb_target, postgres,
                                                                         monkeypatch):
    """A ``_ci`` text key (the source sorts ``a`` before ``B``) into a column that sorts ``B`` first
    (PostgreSQL ``C``; a MariaDB ``utf8mb4_bin``, which the key-collation check accepts as finer):
    the chunks' ranges are bounded in the target's own order, so equal tables compare equal (a new
    user's probe: verify listed hundreds of equal rows as extra, and repair never cleared them); a
    planted difference is still found. Bounds left in the source's order (too many to sort in one
    statement: "unsorted") come to the same, by looking up the keys no chunk met on both sides."""
    from adapters.base import Column, TablePair
    from adapters.rdb import verify as rdb_verify
    from adapters.rdb.verify import compare_table
    from pipeline.ops.verify_source import TableDiff
    from sluice_common.chunksql import Side

    db = f"opsv_ci_{uuid.uuid4().hex[:6]}"
    keys = [f"{c}{i:03d}" for i, c in enumerate("aBcDe_-zZy" * 40)] + ["ß", "Ä", "é", "Z"]
    with _conn(mariadb) as c, c.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{db}`")
        cur.execute(f"CREATE TABLE `{db}`.t (k VARCHAR(20) COLLATE utf8mb4_general_ci PRIMARY KEY, v INT)")
        cur.executemany(f"INSERT INTO `{db}`.t VALUES (%s, %s)", [(k, i) for i, k in enumerate(keys)])
    if kind == "postgresql":
        tconn = psycopg.connect(host=postgres["host"], port=postgres["port"], user=postgres["user"],
                                password=postgres["password"], dbname=postgres["database"], autocommit=True)
        run, schema, table = tconn.execute, None, db
        run(f'CREATE TABLE "{db}" (k varchar(20) COLLATE "C" PRIMARY KEY, v integer)')
        q = '"' + db + '"'
    else:
        if kind == "mariadb unsorted":
            monkeypatch.setattr(rdb_verify, "MAX_SORT_BYTES", 0)
            kind = "mariadb"
        tconn = _conn(mariadb_target)
        schema, table, q = db, "t", f"`{db}`.t"

        def run(stmt):
            with tconn.cursor() as cur:
                cur.execute(stmt)
        run(f"CREATE DATABASE `{db}`")
        run(f"CREATE TABLE {q} (k VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PRIMARY KEY, v INT)")
    try:
        for i, k in enumerate(keys):
            run(f"INSERT INTO {q} VALUES ('{k}', {i})")
        pair = TablePair(db, "t", schema, table, [Column("k", "k", "varchar", "varchar(20)"),
                                                  Column("v", "v", "int", "int(11)")], 1)
        with _conn(mariadb) as src:
            def compare():
                return compare_table(Side(src, "mysql"), Side(tconn, kind), pair,
                                     TableDiff("m.yml", "rdb", f"{db}.t", table), chunk=10)
            diff = compare()
            assert diff.chunks > 30 and (diff.missing, diff.extra, diff.changed) == ([], [], []), diff
            run(f"UPDATE {q} SET v = -1 WHERE k = 'B001'")
            run(f"DELETE FROM {q} WHERE k = 'a000'")
            diff = compare()
            assert (diff.missing, diff.extra, diff.changed) == ([("a000",)], [], [("B001",)]), diff
    finally:
        run(f'DROP TABLE IF EXISTS "{db}"' if kind == "postgresql" else f"DROP DATABASE IF EXISTS `{db}`")
        tconn.close()
        with _conn(mariadb) as c, c.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{db}`")


def test_oracle_mysql_chunks_compare_by_checksum(mysql, mysql_target):
    """MySQL 9.7 keeps ``MD5`` in a component a server may not load: every verify and repair of a
    keyed table failed there ("FUNCTION MD5 does not exist", a new user's probe). The checksum is
    SHA2's, which both MySQL and MariaDB have."""
    from adapters.base import Column, TablePair
    from adapters.rdb.verify import compare_table
    from pipeline.ops.verify_source import TableDiff
    from sluice_common.chunksql import Side

    db = f"opsv_my_{uuid.uuid4().hex[:6]}"
    conns = [_conn(mysql), _conn(mysql_target)]
    try:
        for c in conns:
            with c.cursor() as cur:
                cur.execute(f"CREATE DATABASE `{db}`")
                cur.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v VARCHAR(20), d DATETIME(6))")
                cur.executemany(f"INSERT INTO `{db}`.t VALUES (%s, %s, %s)",
                                [(i, f"v{i} ü", f"2026-11-29 10:00:{i % 60:02d}.5") for i in range(1, 101)])
            c.commit()
        with conns[1].cursor() as cur:
            cur.execute(f"UPDATE `{db}`.t SET v = 'other' WHERE id = 42")
        conns[1].commit()
        cols = [Column("id", "id", "int", "int"), Column("v", "v", "varchar", "varchar(20)"),
                Column("d", "d", "datetime", "datetime(6)")]
        pair = TablePair(db, "t", db, "t", cols, 1)
        diff = compare_table(Side(conns[0], "mysql"), Side(conns[1], "mysql"), pair,
                             TableDiff("m.yml", "rdb", f"{db}.t", "t"), chunk=10)
        assert diff.method.startswith("checksum") and diff.chunks >= 10, diff
        assert (diff.missing, diff.extra, diff.changed) == ([], [], [(42,)]), diff
    finally:
        for c in conns:
            with c.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS `{db}`")
            c.close()
