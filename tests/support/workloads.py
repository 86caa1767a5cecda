"""Seeded random OLTP workloads for the convergence tests (tests/e2e/test_key_conflicts.py,
tests/e2e/test_foreign_keys.py): the statements real applications run, chosen at random but
reproducible from the seed.

Each workload has the source DDL (MariaDB), the same schema for a PostgreSQL target (which
does not replay MySQL DDL), and ``run(cur, rng, steps)`` issuing transactions on the source.
A statement the source refuses (a duplicate, a restricting foreign key) is part of the game:
it is skipped, as an application would retry with other values.
"""

from __future__ import annotations

import random
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


def _tx(cur, *stmts: tuple[str, Any]) -> None:
    """One transaction; rolled back whole if the source refuses any of it."""
    cur.execute("START TRANSACTION")
    for sql, args in stmts:
        if not _try(cur, sql, args):
            cur.execute("ROLLBACK")
            return
    cur.execute("COMMIT")


# -- keys under _ci collations, unique values moving between rows (issue: key conflicts) ------
KEYS_DDL = [
    "CREATE TABLE b (k1 INT NOT NULL, k2 VARCHAR(10) COLLATE utf8mb4_general_ci NOT NULL, v INT, "
    "PRIMARY KEY (k1, k2))",
    "CREATE TABLE s (id VARCHAR(20) COLLATE utf8mb4_unicode_ci NOT NULL PRIMARY KEY, v VARCHAR(20))",
    "CREATE TABLE u (id INT NOT NULL PRIMARY KEY, email VARCHAR(40) COLLATE utf8mb4_general_ci, n INT, "
    "UNIQUE KEY email (email))",
    "CREATE TABLE uk (code VARCHAR(10) COLLATE utf8mb4_general_ci NOT NULL, v INT, UNIQUE KEY code (code))",
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


def keys_step(cur, rng: random.Random, step: int) -> None:
    """One random transaction of the key-conflicts workload."""
    ids = list(range(1, 41))
    op = rng.randrange(16)
    k1, var = rng.choice([8, 9]), rng.choice(CI_VARIANTS)
    if op == 0:    # a _ci composite key: delete one variant, insert another (same key at the source)
        _tx(cur, ("DELETE FROM b WHERE k1 = %s AND k2 = %s", (k1, var)),
            ("INSERT INTO b (k1, k2, v) VALUES (%s, %s, %s)", (k1, rng.choice(CI_VARIANTS), step)))
    elif op == 1:  # a PK change to a case/space variant of itself or another key
        _tx(cur, ("UPDATE b SET k2 = %s, v = %s WHERE k1 = %s AND k2 = %s", (rng.choice(CI_VARIANTS), step, k1, var)))
    elif op == 2:
        _tx(cur, ("INSERT INTO b (k1, k2, v) VALUES (%s, %s, %s) ON DUPLICATE KEY UPDATE v = v + 1",
                  (k1, var, step)))
    elif op == 3:  # accent variants of a unicode_ci key
        _tx(cur, ("REPLACE INTO s (id, v) VALUES (%s, %s)", (rng.choice(CI_VARIANTS) * rng.randint(1, 2), f"r{step}")))
    elif op == 4:
        _tx(cur, ("DELETE FROM s WHERE id = %s", (rng.choice(CI_VARIANTS),)),
            ("INSERT INTO s (id, v) VALUES (%s, %s)", (rng.choice(CI_VARIANTS), f"i{step}")))
    elif op == 5:  # swap two emails through a temporary value
        a, b = rng.sample(ids, 2)
        _tx(cur, ("SELECT email INTO @ea FROM u WHERE id = %s", (a,)),
            ("SELECT email INTO @eb FROM u WHERE id = %s", (b,)),
            ("UPDATE u SET email = %s WHERE id = %s", (f"tmp{step}", a)),
            ("UPDATE u SET email = @ea WHERE id = %s", (b,)), ("UPDATE u SET email = @eb WHERE id = %s", (a,)))
    elif op == 6:  # a row is deleted and a new row takes its email
        a, new = rng.choice(ids), rng.choice(ids)
        _tx(cur, ("SELECT email INTO @ea FROM u WHERE id = %s", (a,)), ("DELETE FROM u WHERE id = %s", (a,)),
            ("DELETE FROM u WHERE id = %s", (new,)), ("INSERT INTO u (id, email, n) VALUES (%s, @ea, %s)", (new, step)))
    elif op == 7:  # three rows cycle their emails
        a, b, c = rng.sample(ids, 3)
        _tx(cur, *[(f"SELECT email INTO @e{x} FROM u WHERE id = {y}", None)
                   for x, y in zip("abc", (a, b, c), strict=True)],
            ("UPDATE u SET email = NULL WHERE id = %s", (a,)), ("UPDATE u SET email = @ea WHERE id = %s", (b,)),
            ("UPDATE u SET email = NULL WHERE id = %s", (c,)), ("UPDATE u SET email = @eb WHERE id = %s", (c,)),
            ("UPDATE u SET email = @ec WHERE id = %s", (a,)))
    elif op == 8:  # a PK change, and a PK swap through a temporary key
        a, b = rng.sample(ids, 2)
        _tx(cur, ("UPDATE u SET id = %s WHERE id = %s", (1000 + step, a)),
            ("UPDATE u SET id = %s WHERE id = %s", (a, b)),
            ("UPDATE u SET id = %s WHERE id = %s", (b, 1000 + step)))
    elif op == 9:  # REPLACE on the unique key deletes the row that held it
        _tx(cur, ("REPLACE INTO u (id, email, n) VALUES (%s, %s, %s)",
                  (rng.choice(ids), f"e{rng.choice(ids)}@x", step)))
    elif op == 10:  # IODKU hitting the unique key updates the other row
        _tx(cur, ("INSERT INTO u (id, email, n) VALUES (%s, %s, %s) ON DUPLICATE KEY UPDATE n = n + 1, email = "
                  "CONCAT(email, '.')", (rng.choice(ids), f"e{rng.choice(ids)}@x", step)))
    elif op == 11:  # case variants of a unique value
        _tx(cur, ("UPDATE u SET email = %s WHERE id = %s", (f"E{rng.choice(ids)}@X", rng.choice(ids))))
    elif op == 12:  # a table with only a unique key
        a, b = rng.sample(range(8), 2)
        _tx(cur, ("UPDATE uk SET code = %s WHERE code = %s", (f"t{step}", f"c{a}")),
            ("UPDATE uk SET code = %s WHERE code = %s", (f"c{a}", f"c{b}")),
            ("UPDATE uk SET code = %s WHERE code = %s", (f"c{b}", f"t{step}")))
    elif op == 13:
        _tx(cur, ("INSERT INTO uk (code, v) VALUES (%s, %s) ON DUPLICATE KEY UPDATE v = v + 1",
                  (f"c{rng.randrange(8)}", step)),
            ("DELETE FROM uk WHERE code = %s", (f"C{rng.randrange(8)} ",)))
    elif op == 14:  # a table with no key: duplicates, one-row deletes and updates
        _tx(cur, ("INSERT INTO nk (a, b) VALUES (%s, %s)", (rng.randrange(3), "dup")),
            ("UPDATE nk SET b = %s WHERE a = %s LIMIT 1", (f"u{step % 3}", rng.randrange(3))))
    else:
        _tx(cur, ("DELETE FROM nk WHERE a = %s LIMIT 1", (rng.randrange(3),)),
            ("UPDATE u SET n = n + 1 WHERE id IN (%s, %s)", tuple(rng.sample(ids, 2))))


def run(cur, step_fn, seed: int, steps: int, ddl_mid: list[str] = ()) -> None:
    """``steps`` random transactions; the DDL statements in the middle."""
    rng = random.Random(seed)
    for i in range(steps):
        if ddl_mid and i == steps // 2:
            for stmt in ddl_mid:
                cur.execute(stmt)
        step_fn(cur, rng, i)
