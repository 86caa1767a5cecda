"""A promoted replica (issue 36 case 5), MariaDB and MySQL: a primary with a GTID replica
(``log_slave_updates``); Sluice captures part of a seeded random workload from the primary; the
primary stops, the replica is promoted and ``source.port`` points at it. The stored file/offset
means nothing there: capture must resume by GTID (the replica has every transaction up to the
stored GTID state), capture what the old primary wrote after the stored position and what the new
primary writes, and after ``sluice run`` the mirror must equal the new primary byte for byte.
Before that, pointed at the replica while it lags behind what was captured, capture must refuse
naming the GTIDs the replica lacks, and store nothing. After the first batch from the new server,
positions are the new server's and the next run resumes by file and offset there.

One Spark run per flavour (capture alone elsewhere) keeps it short; the MySQL pair runs with
``SLUICE_E2E_FULL=1`` (the suite's convention for longer forms; README). On main, capture resumed
by the stored file/offset on the promoted replica.
"""

from __future__ import annotations

import pytest

from tests.support import failover as fo
from tests.support import sysbench
from tests.support.deploy import sluice
from tests.support.matrix import FULL
from tests.support.replicas import start_pair

TARGET = {"mariadb": "mariadb_target", "mysql": "mysql_target"}
FAILOVER = "resuming by GTID"
#: the MySQL pair with SLUICE_E2E_FULL=1 only (CI time; not a skip: the test is not collected)
FLAVORS = ["mariadb", "mysql"] if FULL else ["mariadb"]


def _missing(pair, stored_gtid: str, lagging: str) -> str:
    """The GTIDs of ``stored_gtid`` a replica at ``lagging`` lacks, as the refusal names them."""
    if pair.flavor == "mysql":
        return str(pair.primary.value(f"SELECT GTID_SUBTRACT('{stored_gtid}', '{lagging}')")).replace("\n", "")
    return f"{stored_gtid} (its newest is {lagging})"


@pytest.mark.parametrize("flavor", FLAVORS)
def test_capture_follows_a_promoted_replica_by_gtid(flavor, tmp_path, request):
    target = request.getfixturevalue(TARGET[flavor])
    pair = start_pair(flavor, tmp_path)
    db = None
    try:
        primary, replica = pair.primary, pair.replica
        cfg, db = fo.mirror(tmp_path, primary.info, target, "failover")
        fo.create(primary, db)
        fo.write(primary, db, seed=50, steps=60)

        # the replica falls behind what Sluice captured: pointed at it, capture refuses by name
        pair.wait_caught_up()
        pair.stop_replica()
        lagging = replica.gtid_executed()
        fo.write(primary, db, seed=51, steps=20)
        sluice("capture", "--config", str(cfg), "--once")
        pos, batches = fo.stored(cfg)
        assert pos["serverId"] == 301 and batches, pos
        fo.point(cfg, replica.info)
        p = sluice("capture", "--config", str(cfg), "--once", check=False)
        assert p.returncode == 1, p.stderr[-3000:]
        assert "the source is another server (server_id 302" in p.stderr, p.stderr[-3000:]
        assert f"lacks GTIDs that capture has stored: {_missing(pair, pos['gtid'], lagging)}" in p.stderr, \
            p.stderr[-3000:]
        assert fo.stored(cfg) == (pos, batches)

        # it catches up with writes Sluice has not read; the primary stops; the replica is promoted
        pair.start_replica()
        fo.write(primary, db, seed=52, steps=20)
        pair.wait_caught_up()
        pair.stop_primary()
        new = pair.promote()
        fo.write(new, db, seed=53, steps=30)
        p = sluice("capture", "--config", str(cfg), "--once")
        assert FAILOVER in p.stderr, p.stderr[-3000:]
        after, _ = fo.stored(cfg)
        assert after["serverId"] == 302 and after["fileTs"], after

        # from now on the positions are the new server's: resumed by file and offset; the mirror
        # of everything both servers wrote equals the new primary byte for byte
        fo.write(new, db, seed=54, steps=15)
        p = sluice("run", "--config", str(cfg))
        assert FAILOVER not in p.stderr, p.stderr[-3000:]
        assert fo.stored(cfg)[0]["logpos"] != after["logpos"]
        assert set(fo.differing(new.info, db, target).values()) == {0}
    finally:
        pair.close()
        if db:
            sysbench.drop_database(target, f"{db}_m")
