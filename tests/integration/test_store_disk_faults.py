"""A batch file is whole or absent when the disk fails, not only when a process dies (issue #40, 6).

The store lives on a real file system of its own: a tmpfs mounted with a size limit (root; this
VM's kernel has no device-mapper, so no dm-error/dm-flakey device). Three faults, each met the way
the message's ``fix:`` says, then everything the source wrote is in the store exactly once:

* the disk fills up during capture (a ballast file leaves little room): capture exits 2 naming
  the file and "No space left on device"; the committed batches verify, no temp file is left;
  deleting the ballast (the fix: free space) and capturing again stores the rest exactly once;
* the disk is full when a group acks: the ack raises the same error, the cursor is the old one;
  after freeing space the ack goes through;
* an fsync fails with EIO (a failing disk): injected at the C library by an ``LD_PRELOAD`` shim
  built here with gcc, for the writes of one batch file only. Capture exits 2 naming the file and
  the I/O error, that batch was never committed (the temp file is gone, the batches before it
  verify), and a capture without the fault stores it and the rest exactly once.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from pipeline.config import load_config
from pipeline.fsutil import is_temp_name
from pipeline.store.files import BatchStore
from sluice_common.errors import StoreError
from tests.support import sysbench
from tests.support.capture_check import all_records, mark_start, replay, source_rows, write_config
from tests.support.deploy import sluice
from tests.support.prereq import missing

SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* fsync and fdatasync fail with EIO for files whose path contains $SLUICE_TEST_FSYNC_EIO */
static int failing(int fd) {
    const char *m = getenv("SLUICE_TEST_FSYNC_EIO");
    char link[64], path[4096];
    ssize_t n;
    if (!m || !*m) return 0;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    n = readlink(link, path, sizeof path - 1);
    if (n < 0) return 0;
    path[n] = 0;
    return strstr(path, m) != NULL;
}

int fsync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    if (failing(fd)) { errno = EIO; return -1; }
    return real(fd);
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    if (failing(fd)) { errno = EIO; return -1; }
    return real(fd);
}
"""


@pytest.fixture()
def small_fs(tmp_path):
    """A 12 MiB tmpfs at tmp_path/fs (unmounted afterwards)."""
    mnt = tmp_path / "fs"
    mnt.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=12m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if proc.returncode != 0:
        missing(f"mounting a size-limited tmpfs needs root: {proc.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.fixture()
def db_name(mariadb):
    name = f"disk_{uuid.uuid4().hex[:8]}"
    sysbench.create_database(mariadb, name)
    yield name
    sysbench.drop_database(mariadb, name)


def _workload(mariadb: dict, db: str) -> None:
    """About 6 MiB of batch records: 2400 rows of 1500 characters in transactions of 100 rows,
    then updates (before and after images), a key change and deletes."""
    with sysbench.connect(mariadb, db) as c, c.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(1600) NOT NULL, n INT NOT NULL)")
        for lo in range(0, 2400, 100):
            cur.execute("INSERT INTO t VALUES " + ",".join(f"({i}, REPEAT(CHAR(65 + {i} % 26), 1500), {i})"
                                                           for i in range(lo, lo + 100)))
            c.commit()
        cur.execute("UPDATE t SET n = n + 1, v = CONCAT('u', v) WHERE id % 5 = 0")
        cur.execute("UPDATE t SET id = id + 100000 WHERE id BETWEEN 10 AND 19")
        cur.execute("DELETE FROM t WHERE id % 7 = 0")
        c.commit()


def _ballast(path: Path, leave: int) -> None:
    """Fill the file system of ``path`` but for ``leave`` bytes."""
    free = shutil.disk_usage(path.parent).free
    with open(path, "wb") as f:
        f.truncate(0)
        f.write(b"\0" * max(free - leave, 0))


def _store(config: str) -> Path:
    return Path(load_config(config).store_dir())


def _exactly_once(mariadb: dict, config: str, db: str) -> None:
    store = str(_store(config))
    assert sluice("store", "verify", "--config", config).returncode == 0
    with sysbench.connect(mariadb, db) as c:
        expected = source_rows(c, db, "t", ["id"])
    assert replay(all_records(store, db))[f"{db}.t"] == expected  # a duplicate INSERT would have raised


def _no_temps(store: Path) -> None:
    left = [n for n in os.listdir(store / "batches") if is_temp_name(n)]
    assert not left, left


def test_disk_full_during_capture_then_freed(mariadb, small_fs, db_name):
    config = write_config(mariadb, small_fs, f"{db_name}\\..*", max_rows=300)
    mark_start(config)
    _workload(mariadb, db_name)
    _ballast(small_fs / "ballast", leave=2 << 20)   # room for about a third of the batches
    full = sluice("capture", "--config", config, "--once", check=False)
    assert full.returncode == 2, full.stderr[-3000:]
    err = full.stderr
    assert "No space left on device" in err and "fix: free space on the file system of" in err, err[-3000:]
    assert f"{_store(config)}/" in err, err[-3000:]  # the message names the file it could not write
    assert "Traceback" not in err, err[-3000:]
    store = _store(config)
    committed = BatchStore(store, create=False).batches()
    assert committed, "nothing was committed before the disk filled: the test proves less than it says"
    _no_temps(store)
    assert sluice("store", "verify", "--config", config).returncode == 0

    (small_fs / "ballast").unlink()                  # the fix: free space
    sluice("capture", "--config", config, "--once")
    assert len(BatchStore(store, create=False).batches()) > len(committed)
    _exactly_once(mariadb, config, db_name)

    # the disk is full when a group acks: the old cursor stays, the ack goes through once freed
    st = BatchStore(store, create=False)
    st.ack("g1", 1)
    _ballast(small_fs / "ballast", leave=0)
    with pytest.raises(StoreError) as e:
        st.ack("g1", 2)
    assert "No space left on device" in str(e.value) and "g1" in str(e.value)
    assert st.cursor("g1") == 1
    _no_temps(store)
    (small_fs / "ballast").unlink()
    st.ack("g1", 2)
    assert BatchStore(store, create=False).cursor("g1") == 2


def test_fsync_failure_commits_nothing_of_that_batch(mariadb, tmp_path, db_name):
    if shutil.which("gcc") is None:
        missing("gcc builds the LD_PRELOAD shim that fails fsync")
    src, shim = tmp_path / "fsync_eio.c", tmp_path / "fsync_eio.so"
    src.write_text(SHIM)
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(shim), str(src), "-ldl"], check=True)
    config = write_config(mariadb, tmp_path, f"{db_name}\\..*", max_rows=300)
    mark_start(config)
    _workload(mariadb, db_name)
    store = _store(config)
    env = {"LD_PRELOAD": str(shim), "SLUICE_TEST_FSYNC_EIO": "000000000004.jsonl"}
    failed = sluice("capture", "--config", config, "--once", env=env, check=False)
    assert failed.returncode == 2, failed.stderr[-3000:]
    assert "Input/output error" in failed.stderr and "000000000004.jsonl" in failed.stderr, failed.stderr[-3000:]
    assert "fix: the disk under" in failed.stderr and "Traceback" not in failed.stderr, failed.stderr[-3000:]
    assert [m.batch_id for m in BatchStore(store, create=False).batches()] == [1, 2, 3]
    _no_temps(store)
    assert not (store / "batches" / "000000000004.jsonl").exists()

    sluice("capture", "--config", config, "--once")  # the disk is good again
    assert len(BatchStore(store, create=False).batches()) > 4
    _exactly_once(mariadb, config, db_name)
