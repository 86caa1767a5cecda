"""One source captured once, applied by several groups into several targets: the servers of such a
deployment, the target databases it creates and drops, and the byte-for-byte comparison.

Sources are the suite's ``mariadb`` and ``mysql`` services; target kinds are ``maria`` (the
``mariadb-target`` service, DDL replayed by mirrorDb), ``mysql`` (``mysql-target``, likewise) and
``pg`` (PostgreSQL, which replays no MySQL DDL: its schema is made from the test's own DDL).

The e2e modules pick, per source, the groups (target kind, Spark partitions) that prove distinct
things; ``SLUICE_E2E_FULL=1`` runs every target kind with 1 and 4 partitions from every source
(:func:`groups`), a longer run for when the apply or DDL paths change.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import psycopg

from tests.support import sysbench
from tests.support.compare import diff_databases, pg_diff
from tests.support.deploy import rdb_adapter

#: the fixture of each source flavour and of each target kind
SOURCE_FIXTURES = {"mariadb": "mariadb", "mysql": "mysql"}
TARGET_FIXTURES = {"maria": "mariadb_target", "mysql": "mysql_target", "pg": "postgres"}
FULL = os.environ.get("SLUICE_E2E_FULL", "").lower() in ("1", "true", "yes")


def groups(chosen: dict[str, tuple[str, int]], kinds: tuple[str, ...] = ("maria", "mysql", "pg")
           ) -> dict[str, tuple[str, int]]:
    """``chosen`` (group id -> (target kind, partitions)), or with SLUICE_E2E_FULL every kind of
    ``kinds`` with 1 and 4 partitions (ids ``<kind>1``, ``<kind>4``)."""
    if not FULL:
        return chosen
    return {f"{k}{n}": (k, n) for k in kinds for n in (1, 4)}


@dataclass
class Servers:
    """The source and the targets of one deployment (the fixtures' info dicts)."""

    source: dict[str, Any]
    targets: dict[str, dict[str, Any]]

    @classmethod
    def of(cls, request, source: str, kinds) -> Servers:
        """The servers a test needs, started through their fixtures (``request``: pytest's)."""
        return cls(request.getfixturevalue(SOURCE_FIXTURES[source]),
                   {k: request.getfixturevalue(TARGET_FIXTURES[k]) for k in sorted(set(kinds))})

    def pg(self):
        p = self.targets["pg"]
        return psycopg.connect(host=p["host"], port=p["port"], user=p["user"], password=p["password"],
                               dbname=p["database"], autocommit=True)

    def create(self, kind: str, name: str, key: str, pg_ddl: list[str] = (), **fmt: str) -> dict:
        """Create the target database (MySQL family) or schema (PostgreSQL, with ``pg_ddl``
        formatted with ``fmt``); return an ``outerAdapters`` entry with ``key`` for it."""
        if kind == "pg":
            with self.pg() as c:
                c.execute(f'CREATE SCHEMA "{name}"')
                for stmt in pg_ddl:
                    c.execute(stmt.format(**fmt))
            p = self.targets["pg"]
            return rdb_adapter(p, key, p["database"], dialect="postgresql")
        sysbench.create_database(self.targets[kind], name)
        return rdb_adapter(self.targets[kind], key, name)

    def drop(self, kind: str, name: str) -> None:
        if kind == "pg":
            with self.pg() as c:
                c.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        else:
            sysbench.drop_database(self.targets[kind], name)

    def diff(self, kind: str, source_db: str, target_db: str) -> dict[str, int]:
        """{table: differing rows} of the source database against its copy (every value, as text
        for PostgreSQL)."""
        if kind == "pg":
            return pg_diff(self.source, source_db, self.targets["pg"], target_db)
        return diff_databases(self.source, source_db, self.targets[kind], target_db)
