"""MariaDB from Debian's mariadb-server: the binlog *source* and a second instance as a *target*.

The source runs with binlog ROW, FULL row image, ``binlog_row_metadata=FULL``, a server id,
GTIDs, and a non-UTC ``default_time_zone`` with DST (America/New_York, time zone tables
loaded) while the process itself runs under TZ=Asia/Kolkata, so naive-time bugs show.

Both offer TLS: a throw-away CA, a server certificate for 127.0.0.1 and a client certificate, made
once with ``openssl`` in ``<home>/tls`` (``info["ssl_ca"]``, ``["ssl_cert"]``, ``["ssl_key"]``), so a
test can create a user ``REQUIRE X509`` and check that every source connection uses the configured
TLS settings (pymysql tries TLS on its own, but presents a client certificate only when told).
TLS stays optional for other users.
"""

from __future__ import annotations

import os
from pathlib import Path

from scripts.svc.base import (
    Ctx,
    Service,
    ServiceError,
    apt_install,
    reset_dir,
    run,
    spawn,
    stop_pid,
    wait_until,
)

ROOT_PASSWORD = "sluice-root-pw"  # test-only credentials for a loopback-only server
TIME_ZONE = "America/New_York"
PROCESS_TZ = "Asia/Kolkata"


class MariaDB(Service):
    """One mariadbd on a private loopback port with its own datadir."""

    def __init__(self, name: str, server_id: int, source: bool, extra: tuple[str, ...] = ()):
        self.name, self.server_id, self.source = name, server_id, source
        self.extra = tuple(extra)  # more my.cnf lines, last (a later option overrides an earlier one)

    def install(self, ctx: Ctx) -> None:
        apt_install("mariadb-server", "mariadb-client")

    def _client(self, info: dict, sql: str, db: str = "", socket: Path | None = None) -> str:
        where = ([f"--socket={socket}"] if socket else
                 ["--protocol=tcp", "-h", "127.0.0.1", "-P", str(info["port"])])
        cmd = ["mariadb", *where, "-uroot", "-N", "-B", "-e", sql]
        if db:
            cmd.append(db)
        # over the socket we speak only to a fresh server, whose root has no password yet
        env = dict(os.environ, MYSQL_PWD="" if socket else info.get("password", ""))
        return run(cmd, env=env, timeout=60).stdout.strip()

    @staticmethod
    def _tls(home: Path) -> Path:
        """A CA, a server certificate for 127.0.0.1 and a client certificate in ``home/tls`` (made
        once; kept)."""
        d = home / "tls"
        if (d / "client-cert.pem").exists():
            return d
        d.mkdir(parents=True, exist_ok=True)
        ca, ca_key, key, csr = d / "ca.pem", d / "ca-key.pem", d / "server-key.pem", d / "server.csr"
        run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650", "-subj", "/CN=sluice-test-ca",
             "-keyout", str(ca_key), "-out", str(ca)], timeout=60)
        run(["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
             "-keyout", str(key), "-out", str(csr)], timeout=60)
        ext = d / "san.cnf"
        ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        run(["openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
             "-days", "3650", "-extfile", str(ext), "-out", str(d / "server-cert.pem")], timeout=60)
        run(["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=sluice-client",
             "-keyout", str(d / "client-key.pem"), "-out", str(csr)], timeout=60)
        tmp = d / "client-cert.pem.tmp"
        run(["openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
             "-days", "3650", "-out", str(tmp)], timeout=60)
        tmp.rename(d / "client-cert.pem")  # last: its presence means the set is complete
        return d

    @staticmethod
    def _tmpdir(home: Path) -> Path:
        """The server's own temporary folder: at start a server removes the ``#sql*`` files it
        finds in its tmpdir, so a shared /tmp lost the temporary tables of another server starting
        at the same time (a concurrent ``mariadb-install-db`` failed with "Unknown table")."""
        d = home / "tmp"
        d.mkdir(parents=True, exist_ok=True)
        return d

    def _cnf(self, home: Path, port: int, with_tz: bool) -> Path:
        tls = self._tls(home)
        lines = [
            "[mariadbd]",
            "user=root",
            f"datadir={home / 'data'}",
            f"socket={home / 'mysqld.sock'}",
            f"pid-file={home / 'mysqld.pid'}",
            f"log-error={home / 'error.log'}",
            f"tmpdir={self._tmpdir(home)}",  # a server deletes every #sql* file in its tmpdir when it starts
            "bind-address=127.0.0.1",
            f"port={port}",
            "skip-name-resolve",
            "character-set-server=utf8mb4",
            "collation-server=utf8mb4_unicode_ci",
            f"server-id={self.server_id}",
            "innodb_buffer_pool_size=1G",  # a working set of a few million rows stays in memory, as on a real server
            "innodb_log_file_size=64M",
            "innodb_flush_log_at_trx_commit=2",
            "max_connections=300",
            "performance_schema=OFF",
            f"ssl-ca={tls / 'ca.pem'}",
            f"ssl-cert={tls / 'server-cert.pem'}",
            f"ssl-key={tls / 'server-key.pem'}",
        ]
        if self.source:
            lines += [
                f"log-bin={home / 'binlog' / 'mysql-bin'}",
                "binlog_format=ROW",
                "binlog_row_image=FULL",
                "binlog_row_metadata=FULL",
                "binlog_annotate_row_events=ON",
                "log_slave_updates=ON",
                "max_binlog_size=64M",
                "sync_binlog=0",
            ]
        if with_tz:
            lines.append(f"default-time-zone={TIME_ZONE}")
        lines += self.extra
        cnf = home / "my.cnf"
        cnf.write_text("\n".join(lines) + "\n")
        return cnf

    def _launch(self, home: Path, cnf: Path) -> int:
        env = dict(os.environ, TZ=PROCESS_TZ)
        return spawn(["/usr/sbin/mariadbd", f"--defaults-file={cnf}"], home / "stdout.log", env=env)

    def start(self, ctx: Ctx) -> dict:
        home = ctx.home(self.name)
        port = ctx.port(self.name)
        info = {"host": "127.0.0.1", "port": port, "user": "root", "password": ROOT_PASSWORD,
                "time_zone": TIME_ZONE, "process_tz": PROCESS_TZ, "ssl_ca": str(home / "tls" / "ca.pem"),
                "ssl_cert": str(home / "tls" / "client-cert.pem"), "ssl_key": str(home / "tls" / "client-key.pem")}
        fresh = not (home / "data" / "mysql").exists()
        if fresh:
            reset_dir(home / "data")
            (home / "binlog").mkdir(exist_ok=True)
            run(["mariadb-install-db", "--user=root", f"--datadir={home / 'data'}", f"--tmpdir={self._tmpdir(home)}",
                 "--auth-root-authentication-method=normal", "--skip-test-db"], timeout=300)
        cnf = self._cnf(home, port, with_tz=not fresh)
        pid = self._launch(home, cnf)
        sock = home / "mysqld.sock" if fresh else None
        wait_until(f"{self.name} (mariadbd :{port})",
                   lambda: self._client(info, "SELECT 1", socket=sock) == "1",
                   timeout=120, logfile=home / "error.log", pid=pid)
        if fresh:  # set the root password, load time zone tables, restart with the zone
            tz_sql = run(["mariadb-tzinfo-to-sql", "/usr/share/zoneinfo"], timeout=300).stdout
            run(["mariadb", f"--socket={sock}", "-uroot", "mysql"], input=tz_sql, timeout=300)
            self._client(info, f"ALTER USER 'root'@'localhost' IDENTIFIED BY '{ROOT_PASSWORD}';"
                         f"CREATE OR REPLACE USER 'root'@'127.0.0.1' IDENTIFIED BY '{ROOT_PASSWORD}';"
                         "GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;"
                         + ("RESET MASTER;" if self.source else "") + "FLUSH PRIVILEGES;",
                         socket=sock)
            stop_pid(pid)
            cnf = self._cnf(home, port, with_tz=True)
            pid = self._launch(home, cnf)
            wait_until(f"{self.name} (mariadbd :{port})",
                       lambda: self._client(info, "SELECT 1") == "1",
                       timeout=120, logfile=home / "error.log", pid=pid)
        info["pid"] = pid
        info["version"] = self._client(info, "SELECT VERSION()")
        return info

    def restart(self, ctx: Ctx, info: dict) -> dict:
        """Stop the server (SIGTERM: a clean shutdown) and start it again on the same port and
        datadir; the source starts a new binlog file, as any restarted server does. Returns the
        updated info (new pid)."""
        home = ctx.home(self.name)
        stop_pid(info.get("pid"))
        pid = self._launch(home, self._cnf(home, int(info["port"]), with_tz=True))
        wait_until(f"{self.name} (mariadbd :{info['port']})", lambda: self._client(info, "SELECT 1") == "1",
                   timeout=120, logfile=home / "error.log", pid=pid)
        return {**info, "pid": pid}

    def check(self, ctx: Ctx, info: dict) -> str:
        out = self._client(info, "SELECT VERSION(), @@global.time_zone, @@log_bin, @@binlog_format")
        if not out:
            raise ServiceError(f"{self.name}: no answer")
        version, tz, log_bin, fmt = out.split("\t")
        extra = f", binlog {fmt}" if log_bin == "1" else ""
        return f"MariaDB {version}, tz {tz}{extra}"


class MariaDBReplica(MariaDB):
    """A parallel replica of the ``mariadb`` source (``bench/backlog.py``: the same backlog applied by
    MariaDB's own replication threads and by Sluice). Same binary and settings as the target, plus
    ``slave_parallel_threads=4``, ``slave_parallel_mode=optimistic``, its relay log in its home and
    ``skip-slave-start`` (a benchmark says where to start and stop: ``CHANGE MASTER TO
    MASTER_LOG_FILE/POS``, ``START SLAVE UNTIL``). Starting it makes sure the source has the
    replication user (``info["repl_user"]``, ``["repl_password"]``), created idempotently and
    outside the source's binlog."""

    needs = ("mariadb",)
    REPL_USER, REPL_PASSWORD = "sluice_repl", "sluice-repl-pw"  # test-only, loopback only

    def __init__(self, name: str, server_id: int, threads: int = 4, mode: str = "optimistic"):
        super().__init__(name, server_id, source=False,
                         extra=(f"slave_parallel_threads={threads}", f"slave_parallel_mode={mode}",
                                "skip-slave-start", "relay-log=relay-bin"))

    def start(self, ctx: Ctx) -> dict:
        src = ctx.state.get("mariadb")
        if not src:
            raise ServiceError(f"{self.name}: start the source first (scripts/services start mariadb)")
        u, pw = self.REPL_USER, self.REPL_PASSWORD
        self._client(src, "SET SESSION sql_log_bin = 0;"
                     f"CREATE USER IF NOT EXISTS '{u}'@'127.0.0.1' IDENTIFIED BY '{pw}';"
                     f"ALTER USER '{u}'@'127.0.0.1' IDENTIFIED BY '{pw}';"
                     f"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '{u}'@'127.0.0.1';")
        info = super().start(ctx)
        return {**info, "source": "mariadb", "repl_user": u, "repl_password": pw,
                "parallel": self._client(info, "SELECT CONCAT(@@slave_parallel_threads, ' ', @@slave_parallel_mode)")}

    def check(self, ctx: Ctx, info: dict) -> str:
        threads, mode = self._client(info, "SELECT @@slave_parallel_threads, @@slave_parallel_mode").split("\t")
        return f"{super().check(ctx, info)}, replica: {threads} parallel threads, {mode}"


SERVICES = {
    "mariadb": MariaDB("mariadb", server_id=101, source=True),
    "mariadb-target": MariaDB("mariadb-target", server_id=102, source=False),
    "mariadb-replica": MariaDBReplica("mariadb-replica", server_id=103),
}
