"""The Python worker daemon of sessions Sluice starts itself: PySpark's own, importing PySpark
from the installed package instead of from its zip.

Spark starts Python workers with ``pyspark.zip`` first on ``PYTHONPATH``. Python cannot cache
compiled code for modules it imports from a zip, so every new worker compiled ``pyspark.worker``
and what it imports from source again: about 1.0 s of CPU, against 0.4 s from the installed
package's cached bytecode, on the critical path of a small run's first task. When the zip is
the one inside the installed ``pyspark`` package (``pip install pyspark``: the same files), this
module moves it behind that package on ``sys.path`` and then runs ``pyspark.daemon`` unchanged.
Any other layout (a Spark distribution's zip, a cluster's executors) keeps PySpark's order.

Used through ``spark.python.daemon.module`` for local masters only
(:func:`pipeline.job.session.get_spark`): on a cluster the executors' Python may not have Sluice.
"""

from __future__ import annotations

import os
import sys


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

    daemon.manager()
