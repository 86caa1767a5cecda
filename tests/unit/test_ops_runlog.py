"""The run log: whole lines only, newest last, trimmed to ``keep`` runs; concurrent writers."""

from __future__ import annotations

import multiprocessing as mp

from pipeline.state.runlog import RunLog, new_run_id


def test_append_and_read_back(tmp_path):
    log = RunLog(tmp_path)
    assert log.runs() == [] and log.last() is None and log.last_success() is None
    log.append({"run": "a", "groups": ["g1"], "status": "ok"})
    log.append({"run": "b", "groups": ["g2"], "status": "failed", "errors": [{"message": "ü boom"}]})
    assert [r["run"] for r in log.runs()] == ["a", "b"]
    assert log.last()["run"] == "b" and log.last("g1")["run"] == "a" and log.last("g3") is None
    assert log.last_success()["run"] == "a"
    assert log.runs(limit=1)[0]["errors"][0]["message"] == "ü boom"


def test_a_line_cut_by_a_crash_is_skipped(tmp_path):
    log = RunLog(tmp_path)
    log.append({"run": "a"})
    with open(log.path, "ab") as f:
        f.write(b'{"run": "half')          # no newline: the writer died mid-line
    assert [r["run"] for r in log.runs()] == ["a"]


def test_trim_keeps_the_newest(tmp_path):
    log = RunLog(tmp_path, keep=10)
    for i in range(60):
        log.append({"run": str(i)})
    runs = [int(r["run"]) for r in log.runs()]
    assert runs[-1] == 59 and len(runs) <= 20 and runs == sorted(runs)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def _writer(root: str, n: int, who: int) -> None:
    log = RunLog(root, keep=1000)
    for i in range(n):
        log.append({"run": f"{who}-{i}", "pad": "x" * 5000})


def test_concurrent_writers_never_interleave(tmp_path):
    procs = [mp.get_context("fork").Process(target=_writer, args=(str(tmp_path), 40, w)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    runs = RunLog(tmp_path).runs()
    assert len(runs) == 160 and all(len(r["pad"]) == 5000 for r in runs)


def test_run_ids_sort_by_time():
    assert new_run_id(1_700_000_000) < new_run_id(1_800_000_000)
