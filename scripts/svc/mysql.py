"""Oracle MySQL (Debian sid's mysql-server-core 9.7.x): the binlog *source* ``mysql`` and a target
``mysql-target``, on private loopback ports with their own data directories.

The binaries come from a Debian sid tree built once per machine (scripts/svc/chroot.py) and run on
the host through that tree's dynamic loader. The source writes the binlog a capture needs (ROW,
FULL row image, FULL row metadata, GTIDs on, ``log_replica_updates``); both run MySQL's defaults
otherwise (``utf8mb4_0900_ai_ci``, a NO PAD collation; ``innodb_native_foreign_keys=OFF`` on 9.x,
so cascaded rows are binlogged), ``default-time-zone=America/New_York`` with the process under
``TZ=Asia/Kolkata`` (as the MariaDB services), and TLS from the same kind of throw-away CA as
MariaDB's (``info["ssl_ca"]``, ``["ssl_cert"]``, ``["ssl_key"]``; optional for root). Root logs in
with MySQL's default ``caching_sha2_password`` (PyMySQL needs ``cryptography`` for its full
authentication without TLS).
"""

from __future__ import annotations

import os
from pathlib import Path

from scripts.svc import chroot
from scripts.svc.base import Ctx, Service, ServiceError, reset_dir, run, spawn, stop_pid, wait_until
from scripts.svc.mariadb import PROCESS_TZ, ROOT_PASSWORD, TIME_ZONE, MariaDB


class MySQL(Service):
    """One mysqld of the sid tree on a private loopback port with its own datadir."""

    def __init__(self, name: str, server_id: int, source: bool, extra: tuple[str, ...] = ()):
        self.name, self.server_id, self.source = name, server_id, source
        self.extra = tuple(extra)  # more [mysqld] lines, last (a later option overrides an earlier one)

    def install(self, ctx: Ctx) -> None:
        chroot.ensure()

    @staticmethod
    def client_command(info: dict, sql: str | None, db: str = "", socket: Path | None = None,
                       home: Path | None = None) -> tuple[list[str], dict]:
        """The tree's ``mysql`` client running ``sql`` (batch mode, no headers; None: what stdin
        gives) and its environment:
        over ``socket`` as root without a password (a fresh server), else over TCP with a client
        option file under ``home`` that holds the password (never on the command line)."""
        root = Path(info.get("chroot") or chroot.chroot_dir())
        if socket:
            opts = ["--no-defaults", f"--socket={socket}", "-uroot"]
        else:
            cnf = Path(home or info["home"]) / "client.cnf"
            if not cnf.exists():
                cnf.write_text(f"[client]\nuser={info['user']}\npassword={info['password']}\n")
                cnf.chmod(0o600)
            opts = [f"--defaults-file={cnf}", "--protocol=tcp", "-h", "127.0.0.1", "-P", str(info["port"])]
        cmd = chroot.command(root, "usr/bin/mysql", *opts, f"--character-sets-dir={root}/usr/share/mysql/charsets",
                             "-N", "-B", *(["-e", sql] if sql is not None else []), *([db] if db else []))
        return cmd, dict(os.environ)

    def _client(self, info: dict, sql: str, db: str = "", socket: Path | None = None) -> str:
        cmd, env = self.client_command(info, sql, db, socket)
        return run(cmd, env=env, timeout=120).stdout.strip()

    def options(self, home: Path, port: int, root: Path, with_tz: bool) -> list[str]:
        """The ``[mysqld]`` options of this instance, ``extra`` last."""
        tls = MariaDB._tls(home)
        lines = [
            "user=root",
            f"basedir={root / 'usr'}",
            f"lc-messages-dir={root / 'usr/share/mysql'}",
            f"character-sets-dir={root / 'usr/share/mysql/charsets'}",
            f"plugin-dir={root / 'usr/lib/mysql/plugin'}",
            f"datadir={home / 'data'}",
            f"socket={home / 'mysqld.sock'}",
            f"pid-file={home / 'mysqld.pid'}",
            f"log-error={home / 'error.log'}",
            f"secure-file-priv={home / 'files'}",
            f"tmpdir={MariaDB._tmpdir(home)}",
            "bind-address=127.0.0.1",
            f"port={port}",
            "mysqlx=OFF",  # the X plugin would listen on the fixed port 33060
            "skip-name-resolve",
            "character-set-server=utf8mb4",
            "collation-server=utf8mb4_0900_ai_ci",  # MySQL's default, NO PAD
            f"server-id={self.server_id}",
            "innodb_buffer_pool_size=256M",
            "innodb_redo_log_capacity=128M",
            "innodb_flush_log_at_trx_commit=2",
            "max_connections=300",
            "performance_schema=OFF",
            f"ssl-ca={tls / 'ca.pem'}",
            f"ssl-cert={tls / 'server-cert.pem'}",
            f"ssl-key={tls / 'server-key.pem'}",
        ]
        if self.source:
            lines += [
                f"log-bin={home / 'binlog' / 'binlog'}",
                "binlog_format=ROW",
                "binlog_row_image=FULL",
                "binlog_row_metadata=FULL",
                "gtid_mode=ON",
                "enforce_gtid_consistency=ON",
                "log_replica_updates=ON",
                "max_binlog_size=64M",
                "sync_binlog=0",
            ]
        else:
            lines.append("skip-log-bin")
        if with_tz:
            lines.append(f"default-time-zone={TIME_ZONE}")
        return lines + list(self.extra)

    def _cnf(self, home: Path, port: int, with_tz: bool) -> Path:
        cnf = home / "my.cnf"
        cnf.write_text("[mysqld]\n" + "\n".join(self.options(home, port, chroot.ensure(), with_tz)) + "\n")
        return cnf

    def _launch(self, home: Path, cnf: Path) -> int:
        env = dict(os.environ, TZ=PROCESS_TZ)
        return spawn(chroot.command(chroot.ensure(), "usr/sbin/mysqld", f"--defaults-file={cnf}"),
                     home / "stdout.log", env=env)

    def _wait(self, info: dict, home: Path, pid: int, socket: Path | None = None) -> None:
        wait_until(f"{self.name} (mysqld :{info['port']})",
                   lambda: self._client(info, "SELECT 1", socket=socket) == "1",
                   timeout=180, logfile=home / "error.log", pid=pid)

    def start(self, ctx: Ctx) -> dict:
        root = chroot.ensure()
        home = ctx.home(self.name)
        port = ctx.port(self.name)
        info = {"host": "127.0.0.1", "port": port, "user": "root", "password": ROOT_PASSWORD, "flavor": "mysql",
                "time_zone": TIME_ZONE, "process_tz": PROCESS_TZ, "home": str(home), "chroot": str(root),
                "ssl_ca": str(home / "tls" / "ca.pem"), "ssl_cert": str(home / "tls" / "client-cert.pem"),
                "ssl_key": str(home / "tls" / "client-key.pem")}
        (home / "files").mkdir(exist_ok=True)
        (home / "client.cnf").unlink(missing_ok=True)  # rewritten with this start's credentials
        fresh = not (home / "data" / "mysql.ibd").exists()
        if fresh:
            reset_dir(home / "data")
            (home / "binlog").mkdir(exist_ok=True)
            cnf = self._cnf(home, port, with_tz=False)
            run(chroot.command(root, "usr/sbin/mysqld", f"--defaults-file={cnf}", "--initialize-insecure"),
                timeout=600)
        pid = self._launch(home, self._cnf(home, port, with_tz=not fresh))
        if fresh:  # root's password, the time zone tables, then a restart with the zone
            sock = home / "mysqld.sock"
            self._wait(info, home, pid, socket=sock)
            tz_sql = run(chroot.command(root, "usr/bin/mysql_tzinfo_to_sql", "/usr/share/zoneinfo"),
                         timeout=300).stdout
            cmd, env = self.client_command(info, None, "mysql", socket=sock)
            run(cmd, input=tz_sql, env=env, timeout=300)
            self._client(info, f"ALTER USER 'root'@'localhost' IDENTIFIED BY '{ROOT_PASSWORD}';"
                         f"CREATE USER 'root'@'127.0.0.1' IDENTIFIED BY '{ROOT_PASSWORD}';"
                         "GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;"
                         + ("RESET BINARY LOGS AND GTIDS;" if self.source else ""), socket=sock)
            stop_pid(pid)
            pid = self._launch(home, self._cnf(home, port, with_tz=True))
        self._wait(info, home, pid)
        info["pid"] = pid
        info["version"] = self._client(info, "SELECT VERSION()")
        return info

    def restart(self, ctx: Ctx, info: dict) -> dict:
        """A clean shutdown (SIGTERM) and a start on the same port and datadir; the source starts a
        new binlog file. Returns the updated info (new pid)."""
        home = ctx.home(self.name)
        stop_pid(info.get("pid"))
        pid = self._launch(home, self._cnf(home, int(info["port"]), with_tz=True))
        self._wait(info, home, pid)
        return {**info, "pid": pid}

    def check(self, ctx: Ctx, info: dict) -> str:
        out = self._client(info, "SELECT VERSION(), @@global.time_zone, @@log_bin, @@binlog_format, @@gtid_mode")
        if not out:
            raise ServiceError(f"{self.name}: no answer")
        version, tz, log_bin, fmt, gtid = out.split("\t")
        extra = f", binlog {fmt}, gtid_mode {gtid}" if log_bin == "1" else ""
        return f"MySQL {version}, tz {tz}{extra}"


SERVICES = {
    "mysql": MySQL("mysql", server_id=201, source=True),
    "mysql-target": MySQL("mysql-target", server_id=202, source=False),
}
