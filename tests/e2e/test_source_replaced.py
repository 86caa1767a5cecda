"""A replaced binlog (issue 36 case 2): the stored position's file name exists on the source again,
but it is another file (``RESET MASTER`` / ``RESET BINARY LOGS AND GTIDS``, a server restored from a
backup, another server at the same address). The worst case: the new file has grown past the
stored offset, the offset falls on an event boundary in it, and the server's GTID numbering has
moved past the stored GTIDs (a restored server's GTID state), so neither the file size nor the
GTIDs give it away. Capture (what ``sluice run`` runs first) must refuse by name (the file's
creation time in its format description event) and store nothing from the new file, so nothing of
it is applied; on main it resumed inside the new file and the mirror diverged with exit 0.
(Capture alone, no Spark, keeps the test short; ``sluice run`` logs the same refusal with its fix:
tests/unit/test_ops_run_plan.py.)

Each flavour runs on a private server (tests/support/replicas.py): the suite's shared source is
never reset. MySQL runs by default, MariaDB (``RESET MASTER``) with ``SLUICE_E2E_FULL=1`` (CI time).
"""

from __future__ import annotations

import time

import pytest

from tests.support import failover as fo
from tests.support import sysbench
from tests.support.deploy import sluice
from tests.support.matrix import FULL
from tests.support.replicas import Server, start_server

TARGET = {"mariadb": "mariadb_target", "mysql": "mysql_target"}
FIRST = {"mariadb": "mysql-bin.000001", "mysql": "binlog.000001"}


def _reset(src: Server, restored_past: int | None = None) -> None:
    """Reset the binlog; ``restored_past``: then give the server the GTID state of a backup that had
    that many transactions (its numbering goes on after them)."""
    if src.flavor == "mariadb":
        src.sql("RESET MASTER")
        if restored_past:
            src.sql(f"SET GLOBAL gtid_binlog_state = '0-{src.value('SELECT @@server_id')}-{restored_past}'")
    else:
        src.sql("RESET BINARY LOGS AND GTIDS")
        if restored_past:
            src.sql(f"SET GLOBAL gtid_purged = '{src.value('SELECT @@server_uuid')}:1-{restored_past}'")


#: MySQL's RESET BINARY LOGS AND GTIDS by default; MariaDB's RESET MASTER with SLUICE_E2E_FULL=1 (CI time)
FLAVORS = ["mysql", "mariadb"] if FULL else ["mysql"]


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_replaced_binlog_is_refused_where_the_old_offset_is_an_event_boundary(flavor, tmp_path, request):
    target = request.getfixturevalue(TARGET[flavor])
    src = start_server(flavor, tmp_path)
    db = None
    try:
        _reset(src)  # the positions below are in the first binlog file
        cfg, db = fo.mirror(tmp_path, src.info, target, "replaced")
        fo.create(src, db)
        fo.write(src, db, seed=36, steps=60)
        sluice("capture", "--config", str(cfg), "--once")
        pos, batches = fo.stored(cfg)
        assert pos["logfile"] == FIRST[flavor] and pos["fileTs"] and batches, pos

        time.sleep(1.1)  # the new file's format description is dated a second later at least
        _reset(src, restored_past=5000)
        fo.write(src, db, seed=37, steps=15)             # what capture would skip,
        fo.grow_to(src, db, FIRST[flavor], pos["logpos"])  # up to the old offset exactly,
        fo.write(src, db, seed=38, steps=15)             # and more after it
        assert fo.binlog_end(src)[0] == FIRST[flavor]
        assert pos["logpos"] in fo.event_starts(src, FIRST[flavor])

        p = sluice("capture", "--config", str(cfg), "--once", check=False)
        err = p.stderr
        assert p.returncode == 1, err[-3000:]
        assert f"binlog {FIRST[flavor]} on the source is not the file" in err, err[-3000:]
        assert "format description event is dated" in err and "RESET" in err, err[-3000:]
        assert f"sluice bootstrap --config {cfg} --force" in err, err[-3000:]
        assert fo.stored(cfg) == (pos, batches)  # nothing stored (so nothing applied) from the new file
    finally:
        src.close()
        if db:
            sysbench.drop_database(target, f"{db}_m")
