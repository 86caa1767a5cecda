"""The Python worker daemon of sessions Sluice starts itself: PySpark's own, importing PySpark
from the installed package instead of from its zip.

Spark starts Python workers with ``pyspark.zip`` first on ``PYTHONPATH``. Python cannot cache
compiled code for modules it imports from a zip, so every new worker compiled ``pyspark.worker``
and what it imports from source again: about 1.0 s of CPU, against 0.4 s from the installed
package's cached bytecode, on the critical path of a small run's first task. When the zip is
the one inside the installed ``pyspark`` package (``pip install pyspark``: the same files), this
module moves it behind that package on ``sys.path`` and then runs ``pyspark.daemon`` unchanged.
Any other layout (a Spark distribution's zip, a cluster's executors) keeps PySpark's order.

It also makes the collection PySpark's daemon runs in a reused worker after every task a young
one (:class:`YoungCollections`): a full collection walked the worker's ~130k long-lived objects
(modules, classes, pools) each time, 0.06 s of CPU per task, 2-3 CPU seconds of a backlog's sync on
two cores, and found some 40 objects; Python's own full collections still run when the old
generation grows.

Used through ``spark.python.daemon.module`` for local masters only
(:func:`pipeline.job.session.get_spark`): on a cluster the executors' Python may not have Sluice.
"""

from __future__ import annotations

import gc
import os
import sys


class YoungCollections:
    """``gc`` as PySpark's daemon module sees it: ``collect()`` collects generations 0 and 1."""

    def __getattr__(self, name: str):
        return getattr(gc, name)

    @staticmethod
    def collect(generation: int = 1) -> int:
        return gc.collect(generation)


def prefer_installed(path: list[str]) -> list[str]:
    """``path`` with each ``pyspark.zip`` that lies inside an installed ``pyspark`` package of a
    later entry moved after that entry (other entries keep their order)."""
    out = list(path)
    for zip_path in [p for p in path if os.path.basename(p) == "pyspark.zip"]:
        zreal = os.path.realpath(zip_path)
        for entry in out:
            pkg = os.path.join(entry, "pyspark")
            if (entry != zip_path and os.path.isfile(os.path.join(pkg, "__init__.py"))
                    and zreal.startswith(os.path.realpath(pkg) + os.sep)):
                out.remove(zip_path)
                out.insert(out.index(entry) + 1, zip_path)
                break
    return out


if __name__ == "__main__":
    sys.path[:] = prefer_installed(sys.path)
    from pyspark import daemon

    daemon.gc = YoungCollections()
    daemon.manager()
