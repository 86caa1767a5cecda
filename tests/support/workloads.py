"""Seeded random OLTP workloads for the convergence tests (tests/e2e/test_key_conflicts.py,
tests/e2e/test_foreign_keys.py): the statements real applications run, chosen at random but
reproducible from the seed.

Each workload has the source DDL (MariaDB), the same schema for a PostgreSQL target (which
does not replay MySQL DDL), and ``run(cur, rng, steps)`` issuing transactions on the source.
A statement the source refuses (a duplicate, a restricting foreign key) is part of the game:
its transaction is rolled back, as an application would retry with other values. ``run``
returns a :class:`Tally` of what committed and what was refused per kind of transaction, so a
test can require that every kind it claims really happened.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pymysql

#: key variants that a ``_ci`` PAD SPACE collation equates (case, accents, trailing spaces)
CI_VARIANTS = ["z", "Z", "z ", "Z  ", "a", "A", "á", "Á ", "e", "é", "É", "ss", "ß", "x", "X "]


def _try(cur, sql: str, args: Any = None) -> bool:
    try:
        cur.execute(sql, args)
        return True
    except pymysql.err.IntegrityError:
        return False
    except pymysql.err.OperationalError as e:
        if e.args[0] in (1213, 1205):  # deadlock / lock wait: retry-worthy, skip here
            return False
        raise


def _tx(cur, *stmts: tuple[str, Any]) -> bool:
    """One transaction; rolled back whole if the source refuses any of it. True: committed."""
    cur.execute("START TRANSACTION")
    for sql, args in stmts:
        if not _try(cur, sql, args):
            cur.execute("ROLLBACK")
            return False
    cur.execute("COMMIT")
    return True


@dataclass
class Tally:
    """Transactions of a seeded run per kind (the step's ``op``): committed and refused."""

    committed: Counter = field(default_factory=Counter)
    refused: Counter = field(default_factory=Counter)

    def missing(self, kinds: int, at_least: int = 1) -> list[int]:
        """The kinds ``0 .. kinds-1`` that committed fewer than ``at_least`` times."""
        return [k for k in range(kinds) if self.committed[k] < at_least]


# -- keys under _ci collations, unique values moving between rows (issue: key conflicts) ------
KEYS_DDL = [
    "CREATE TABLE b (k1 INT NOT NULL, k2 VARCHAR(10) COLLATE utf8mb4_general_ci NOT NULL, v INT, "
    "PRIMARY KEY (k1, k2))",
    # the database default (the suite's MariaDB: utf8mb4_unicode_ci): a mirror must name it
    "CREATE TABLE s (id VARCHAR(20) NOT NULL PRIMARY KEY, v VARCHAR(20))",
    "CREATE TABLE u (id INT NOT NULL PRIMARY KEY, email VARCHAR(40) COLLATE utf8mb4_general_ci, n INT, "
    "UNIQUE KEY email (email))",
    "CREATE TABLE uk (code VARCHAR(10) COLLATE utf8mb4_general_ci NOT NULL, v INT, UNIQUE KEY code (code))",
    "CREATE TABLE nk (a INT, b VARCHAR(10))",
]
#: the same tables on Oracle MySQL: keys under its NO PAD collations (the default
#: ``utf8mb4_0900_ai_ci``, named or not, and ``utf8mb4_0900_as_ci``: ``'z'`` and ``'z '`` are two keys,
#: case -- and for ``ai`` accents -- still fold), and one PAD SPACE key as on MariaDB
KEYS_DDL_MYSQL = [
    "CREATE TABLE b (k1 INT NOT NULL, k2 VARCHAR(10) NOT NULL, v INT, PRIMARY KEY (k1, k2))",
    "CREATE TABLE s (id VARCHAR(20) COLLATE utf8mb4_unicode_ci NOT NULL PRIMARY KEY, v VARCHAR(20))",
    "CREATE TABLE u (id INT NOT NULL PRIMARY KEY, email VARCHAR(40) COLLATE utf8mb4_0900_ai_ci, n INT, "
    "UNIQUE KEY email (email))",
    "CREATE TABLE uk (code VARCHAR(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_0900_as_ci NOT NULL, v INT, "
    "UNIQUE KEY code (code))",
    "CREATE TABLE nk (a INT, b VARCHAR(10))",
]
KEYS_DDL_MID = ["ALTER TABLE u ADD COLUMN extra INT", "ALTER TABLE b ADD COLUMN w VARCHAR(5)"]
KEYS_PG_DDL = [
    "CREATE TABLE {s}.b (k1 INT NOT NULL, k2 VARCHAR(10) NOT NULL, v INT, w VARCHAR(5), PRIMARY KEY (k1, k2))",
    "CREATE TABLE {s}.s (id VARCHAR(20) NOT NULL PRIMARY KEY, v VARCHAR(20))",
    "CREATE TABLE {s}.u (id INT NOT NULL PRIMARY KEY, email VARCHAR(40), n INT, extra INT, "
    "CONSTRAINT u_email UNIQUE (email))",
    "CREATE TABLE {s}.uk (code VARCHAR(10) NOT NULL, v INT, CONSTRAINT uk_code UNIQUE (code))",
    "CREATE TABLE {s}.nk (a INT, b VARCHAR(10))",
]


def keys_seed(cur) -> None:
    """The rows the workload starts from (captured like the rest)."""
    for i in range(1, 31):
        cur.execute("INSERT INTO u (id, email, n) VALUES (%s, %s, 0)", (i, f"e{i}@x"))
    for i, k in enumerate(["a", "e", "z", "x"]):
        cur.execute("INSERT INTO b (k1, k2, v) VALUES (%s, %s, 0)", (9, k))
        cur.execute("INSERT INTO s (id, v) VALUES (%s, 'init')", (k * (i + 1),))
    for i in range(5):
        cur.execute("INSERT INTO uk (code, v) VALUES (%s, %s)", (f"c{i}", i))
        cur.execute("INSERT INTO nk (a, b) VALUES (%s, %s)", (i % 2, "dup"))


#: the kinds of transaction keys_step issues (its ``op``)
KEYS_KINDS = 16


def keys_step(cur, rng: random.Random, step: int) -> tuple[int, bool]:
    """One random transaction of the key-conflicts workload: its kind (``op``, one of
    :data:`KEYS_KINDS`) and whether the source committed it."""
    ids = list(range(1, 41))
    op = rng.randrange(16)
    k1, var = rng.choice([8, 9]), rng.choice(CI_VARIANTS)
    if op == 0:    # a _ci composite key: delete one variant, insert another (same key at the source)
        ok = _tx(cur, ("DELETE FROM b WHERE k1 = %s AND k2 = %s", (k1, var)),
            ("INSERT INTO b (k1, k2, v) VALUES (%s, %s, %s)", (k1, rng.choice(CI_VARIANTS), step)))
    elif op == 1:  # a PK change to a case/space variant of itself or another key
        ok = _tx(cur, ("UPDATE b SET k2 = %s, v = %s WHERE k1 = %s AND k2 = %s",
                       (rng.choice(CI_VARIANTS), step, k1, var)))
    elif op == 2:
        ok = _tx(cur, ("INSERT INTO b (k1, k2, v) VALUES (%s, %s, %s) ON DUPLICATE KEY UPDATE v = v + 1",
                  (k1, var, step)))
    elif op == 3:  # accent variants of a unicode_ci key
        ok = _tx(cur, ("REPLACE INTO s (id, v) VALUES (%s, %s)",
                       (rng.choice(CI_VARIANTS) * rng.randint(1, 2), f"r{step}")))
    elif op == 4:
        ok = _tx(cur, ("DELETE FROM s WHERE id = %s", (rng.choice(CI_VARIANTS),)),
            ("INSERT INTO s (id, v) VALUES (%s, %s)", (rng.choice(CI_VARIANTS), f"i{step}")))
    elif op == 5:  # swap two emails through a temporary value
        a, b = rng.sample(ids, 2)
        ok = _tx(cur, ("SELECT email INTO @ea FROM u WHERE id = %s", (a,)),
            ("SELECT email INTO @eb FROM u WHERE id = %s", (b,)),
            ("UPDATE u SET email = %s WHERE id = %s", (f"tmp{step}", a)),
            ("UPDATE u SET email = @ea WHERE id = %s", (b,)), ("UPDATE u SET email = @eb WHERE id = %s", (a,)))
    elif op == 6:  # a row is deleted and a new row takes its email
        a, new = rng.choice(ids), rng.choice(ids)
        ok = _tx(cur, ("SELECT email INTO @ea FROM u WHERE id = %s", (a,)), ("DELETE FROM u WHERE id = %s", (a,)),
            ("DELETE FROM u WHERE id = %s", (new,)), ("INSERT INTO u (id, email, n) VALUES (%s, @ea, %s)", (new, step)))
    elif op == 7:  # three rows cycle their emails
        a, b, c = rng.sample(ids, 3)
        ok = _tx(cur, *[(f"SELECT email INTO @e{x} FROM u WHERE id = {y}", None)
                   for x, y in zip("abc", (a, b, c), strict=True)],
            ("UPDATE u SET email = NULL WHERE id = %s", (a,)), ("UPDATE u SET email = @ea WHERE id = %s", (b,)),
            ("UPDATE u SET email = NULL WHERE id = %s", (c,)), ("UPDATE u SET email = @eb WHERE id = %s", (c,)),
            ("UPDATE u SET email = @ec WHERE id = %s", (a,)))
    elif op == 8:  # a PK change, and a PK swap through a temporary key
        a, b = rng.sample(ids, 2)
        ok = _tx(cur, ("UPDATE u SET id = %s WHERE id = %s", (1000 + step, a)),
            ("UPDATE u SET id = %s WHERE id = %s", (a, b)),
            ("UPDATE u SET id = %s WHERE id = %s", (b, 1000 + step)))
    elif op == 9:  # REPLACE on the unique key deletes the row that held it
        ok = _tx(cur, ("REPLACE INTO u (id, email, n) VALUES (%s, %s, %s)",
                  (rng.choice(ids), f"e{rng.choice(ids)}@x", step)))
    elif op == 10:  # IODKU hitting the unique key updates the other row
        ok = _tx(cur, ("INSERT INTO u (id, email, n) VALUES (%s, %s, %s) ON DUPLICATE KEY UPDATE n = n + 1, email = "
                  "CONCAT(email, '.')", (rng.choice(ids), f"e{rng.choice(ids)}@x", step)))
    elif op == 11:  # case variants of a unique value
        ok = _tx(cur, ("UPDATE u SET email = %s WHERE id = %s", (f"E{rng.choice(ids)}@X", rng.choice(ids))))
    elif op == 12:  # a table with only a unique key
        a, b = rng.sample(range(8), 2)
        ok = _tx(cur, ("UPDATE uk SET code = %s WHERE code = %s", (f"t{step}", f"c{a}")),
            ("UPDATE uk SET code = %s WHERE code = %s", (f"c{a}", f"c{b}")),
            ("UPDATE uk SET code = %s WHERE code = %s", (f"c{b}", f"t{step}")))
    elif op == 13:
        ok = _tx(cur, ("INSERT INTO uk (code, v) VALUES (%s, %s) ON DUPLICATE KEY UPDATE v = v + 1",
                  (f"c{rng.randrange(8)}", step)),
            ("DELETE FROM uk WHERE code = %s", (f"C{rng.randrange(8)} ",)))
    elif op == 14:  # a table with no key: duplicates, one-row deletes and updates
        ok = _tx(cur, ("INSERT INTO nk (a, b) VALUES (%s, %s)", (rng.randrange(3), "dup")),
            ("UPDATE nk SET b = %s WHERE a = %s LIMIT 1", (f"u{step % 3}", rng.randrange(3))))
    else:
        ok = _tx(cur, ("DELETE FROM nk WHERE a = %s LIMIT 1", (rng.randrange(3),)),
            ("UPDATE u SET n = n + 1 WHERE id IN (%s, %s)", tuple(rng.sample(ids, 2))))
    return op, ok


def run(cur, step_fn, seed: int, steps: int, ddl_mid: list[str] = ()) -> Tally:
    """``steps`` random transactions; the DDL statements in the middle; what committed."""
    rng = random.Random(seed)
    tally = Tally()
    for i in range(steps):
        if ddl_mid and i == steps // 2:
            for stmt in ddl_mid:
                cur.execute(stmt)
        op, ok = step_fn(cur, rng, i)
        (tally.committed if ok else tally.refused)[op] += 1
    return tally


# -- foreign keys: cascades the binlog does not carry, generated columns ----------------------
#: ``{a}``: the parent database, ``{b}``: the database with a foreign key into ``{a}``
FK_DDL_A = [
    "CREATE TABLE p (id INT NOT NULL PRIMARY KEY, code VARCHAR(10), n INT, UNIQUE KEY code (code))",
    "CREATE TABLE c (id INT NOT NULL PRIMARY KEY, pid INT NOT NULL, n INT, "
    "CONSTRAINT fk_c_p FOREIGN KEY (pid) REFERENCES p (id) ON DELETE CASCADE ON UPDATE CASCADE)",
    "CREATE TABLE gc (id INT NOT NULL PRIMARY KEY, cid INT, n INT, "
    "CONSTRAINT fk_gc_c FOREIGN KEY (cid) REFERENCES c (id) ON DELETE SET NULL ON UPDATE CASCADE)",
    "CREATE TABLE r (id INT NOT NULL PRIMARY KEY, pid INT, "
    "CONSTRAINT fk_r_p FOREIGN KEY (pid) REFERENCES p (id) ON DELETE RESTRICT ON UPDATE RESTRICT)",
    "CREATE TABLE e (id INT NOT NULL PRIMARY KEY, boss INT, "
    "CONSTRAINT fk_e_e FOREIGN KEY (boss) REFERENCES e (id) ON DELETE SET NULL ON UPDATE CASCADE)",
    "CREATE TABLE cp (a INT NOT NULL, b INT NOT NULL, v INT, PRIMARY KEY (a, b))",
    "CREATE TABLE cc (id INT NOT NULL PRIMARY KEY, a INT, b INT, "
    "CONSTRAINT fk_cc_cp FOREIGN KEY (a, b) REFERENCES cp (a, b) ON DELETE CASCADE ON UPDATE CASCADE)",
    "CREATE TABLE gen (id INT NOT NULL PRIMARY KEY, a INT, b INT, v INT AS (a + b) VIRTUAL, "
    "s INT AS (a * b) STORED)",
    "CREATE TABLE solo (id INT NOT NULL PRIMARY KEY, v INT)",
]
FK_DDL_B = ["CREATE TABLE d (id INT NOT NULL PRIMARY KEY, pid INT, CONSTRAINT fk_d_p FOREIGN KEY (pid) "
            "REFERENCES `{a}`.p (id) ON DELETE CASCADE ON UPDATE CASCADE)"]
#: MariaDB targets only (PostgreSQL does not replay DDL): a foreign key added and dropped
#: mid-stream, a generated column turned plain and a plain one turned generated
FK_DDL_C = ["CREATE TABLE x (id INT NOT NULL PRIMARY KEY, pid INT, a INT, b INT, g INT AS (a - b) VIRTUAL, h INT)"]
FK_DDL_C_MID = [
    ["UPDATE `{c}`.x SET pid = NULL WHERE pid NOT IN (SELECT id FROM `{a}`.p)",
     "ALTER TABLE `{c}`.x ADD CONSTRAINT fk_x_p FOREIGN KEY (pid) REFERENCES `{a}`.p (id) ON DELETE SET NULL",
     "ALTER TABLE `{c}`.x DROP COLUMN g, ADD COLUMN g INT"],
    ["ALTER TABLE `{c}`.x DROP FOREIGN KEY fk_x_p",
     "ALTER TABLE `{c}`.x DROP COLUMN h, ADD COLUMN h INT AS (a * 2) STORED"],
]
FK_PG_DDL_A = [
    "CREATE TABLE {a}.p (id INT NOT NULL PRIMARY KEY, code VARCHAR(10), n INT, CONSTRAINT p_code UNIQUE (code))",
    "CREATE TABLE {a}.c (id INT NOT NULL PRIMARY KEY, pid INT NOT NULL, n INT, "
    "CONSTRAINT fk_c_p FOREIGN KEY (pid) REFERENCES {a}.p (id) ON DELETE CASCADE ON UPDATE CASCADE)",
    "CREATE TABLE {a}.gc (id INT NOT NULL PRIMARY KEY, cid INT, n INT, "
    "CONSTRAINT fk_gc_c FOREIGN KEY (cid) REFERENCES {a}.c (id) ON DELETE SET NULL ON UPDATE CASCADE)",
    "CREATE TABLE {a}.r (id INT NOT NULL PRIMARY KEY, pid INT, "
    "CONSTRAINT fk_r_p FOREIGN KEY (pid) REFERENCES {a}.p (id) ON DELETE RESTRICT ON UPDATE RESTRICT)",
    "CREATE TABLE {a}.e (id INT NOT NULL PRIMARY KEY, boss INT, "
    "CONSTRAINT fk_e_e FOREIGN KEY (boss) REFERENCES {a}.e (id) ON DELETE SET NULL ON UPDATE CASCADE)",
    "CREATE TABLE {a}.cp (a INT NOT NULL, b INT NOT NULL, v INT, PRIMARY KEY (a, b))",
    "CREATE TABLE {a}.cc (id INT NOT NULL PRIMARY KEY, a INT, b INT, "
    "CONSTRAINT fk_cc_cp FOREIGN KEY (a, b) REFERENCES {a}.cp (a, b) ON DELETE CASCADE ON UPDATE CASCADE)",
    "CREATE TABLE {a}.gen (id INT NOT NULL PRIMARY KEY, a INT, b INT, v INT GENERATED ALWAYS AS (a + b) STORED, "
    "s INT GENERATED ALWAYS AS (a * b) STORED)",
    "CREATE TABLE {a}.solo (id INT NOT NULL PRIMARY KEY, v INT)",
]
FK_PG_DDL_B = ["CREATE TABLE {b}.d (id INT NOT NULL PRIMARY KEY, pid INT, CONSTRAINT fk_d_p FOREIGN KEY (pid) "
               "REFERENCES {a}.p (id) ON DELETE CASCADE ON UPDATE CASCADE)"]


def fk_seed(cur, a: str, b: str, c: str | None) -> None:
    """Parents with children, grandchildren, employees, composite parents; all captured."""
    for i in range(1, 21):
        cur.execute(f"INSERT INTO `{a}`.p (id, code, n) VALUES (%s, %s, 0)", (i, f"k{i}"))
        for j in range(3):
            cur.execute(f"INSERT INTO `{a}`.c (id, pid, n) VALUES (%s, %s, 0)", (i * 10 + j, i))
            cur.execute(f"INSERT INTO `{a}`.gc (id, cid, n) VALUES (%s, %s, 0)", (i * 100 + j, i * 10 + j))
        cur.execute(f"INSERT INTO `{a}`.e (id, boss) VALUES (%s, %s)", (i, i // 2 or None))
        cur.execute(f"INSERT INTO `{a}`.cp (a, b, v) VALUES (%s, %s, 0)", (i, i % 3))
        cur.execute(f"INSERT INTO `{a}`.cc (id, a, b) VALUES (%s, %s, %s)", (i, i, i % 3))
        cur.execute(f"INSERT INTO `{a}`.gen (id, a, b) VALUES (%s, %s, %s)", (i, i, 2))
        cur.execute(f"INSERT INTO `{b}`.d (id, pid) VALUES (%s, %s)", (i, i))
        if c:
            cur.execute(f"INSERT INTO `{c}`.x (id, pid, a, b, h) VALUES (%s, %s, %s, 1, 0)", (i, i, i))


def fk_step(cur, rng: random.Random, step: int, a: str, b: str, c: str | None) -> None:
    """One random transaction over the foreign-key schema."""
    pid = rng.randrange(1, 60)
    new = 2000 + step
    op = rng.randrange(14)
    if op == 0:    # a new parent with children (and a child of another database) in one transaction
        _tx(cur, (f"INSERT INTO `{a}`.p (id, code, n) VALUES (%s, %s, 0)", (new, f"k{new}")),
            *[(f"INSERT INTO `{a}`.c (id, pid, n) VALUES (%s, %s, 0)", (new * 10 + j, new)) for j in range(3)],
            (f"INSERT INTO `{b}`.d (id, pid) VALUES (%s, %s)", (new, new)))
    elif op == 1:  # children moved to a parent created in the same transaction
        _tx(cur, (f"INSERT INTO `{a}`.p (id, code, n) VALUES (%s, %s, 0)", (new, f"k{new}")),
            (f"UPDATE `{a}`.c SET pid = %s, n = n + 1 WHERE pid = %s", (new, pid)))
    elif op == 2:  # a parent deleted with its children (and their grandchildren set NULL)
        _tx(cur, (f"DELETE FROM `{a}`.p WHERE id = %s", (pid,)))
    elif op == 3:  # a parent's key changes: its children follow (ON UPDATE CASCADE), r restricts
        _tx(cur, (f"UPDATE `{a}`.p SET id = %s WHERE id = %s", (new, pid)))
    elif op == 4:  # unique codes swapped between parents through a temporary value
        x, y = rng.randrange(1, 60), rng.randrange(1, 60)
        _tx(cur, (f"SELECT code INTO @cx FROM `{a}`.p WHERE id = %s", (x,)),
            (f"SELECT code INTO @cy FROM `{a}`.p WHERE id = %s", (y,)),
            (f"UPDATE `{a}`.p SET code = %s WHERE id = %s", (f"t{step}", x)),
            (f"UPDATE `{a}`.p SET code = @cx WHERE id = %s", (y,)),
            (f"UPDATE `{a}`.p SET code = @cy WHERE id = %s", (x,)))
    elif op == 5:  # children and grandchildren of existing parents
        _tx(cur, (f"INSERT INTO `{a}`.c (id, pid, n) VALUES (%s, %s, 1)", (new, pid)),
            (f"INSERT INTO `{a}`.gc (id, cid, n) VALUES (%s, %s, 1)", (new, new)),
            (f"UPDATE `{a}`.gc SET cid = %s WHERE id = %s", (new, rng.randrange(100, 2100))))
    elif op == 6:  # a child's key changes (grandchildren follow), a child deleted
        _tx(cur, (f"UPDATE `{a}`.c SET id = %s WHERE id = %s", (new * 10 + 7, rng.randrange(10, 600))),
            (f"DELETE FROM `{a}`.c WHERE id = %s", (rng.randrange(10, 600),)))
    elif op == 7:  # RESTRICT: rows that pin their parent
        _tx(cur, (f"INSERT INTO `{a}`.r (id, pid) VALUES (%s, %s)", (step, pid)),
            (f"DELETE FROM `{a}`.r WHERE id = %s", (rng.randrange(step + 1),)))
    elif op == 8:  # a self-reference: bosses deleted (SET NULL) and re-keyed (CASCADE)
        _tx(cur, (f"INSERT INTO `{a}`.e (id, boss) VALUES (%s, %s)", (new, rng.randrange(1, 40))),
            (f"UPDATE `{a}`.e SET id = %s WHERE id = %s", (new + 5000, rng.randrange(1, 40))),
            (f"DELETE FROM `{a}`.e WHERE id = %s", (rng.randrange(1, 40),)))
    elif op == 9:  # a composite key: parents re-keyed and deleted
        x = rng.randrange(1, 40)
        _tx(cur, (f"UPDATE `{a}`.cp SET a = a + 100 WHERE a = %s", (x,)),
            (f"DELETE FROM `{a}`.cp WHERE a = %s", (rng.randrange(1, 40),)),
            (f"INSERT INTO `{a}`.cp (a, b, v) VALUES (%s, 1, 1)", (new,)),
            (f"INSERT INTO `{a}`.cc (id, a, b) VALUES (%s, %s, 1)", (new, new)))
    elif op == 10:  # generated columns follow their inputs
        _tx(cur, (f"UPDATE `{a}`.gen SET a = a + 1, b = %s WHERE id = %s", (step % 7, rng.randrange(1, 25))),
            (f"INSERT INTO `{a}`.gen (id, a, b) VALUES (%s, %s, %s)", (new, step, 3)))
    elif op == 11:  # an unrelated table stays parallel
        _tx(cur, (f"INSERT INTO `{a}`.solo (id, v) VALUES (%s, %s) ON DUPLICATE KEY UPDATE v = v + 1",
                  (rng.randrange(50), step)))
    elif op == 12 and c:  # the table whose foreign key comes and goes
        _tx(cur, (f"UPDATE `{c}`.x SET pid = %s, a = a + 1 WHERE id = %s", (pid, rng.randrange(1, 21))),
            (f"INSERT INTO `{c}`.x (id, pid, a, b) VALUES (%s, %s, %s, 2)", (new, pid, step)))
    else:  # rows of the other database
        _tx(cur, (f"UPDATE `{b}`.d SET pid = %s WHERE id = %s", (pid, rng.randrange(1, 40))),
            (f"DELETE FROM `{b}`.d WHERE id = %s", (rng.randrange(1, 40),)))


def fk_run(cur, seed: int, steps: int, a: str, b: str, c: str | None) -> None:
    """``steps`` random transactions; with ``c``, the mid-stream DDL at 1/3 and 2/3."""
    rng = random.Random(seed)
    for i in range(steps):
        if c and i in (steps // 3, 2 * steps // 3):
            for stmt in FK_DDL_C_MID[0 if i == steps // 3 else 1]:
                cur.execute(stmt.format(a=a, c=c))
        fk_step(cur, rng, i, a, b, c)
