"""BatchStore durability: kill -9 at random moments loses nothing and commits nothing half-written."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from pipeline.store.files import BatchStore

REPO = Path(__file__).resolve().parents[2]

# A capture-like writer: resume from last_position(), append batches of consecutive row
# numbers forever; each batch's end position is the last row number it holds. A second
# loop acks batches for a group, so cursor files are also written while being killed.
WRITER = textwrap.dedent("""
    import random, sys
    from pipeline.store.files import BatchStore
    store = BatchStore(sys.argv[1])
    rng = random.Random(int(sys.argv[2]))
    with store.capture_lock():
        pos = store.last_position() or {"row": 0}
        print("ready", flush=True)
        while True:
            n = pos["row"]
            records = []
            for _ in range(rng.randint(1, 40)):
                k = rng.randint(1, 25)
                records.append({"type": "INSERT", "table": "t", "pad": "p" * rng.randint(0, 2000),
                                "data": [{"id": str(n + j + 1)} for j in range(k)]})
                n += k
            end = {"row": n, "logfile": "bin.000001"}
            store.append(records, start=pos, end=end, split=rng.random() < 0.1)
            pos = end
            for meta in store.get("g", 2):
                store.ack("g", meta.batch_id)
""")


def check_store(root: Path) -> tuple[int, int, int, int]:
    """Recover, then check every invariant; return (batches, rows, cursor, files cleaned)."""
    store = BatchStore(root)
    with store.capture_lock() as held:
        cleaned = len(held.cleaned)
    names = os.listdir(root / "batches")
    assert not [n for n in names if n.startswith(".")], f"temp files left: {names}"
    ids = store.batch_ids()
    assert ids == list(range(1, len(ids) + 1)), f"batchIds not contiguous: {ids}"
    assert sorted(names) == sorted([f"{i:012d}.jsonl" for i in ids] + [f"{i:012d}.meta.json" for i in ids])
    row = 0
    previous_end = {"row": 0}
    for meta in store.batches():
        assert meta.start == previous_end, f"batch {meta.batch_id} does not start where the last ended"
        rows = [int(r["id"]) for rec in store.read(meta) for r in rec["data"]]
        assert rows == list(range(row + 1, row + 1 + len(rows))), f"rows lost or repeated in {meta.batch_id}"
        assert len(rows) == meta.rows and meta.end["row"] == rows[-1]
        row = rows[-1]
        previous_end = meta.end
    assert store.last_position() == (previous_end if ids else None)
    assert 0 <= store.cursor("g") <= len(ids)
    return len(ids), row, store.cursor("g"), cleaned


def test_kill_9_at_random_moments_loses_nothing(tmp_path: Path) -> None:
    rng = random.Random(20260509)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    grew = cleaned = 0
    last = (0, 0, 0, 0)
    for kill in range(20):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), str(kill)], cwd=REPO, env=env,
                                stdout=subprocess.PIPE, text=True)
        try:
            # the moment is random from when the writer holds the lock (its start-up takes
            # anything from 0.1 to several seconds on a loaded machine)
            assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
            time.sleep(rng.uniform(0.05, 0.6))
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        assert proc.returncode == -signal.SIGKILL, "the writer stopped by itself (it failed?)"
        now = check_store(tmp_path)
        assert all(n >= o for n, o in zip(now[:3], last[:3], strict=True))  # nothing committed is lost
        grew += now[0] > last[0]
        cleaned += now[3]
        last = now
    assert grew >= 10, f"the writer committed batches in only {grew} of 20 runs"
    print(f"{last[0]} batches, {last[1]} rows, cursor {last[2]}, {cleaned} uncommitted files cleaned")
