"""pipeline/job/pydaemon.py: workers import PySpark's installed package (cached bytecode), not its zip."""

from __future__ import annotations

from pipeline.job.pydaemon import prefer_installed


def _pkg(root, name="pyspark"):
    pkg = root / name
    (pkg / "python" / "lib").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    z = pkg / "python" / "lib" / "pyspark.zip"
    z.write_bytes(b"")
    return z


def test_the_zip_of_the_installed_package_goes_after_it(tmp_path):
    site = tmp_path / "site-packages"
    z = _pkg(site)
    py4j = str(tmp_path / "py4j.zip")
    path = [str(z), py4j, "/repo", str(site)]
    assert prefer_installed(path) == [py4j, "/repo", str(site), str(z)]


def test_a_zip_of_another_spark_keeps_its_place(tmp_path):
    site = tmp_path / "site-packages"
    _pkg(site)
    other = _pkg(tmp_path / "spark-dist")  # a Spark distribution's own zip, not the installed package's
    path = [str(other), str(site)]
    assert prefer_installed(path) == path


def test_without_an_installed_package_nothing_moves(tmp_path):
    z = _pkg(tmp_path / "opt")
    path = [str(z), "/usr/lib/python3/dist-packages"]
    assert prefer_installed(path) == path


def test_the_daemons_collection_after_each_task_is_a_young_one(monkeypatch):
    """PySpark's daemon calls ``gc.collect()`` after every task of a reused worker; through
    YoungCollections that collects generations 0 and 1 only, and the rest of ``gc`` is the real one."""
    import gc

    from pipeline.job.pydaemon import YoungCollections

    asked = []
    monkeypatch.setattr(gc, "collect", lambda generation=2: asked.append(generation) or 0)
    young = YoungCollections()
    young.collect()
    assert asked == [1]
    assert young.isenabled is gc.isenabled and young.get_threshold() == gc.get_threshold()
