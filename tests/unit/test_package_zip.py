"""``sluice package`` builds the ``--py-files`` zip that spark-submit ships to a cluster whose
machines have no checkout: it must hold every package pyproject.toml installs (a package left out,
such as ``sluice_common`` when it was new, imports fine on a developer's machine through the
editable install and fails only on a cluster). Checked by importing the CLI and every adapter's
factory from the zip alone, with this checkout and its editable install off the path."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import zipfile

from tests.support.cli import cli
from tests.support.deploy import REPO

#: what the entry script and the executors import: the CLI (every command) and the writers
IMPORTS = ("pipeline.cli", "pipeline.job.partition", "adapters.registry", "adapters.rdb.factory",
           "adapters.es.factory", "adapters.opensearch.factory", "adapters.hbase.factory")

PROBE = """
import sys
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in (getattr(f, "__module__", None) or "").lower()]
sys.path[:] = [p for p in sys.path if p and os.path.abspath(p) != REPO]
sys.path.insert(0, ZIP)
import importlib
for name in IMPORTS:
    mod = importlib.import_module(name)
    assert mod.__file__.startswith(ZIP), (name, mod.__file__)
print("ok")
"""


def test_the_zip_holds_every_installed_package_and_imports_alone(tmp_path):
    proc = cli("package", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    (zpath,) = tmp_path.glob("sluice-*.zip")
    tops = {name.split("/")[0] for name in zipfile.ZipFile(zpath).namelist()}
    include = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    assert tops == {pattern.rstrip("*") for pattern in include}

    code = f"import os\nREPO = {str(REPO)!r}\nZIP = {str(zpath)!r}\nIMPORTS = {IMPORTS!r}\n" + PROBE
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, text=True, capture_output=True,
                         timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-4000:]
