"""PostgreSQL (Debian's postgresql-15) as an RDB target, on a private loopback port.

Run as the ``postgres`` system user (initdb refuses root) with its own data directory,
a password for user ``sluice`` and a database ``sluice``.
"""

from __future__ import annotations

import glob
import os
import pwd

from scripts.svc.base import Ctx, Service, ServiceError, apt_install, reset_dir, run, spawn, wait_until

USER, PASSWORD, DATABASE = "sluice", "sluice-pg-pw", "sluice"  # loopback-only test server


def _bindir() -> str:
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[4]))
    if not dirs:
        raise ServiceError("no PostgreSQL server binaries under /usr/lib/postgresql/*/bin")
    return dirs[-1]


class Postgres(Service):
    """One postgres server with its own PGDATA."""

    name = "postgres"

    def install(self, ctx: Ctx) -> None:
        apt_install("postgresql", "postgresql-client")

    def _psql(self, info: dict, sql: str, db: str = DATABASE) -> str:
        env = dict(os.environ, PGPASSWORD=info["password"])
        cmd = ["psql", "-h", "127.0.0.1", "-p", str(info["port"]), "-U", info["user"], "-d", db,
               "-At", "-v", "ON_ERROR_STOP=1", "-c", sql]
        return run(cmd, env=env, timeout=60).stdout.strip()

    def start(self, ctx: Ctx) -> dict:
        home = ctx.home(self.name)
        # the postgres user must reach the data dir through every parent directory
        os.chmod(home, 0o755)
        for parent in list(home.parents)[:-1]:
            mode = parent.stat().st_mode
            if not mode & 0o001:
                os.chmod(parent, mode | 0o001)
        pg = pwd.getpwnam("postgres")
        data, port, bindir = home / "data", ctx.port(self.name), _bindir()
        info = {"host": "127.0.0.1", "port": port, "user": USER, "password": PASSWORD,
                "database": DATABASE}
        fresh = not (data / "PG_VERSION").exists()
        if fresh:
            reset_dir(data)
            os.chown(home, pg.pw_uid, pg.pw_gid)
            os.chown(data, pg.pw_uid, pg.pw_gid)
            pwfile = home / "pwfile"
            pwfile.write_text(PASSWORD + "\n")
            os.chown(pwfile, pg.pw_uid, pg.pw_gid)
            run(["runuser", "-u", "postgres", "--", f"{bindir}/initdb", "-D", str(data), "-U", USER,
                 f"--pwfile={pwfile}", "-A", "scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8"],
                timeout=300)
            pwfile.unlink()
        log = home / "postgres.log"
        log.touch()
        os.chown(log, pg.pw_uid, pg.pw_gid)
        pid = spawn(["runuser", "-u", "postgres", "--", f"{bindir}/postgres", "-D", str(data),
                     "-p", str(port), "-c", "listen_addresses=127.0.0.1",
                     "-c", f"unix_socket_directories={home}", "-c", "fsync=off",
                     "-c", "max_connections=200", "-c", "shared_buffers=128MB",
                     "-c", "timezone=Asia/Tokyo"], log)
        wait_until(f"postgres :{port}", lambda: self._psql(info, "SELECT 1", db="postgres") == "1",
                   timeout=90, logfile=log, pid=pid)
        if fresh:
            self._psql(info, f"CREATE DATABASE {DATABASE}", db="postgres")
        info["pid"] = pid
        info["version"] = self._psql(info, "SHOW server_version")
        return info

    def stop(self, ctx: Ctx, info: dict) -> None:
        """A fast shutdown (open client connections are closed, not waited for) and its end;
        a SIGTERM alone is PostgreSQL's smart shutdown, which waits for every client."""
        data = ctx.home(self.name) / "data"
        if (data / "postmaster.pid").exists():
            run(["runuser", "-u", "postgres", "--", f"{_bindir()}/pg_ctl", "stop", "-D", str(data),
                 "-m", "fast", "-w", "-t", "60"], check=False, timeout=90)
        super().stop(ctx, info)

    def check(self, ctx: Ctx, info: dict) -> str:
        return f"PostgreSQL {self._psql(info, 'SHOW server_version')}"


SERVICE = Postgres()
