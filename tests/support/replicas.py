"""Private primary + replica pairs for tests that stop, restart or promote a server (failover, a
follower that trails a replica), so they never touch the suite's shared services.

    pair = start_pair("mariadb", tmp_path)           # or "mysql"; both servers on free ports
    pair.primary.sql("CREATE DATABASE d")            # written on the primary ...
    pair.wait_caught_up()                            # ... and applied by the replica
    pair.stop_primary()                              # a clean shutdown (kill=True: SIGKILL)
    new = pair.promote()                             # the replica stops replicating and takes writes
    pair.close()                                     # both stopped, their files removed

    one = start_server("mysql", tmp_path)            # one private server (a test may RESET its binlog)
    one.close()

Both servers are the suite's own services (scripts/svc/mariadb.py, scripts/svc/mysql.py) started
with a services directory of their own under ``tmp``: the same binaries, settings, root password,
time zone and TLS as the ``mariadb`` / ``mysql`` fixtures, each writing a binlog (the replica with
``log_slave_updates`` / ``log_replica_updates``, so a promoted replica's binlog has the primary's
transactions with their GTIDs). The replica follows by GTID: MariaDB ``MASTER_USE_GTID=slave_pos``,
MySQL ``SOURCE_AUTO_POSITION=1`` (over TLS: root authenticates with ``caching_sha2_password``).

``replica_options`` / ``primary_options`` are more my.cnf lines (e.g. ``slave_parallel_threads=4``,
``slave_parallel_mode=optimistic``); ``replicate=False`` leaves the replica configured but not
started, for :meth:`Pair.start_replica` with ``until`` (``START SLAVE UNTIL master_gtid_pos = ...``,
MySQL ``START REPLICA UNTIL SQL_AFTER_GTIDS = ...``).
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from scripts.svc.base import SPAWNED, Ctx, stop_pid  # noqa: E402
from scripts.svc.mariadb import MariaDB  # noqa: E402
from scripts.svc.mysql import MySQL  # noqa: E402

#: small servers: a pair runs beside the suite's own
SMALL = ("innodb_buffer_pool_size=128M",)


@dataclass
class Server:
    """One server of a pair: its service object, its own services dir, and its info (host, port,
    user, password, pid, version, ...), the shape of the suite's fixtures."""

    service: MariaDB | MySQL
    ctx: Ctx
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def flavor(self) -> str:
        return "mysql" if isinstance(self.service, MySQL) else "mariadb"

    def start(self) -> Server:
        """Start (first time: initialise the datadir) and wait until it answers."""
        self.info = {**self.service.start(self.ctx), "flavor": self.flavor}
        return self

    def connect(self, database: str | None = None, **kw: Any) -> pymysql.connections.Connection:
        i = self.info
        return pymysql.connect(host=i["host"], port=int(i["port"]), user=i["user"], password=i["password"],
                               database=database, autocommit=True, charset="utf8mb4", **kw)

    def sql(self, *stmts: str | tuple[str, Any]) -> list[tuple]:
        """Run the statements on one connection; the rows of the last."""
        with self.connect() as c, c.cursor() as cur:
            for s in stmts:
                sql, args = s if isinstance(s, tuple) else (s, None)
                cur.execute(sql, args)
            return list(cur.fetchall())

    def value(self, sql: str) -> Any:
        rows = self.sql(sql)
        return rows[0][0] if rows else None

    def stop(self, kill: bool = False) -> None:
        """A clean shutdown (SIGTERM), or with ``kill`` a crash (SIGKILL)."""
        pid = self.info.get("pid")
        if kill and pid:
            os.kill(pid, signal.SIGKILL)
        stop_pid(pid)

    def restart(self) -> Server:
        """Start again after :meth:`stop`, on the same port and datadir."""
        self.info = {**self.service.restart(self.ctx, self.info), "flavor": self.flavor}
        return self

    def close(self) -> None:
        """Stop it and remove its files (a server of :func:`start_server`)."""
        self.stop()
        shutil.rmtree(self.ctx.services_dir, ignore_errors=True)

    def gtid_executed(self) -> str:
        """The server's GTID state: MariaDB ``gtid_binlog_pos``, MySQL ``gtid_executed``."""
        var = "@@GLOBAL.gtid_binlog_pos" if self.flavor == "mariadb" else "@@GLOBAL.gtid_executed"
        return str(self.value(f"SELECT {var}") or "").replace("\n", "")


@dataclass
class Pair:
    """A primary and its GTID replica (see the module docstring)."""

    flavor: str
    primary: Server
    replica: Server
    home: Path

    def change_source(self) -> None:
        """Point the replica at the primary, by GTID."""
        p = self.primary.info
        if self.flavor == "mariadb":
            self.replica.sql(f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={p['port']}, "
                             f"MASTER_USER='{p['user']}', MASTER_PASSWORD='{p['password']}', "
                             "MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1")
        else:
            self.replica.sql(f"CHANGE REPLICATION SOURCE TO SOURCE_HOST='127.0.0.1', SOURCE_PORT={p['port']}, "
                             f"SOURCE_USER='{p['user']}', SOURCE_PASSWORD='{p['password']}', "
                             "SOURCE_AUTO_POSITION=1, SOURCE_SSL=1, SOURCE_CONNECT_RETRY=1")

    def start_replica(self, until: str | None = None) -> None:
        """Start replicating; with ``until`` (a GTID state / set) stop once it is applied."""
        if self.flavor == "mariadb":
            self.replica.sql("START SLAVE" + (f" UNTIL master_gtid_pos = '{until}'" if until else ""))
        else:
            self.replica.sql("START REPLICA" + (f" UNTIL SQL_AFTER_GTIDS = '{until}'" if until else ""))

    def stop_replica(self) -> None:
        self.replica.sql("STOP SLAVE" if self.flavor == "mariadb" else "STOP REPLICA")

    def replica_status(self) -> dict[str, Any]:
        """``SHOW SLAVE STATUS`` / ``SHOW REPLICA STATUS`` as a dict (empty when not configured)."""
        with self.replica.connect() as c, c.cursor(pymysql.cursors.DictCursor) as cur:
            cur.execute("SHOW SLAVE STATUS" if self.flavor == "mariadb" else "SHOW REPLICA STATUS")
            return cur.fetchone() or {}

    def wait_caught_up(self, timeout: float = 120) -> str:
        """Wait until the replica has applied everything the primary has written; that GTID state."""
        want = self.primary.gtid_executed()
        if not want:
            return want
        if self.flavor == "mariadb":
            got = self.replica.value(f"SELECT MASTER_GTID_WAIT('{want}', {timeout})")
        else:
            got = self.replica.value(f"SELECT WAIT_FOR_EXECUTED_GTID_SET('{want}', {timeout})")
        if got != 0:
            state = {k: v for k, v in self.replica_status().items() if "Err" in k or "Running" in k}
            raise AssertionError(f"the {self.flavor} replica did not reach {want} in {timeout} s: {state}")
        return want

    def stop_primary(self, kill: bool = False) -> None:
        self.primary.stop(kill=kill)

    def promote(self, timeout: float = 60) -> Server:
        """Make the replica a primary: let it apply what it received (its I/O thread stops with the
        primary gone), stop replicating, forget the primary, take writes. Returns it."""
        word = "Master" if self.flavor == "mariadb" else "Source"
        deadline = time.time() + timeout
        while time.time() < deadline:  # everything the I/O thread received is applied
            st = self.replica_status()
            read = (st.get(f"{word}_Log_File"), st.get(f"Read_{word}_Log_Pos"))
            if not st or read == (st.get(f"Relay_{word}_Log_File"), st.get(f"Exec_{word}_Log_Pos")):
                break
            time.sleep(0.5)
        if self.flavor == "mariadb":
            self.replica.sql("STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL read_only = OFF")
        else:
            self.replica.sql("STOP REPLICA", "RESET REPLICA ALL", "SET GLOBAL super_read_only = OFF",
                             "SET GLOBAL read_only = OFF")
        return self.replica

    def close(self) -> None:
        """Stop both servers and remove their files."""
        for s in (self.replica, self.primary):
            s.stop()
        shutil.rmtree(self.home, ignore_errors=True)


def _server(flavor: str, home: Path, role: str, server_id: int, options: tuple[str, ...]) -> Server:
    cls = {"mariadb": MariaDB, "mysql": MySQL}[flavor]
    ctx = Ctx(services_dir=home / role, cache=Ctx.load().cache)
    ctx.services_dir.mkdir(parents=True, exist_ok=True)
    return Server(cls(role, server_id=server_id, source=True, extra=(*SMALL, *options)), ctx)


def start_server(flavor: str, tmp: Path, *, server_id: int = 311, options: tuple[str, ...] = ()) -> Server:
    """One private ``flavor`` source server in ``tmp`` (the suite's settings, its own binlog), for a
    test that resets, restores or replaces it; :meth:`Server.close` stops it and removes its files."""
    server = _server(flavor, Path(tmp) / f"{flavor}-single", "source", server_id, options)
    spawned = len(SPAWNED)
    try:
        return server.start()
    except BaseException:
        for pid in SPAWNED[spawned:]:
            stop_pid(pid)
        shutil.rmtree(server.ctx.services_dir, ignore_errors=True)
        raise


def start_pair(flavor: str, tmp: Path, *, replica_options: tuple[str, ...] = (),
               primary_options: tuple[str, ...] = (), replicate: bool = True, server_ids: tuple[int, int] = (301, 302)
               ) -> Pair:
    """Start a ``flavor`` ("mariadb" or "mysql") primary and a GTID replica in ``tmp`` (both at once),
    configure replication, and (``replicate``) start it."""
    home = Path(tmp) / f"{flavor}-pair"
    servers = [_server(flavor, home, role, sid, opts) for role, sid, opts in (
        ("primary", server_ids[0], primary_options), ("replica", server_ids[1], replica_options))]
    spawned = len(SPAWNED)
    try:
        with ThreadPoolExecutor(2) as pool:
            for f in [pool.submit(s.start) for s in servers]:
                f.result()
    except BaseException:
        for pid in SPAWNED[spawned:]:  # what the failed start began, and the other server
            stop_pid(pid)
        shutil.rmtree(home, ignore_errors=True)
        raise
    pair = Pair(flavor, servers[0], servers[1], home)
    try:
        pair.change_source()
        if replicate:
            pair.start_replica()
    except BaseException:
        pair.close()
        raise
    return pair
