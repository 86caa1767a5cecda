"""A small deployment for the operator-mistake tests (issue 37): a source database with tables
``t`` and ``u`` (``id INT PRIMARY KEY, b VARCHAR(40)``), a target database with ``t``, one group
``g1`` with a canal ``dbMapping`` (mapAll) of ``t``, and helpers to run the real CLI on it."""

from __future__ import annotations

import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pymysql
import yaml

from tests.support.cli import cli
from tests.support.deploy import rdb_adapter, write_deployment


def sql(info: dict, *stmts: str, user: str | None = None, password: str | bytes | None = None) -> list:
    """Run ``stmts`` on a fixture's server (as root unless ``user``); the last one's rows."""
    conn = pymysql.connect(host=info["host"], port=info["port"], user=user or info["user"],
                           password=info["password"] if password is None else password, autocommit=True)
    try:
        with conn.cursor() as cur:
            for s in stmts:
                cur.execute(s)
            return list(cur.fetchall())
    finally:
        conn.close()


@dataclass
class Deployment:
    """One throw-away deployment (see the module docstring)."""

    root: Path
    cfg: Path
    db: str
    src: dict
    tgt: dict

    @property
    def tdb(self) -> str:
        return f"{self.db}_t"

    @property
    def store(self) -> Path:
        return self.root / "store" / self.db

    def mapping(self, name: str = "t.yml") -> Path:
        return self.root / "mappings" / name

    def run(self, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
        """``sluice ARGS --config <this deployment>``."""
        return cli(*args, "--config", str(self.cfg), env=env)

    def ok(self, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
        """Like :meth:`run`, asserting exit 0 (or 4: nothing to do)."""
        proc = self.run(*args, env=env)
        assert proc.returncode in (0, 4), f"sluice {' '.join(args)}: exit {proc.returncode}\n" \
                                          f"{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
        return proc

    def source(self, *stmts: str) -> list:
        return sql(self.src, *stmts)

    def target(self, *stmts: str) -> list:
        return sql(self.tgt, *stmts)

    def rows(self, table: str = "t") -> list:
        return self.target(f"SELECT * FROM `{self.tdb}`.`{table}` ORDER BY 1")

    def source_rows(self, table: str = "t") -> list:
        return self.source(f"SELECT * FROM `{self.db}`.`{table}` ORDER BY 1")

    def config(self) -> dict[str, Any]:
        return yaml.safe_load(self.cfg.read_text())

    def write_config(self, raw: dict[str, Any]) -> None:
        self.cfg.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True))

    def edit_mapping(self, name: str = "t.yml", **db_mapping: Any) -> None:
        p = self.mapping(name)
        raw = yaml.safe_load(p.read_text())
        raw["dbMapping"].update(db_mapping)
        for k in [k for k, v in raw["dbMapping"].items() if v is None]:
            del raw["dbMapping"][k]
        p.write_text(yaml.safe_dump(raw, sort_keys=False))

    def add_mapping(self, name: str, content: dict[str, Any]) -> Path:
        p = self.mapping(name)
        p.write_text(yaml.safe_dump(content, sort_keys=False))
        return p

    def drop(self) -> None:
        self.source(f"DROP DATABASE IF EXISTS `{self.db}`")
        self.target(f"DROP DATABASE IF EXISTS `{self.tdb}`")


def t_mapping(db: str, table: str = "t", target: str = "t", **more: Any) -> dict[str, Any]:
    """A canal dbMapping (mapAll) of ``db.table`` into the target's ``target`` table."""
    return {"dataSourceKey": "defaultDS", "outerAdapterKey": "t",
            "dbMapping": {"database": db, "table": table, "targetTable": target, "targetPk": {"id": "id"},
                          "mapAll": True, **more}}


def make(root: Path, src: dict, tgt: dict, *, folder: str = "", target_table: bool = True,
         tables: tuple[str, ...] = ("t", "u")) -> Deployment:
    """Create the databases and write the deployment under ``root / folder``; capture once (the
    store starts before any row is written)."""
    db = f"op_{uuid.uuid4().hex[:8]}"
    base = root / folder if folder else root
    base.mkdir(parents=True, exist_ok=True)
    sql(src, f"CREATE DATABASE `{db}`", *(f"CREATE TABLE `{db}`.`{t}` (id INT PRIMARY KEY, b VARCHAR(40))"
                                          for t in tables))
    sql(tgt, f"CREATE DATABASE `{db}_t`",
        *([f"CREATE TABLE `{db}_t`.t (id INT PRIMARY KEY, b VARCHAR(40))"] if target_table else []))
    cfg = write_deployment(base, src, name=db, include=rf"{db}\..*", master="local[1]", partitions=1,
                           groups=[{"groupId": "g1", "outerAdapters": [rdb_adapter(tgt, "t", f"{db}_t")],
                                    "mappings": ["mappings/*.yml"]}], mappings={"t.yml": t_mapping(db)})
    raw = yaml.safe_load(cfg.read_text())
    raw["store"]["path"] = "store"  # relative to the config file, as a user writes it
    cfg.write_text(yaml.safe_dump(raw, sort_keys=False))
    d = Deployment(base, cfg, db, src, tgt)
    d.ok("capture", "--once")
    return d
