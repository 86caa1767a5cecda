"""A private HBase Thrift1 gateway for fault tests: same command line as scripts/svc/hbase.py,
its own port, against the shared HBase; killed and restarted by the test, never the shared one."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import happybase


class OwnThrift:
    """A private ThriftServer JVM against the shared HBase (never the shared gateway)."""

    def __init__(self, hbase: dict, port: int):
        from scripts.svc import base
        from scripts.svc.hbase import HOST, HBase

        home = Path(hbase["home"])
        svc, ctx = HBase(), base.Ctx.load()
        cmd = [*svc._jvm(ctx, home / "conf", "256m", "thrift"), "org.apache.hadoop.hbase.thrift.ThriftServer",
               "-b", HOST, "-p", str(port), "-threadpool", "start"]
        self.port = port
        self.log = home / f"thrift-test-{port}.log"
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=svc._env(home), cwd=home, start_new_session=True)
        deadline = time.time() + 90
        while time.time() < deadline:
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            try:
                c = happybase.Connection(HOST, port, timeout=5000)
                c.tables()
                c.close()
                return
            except Exception:  # noqa: BLE001 - not up yet
                time.sleep(0.5)
        self.kill()
        raise AssertionError(f"own thrift server on {port} did not start: {self.log.read_text()[-3000:]}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)
