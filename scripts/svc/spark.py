"""A Spark standalone master + one worker, started from the pyspark package's ``spark-class``.

Local mode needs no service; this is for tests that ``spark-submit --master spark://...``.
Executors run the project's virtualenv Python (PYSPARK_PYTHON), so they import the same
libraries the driver has.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from pathlib import Path

from scripts.svc.base import JAVA17_HOME, REPO, Ctx, Service, ServiceError, spawn, wait_until


def spark_home(ctx: Ctx) -> Path:
    """The pyspark package folder of the project's virtualenv (it is a SPARK_HOME)."""
    out = subprocess.run([ctx.venv_python, "-c", "import pyspark, os; print(os.path.dirname(pyspark.__file__))"],
                         text=True, capture_output=True)
    if out.returncode != 0:
        raise ServiceError(f"pyspark is not installed in {ctx.venv_python}; run scripts/bootstrap\n{out.stderr}")
    return Path(out.stdout.strip())


def spark_env(ctx: Ctx, home: Path) -> dict:
    """Environment for Spark daemons and spark-submit."""
    return dict(os.environ, JAVA_HOME=os.environ.get("JAVA_HOME", JAVA17_HOME),
                SPARK_HOME=str(spark_home(ctx)), SPARK_LOCAL_IP="127.0.0.1",
                SPARK_LOCAL_DIRS=str(home / "local"), SPARK_LOG_DIR=str(home),
                SPARK_WORKER_DIR=str(home / "work"), PYSPARK_PYTHON=ctx.venv_python,
                PYSPARK_DRIVER_PYTHON=ctx.venv_python, PYTHONPATH=str(REPO),
                SPARK_NO_DAEMONIZE="1")


class Spark(Service):
    """Master and worker on private loopback ports."""

    name = "spark"

    def _master_json(self, info: dict) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{info['master_ui_port']}/json/", timeout=5) as r:
            return json.load(r)

    def start(self, ctx: Ctx) -> dict:
        home = ctx.home(self.name)
        env = spark_env(ctx, home)
        spark_class = str(Path(env["SPARK_HOME"]) / "bin" / "spark-class")
        port, ui = ctx.port(self.name), ctx.port(self.name, "master_ui_port")
        wport, wui = ctx.port(self.name, "worker_port"), ctx.port(self.name, "worker_ui_port")
        info = {"host": "127.0.0.1", "port": port, "master_ui_port": ui, "worker_port": wport,
                "worker_ui_port": wui, "master_url": f"spark://127.0.0.1:{port}",
                "spark_home": env["SPARK_HOME"]}
        master_log, worker_log = home / "master.log", home / "worker.log"
        info["master_pid"] = spawn([spark_class, "org.apache.spark.deploy.master.Master",
                                    "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui)],
                                   master_log, env=env)
        wait_until(f"spark master :{port}", lambda: self._master_json(info)["status"] == "ALIVE",
                   timeout=120, logfile=master_log, pid=info["master_pid"])
        cores = os.environ.get("SLUICE_SPARK_WORKER_CORES", str(max(2, os.cpu_count() or 2)))
        memory = os.environ.get("SLUICE_SPARK_WORKER_MEMORY", "4g")
        info["worker_pid"] = spawn([spark_class, "org.apache.spark.deploy.worker.Worker", info["master_url"],
                                    "--host", "127.0.0.1", "--port", str(wport), "--webui-port", str(wui),
                                    "--cores", cores, "--memory", memory, "--work-dir", str(home / "work")],
                                   worker_log, env=env)
        wait_until("spark worker registered",
                   lambda: any(w["state"] == "ALIVE" for w in self._master_json(info)["workers"]),
                   timeout=120, logfile=worker_log, pid=info["worker_pid"])
        info["version"] = subprocess.run([ctx.venv_python, "-c", "import pyspark; print(pyspark.__version__)"],
                                         text=True, capture_output=True).stdout.strip()
        return info

    def check(self, ctx: Ctx, info: dict) -> str:
        st = self._master_json(info)
        alive = [w for w in st["workers"] if w["state"] == "ALIVE"]
        if st.get("status") != "ALIVE" or not alive:
            raise ServiceError(f"spark master {st.get('status')}, {len(alive)} alive workers")
        cores = sum(w["cores"] for w in alive)
        return (f"Spark {info.get('version', '?')} standalone {info['master_url']}, "
                f"{len(alive)} worker(s), {cores} cores")


SERVICE = Spark()
