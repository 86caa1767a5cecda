"""`sluice store recapture --from N`: drop batch N and later ones so capture reads them again."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipeline.store.files import BatchStore
from sluice_common.errors import StoreError

REPO = Path(__file__).resolve().parents[2]


def pos(i: int) -> dict:
    return {"logfile": "mariadb-bin.000003", "logpos": 1000 + i}


def make_store(root: Path, n: int) -> BatchStore:
    store = BatchStore(root)
    with store.capture_lock():
        for i in range(1, n + 1):
            store.append([{"type": "INSERT", "data": [{"id": str(i)}]}], start=pos(i - 1), end=pos(i))
    return store


def ack_to(store: BatchStore, group: str, last: int) -> None:
    for meta in store.get(group, last):
        store.ack(group, meta.batch_id)


def test_drop_from_resumes_capture_at_the_dropped_batch_start(tmp_path: Path) -> None:
    store = make_store(tmp_path, 5)
    ack_to(store, "g", 2)
    with store.capture_lock():
        assert store.drop_from(3) == pos(2)
        assert store.batch_ids() == [1, 2] and store.last_position() == pos(2)
        store.append([{"type": "INSERT", "data": [{"id": "x"}]}], start=pos(2), end=pos(7))
    assert store.batch_ids() == [1, 2, 3] and store.meta(3).start == pos(2)
    assert [b.batch_id for b in store.get("g", 5)] == [3]


def test_drop_from_first_batch_keeps_its_start(tmp_path: Path) -> None:
    store = make_store(tmp_path, 2)
    with store.capture_lock():
        assert store.drop_from(1) == pos(0)
    assert store.batch_ids() == [] and store.last_position() == pos(0)


def test_refused_while_a_group_acked_the_batch_or_without_the_lock(tmp_path: Path) -> None:
    store = make_store(tmp_path, 3)
    ack_to(store, "g", 2)
    with store.capture_lock():
        with pytest.raises(StoreError, match=r"(?s)group g has acked batch 2 >= 2.*set-cursor --group g --to 1"):
            store.drop_from(2)
        with pytest.raises(StoreError, match="no committed batch 9"):
            store.drop_from(9)
    with pytest.raises(StoreError, match="capture lock"):
        store.drop_from(3)
    assert store.batch_ids() == [1, 2, 3]


def test_cli_recapture(tmp_path: Path) -> None:
    make_store(tmp_path / "store" / "default", 4)  # the store dir is <path>/<source name>
    cfg = tmp_path / "sluice.yml"
    cfg.write_text(yaml.safe_dump({"source": {"host": "127.0.0.1", "port": 1, "user": "u", "password": "p"},
                                   "store": {"path": str(tmp_path / "store")}}))
    run = subprocess.run([sys.executable, "-m", "pipeline.cli", "store", "recapture", "--config", str(cfg),
                          "--from", "2"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "dropped batches 2..4" in run.stdout and json.dumps(pos(1), sort_keys=True) in run.stdout
    again = subprocess.run([sys.executable, "-m", "pipeline.cli", "store", "recapture", "--config", str(cfg),
                            "--from", "3"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert again.returncode == 2 and "no committed batch 3" in again.stderr and "Traceback" not in again.stderr
