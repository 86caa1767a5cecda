"""Source tables on the suite's real MariaDB, and the Change each statement produces.

Tests of the search adapters change the source with SQL and hand the writer the Change records
the capture stage would produce (Dml strings): the adapter re-queries the same server, so the
documents must equal what the mapping SQL gives *now*.
"""

from __future__ import annotations

import pymysql

from adapters.base import Change


class Source:
    """One database of the source server; ``types`` = table -> column -> mysqlType (the
    columns in table order; every table has the key column ``id``)."""

    def __init__(self, info: dict, db: str, types: dict[str, dict[str, str]]):
        self.db = db
        self.types = types
        self.conn = pymysql.connect(host=info["host"], port=info["port"], user=info["user"],
                                    password=info["password"], autocommit=True, charset="utf8mb4")
        self.rows: dict[tuple[str, str], dict] = {}

    def sql(self, stmt: str, params: tuple = ()) -> list[tuple]:
        with self.conn.cursor() as cur:
            cur.execute(stmt, params)
            return list(cur.fetchall())

    def close(self) -> None:
        self.conn.close()

    def _change(self, kind: str, table: str, data: dict, old: dict | None = None) -> Change:
        return Change(kind, self.db, table, dict(data), old, ("id",), self.types[table])

    def insert(self, table: str, **row: str | None) -> Change:
        row = {c: row.get(c) for c in self.types[table]}
        cols = ", ".join(f"`{c}`" for c in row)
        self.sql(f"INSERT INTO `{self.db}`.`{table}` ({cols}) VALUES ({', '.join(['%s'] * len(row))})",
                 tuple(row.values()))
        self.rows[(table, row["id"])] = row
        return self._change("INSERT", table, row)

    def update(self, table: str, id_: str, **changes: str | None) -> list[Change]:
        """UPDATE one row; a key change comes back as DELETE + INSERT, as the job splits it."""
        before = self.rows.pop((table, id_))
        after = {**before, **changes}
        sets = ", ".join(f"`{c}`=%s" for c in changes)
        self.sql(f"UPDATE `{self.db}`.`{table}` SET {sets} WHERE id=%s", (*changes.values(), id_))
        self.rows[(table, after["id"])] = after
        if after["id"] != id_:
            return [self._change("DELETE", table, before), self._change("INSERT", table, after)]
        return [self._change("UPDATE", table, after, {c: before[c] for c in changes})]

    def delete(self, table: str, id_: str) -> Change:
        row = self.rows.pop((table, id_))
        self.sql(f"DELETE FROM `{self.db}`.`{table}` WHERE id=%s", (id_,))
        return self._change("DELETE", table, row)
