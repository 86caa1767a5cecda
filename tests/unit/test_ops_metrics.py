"""Metrics: valid Prometheus text with the run's numbers, JSON alongside, atomic files; config."""

from __future__ import annotations

import json

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pipeline.config import parse_config
from pipeline.job.accumulators import CountsParam, merge, partition_counts
from pipeline.ops.metrics import prometheus_text, write_metrics
from sluice_common.errors import ConfigError

REC = {
    "run": "r1", "source": "shop", "status": "ok", "exit": 0, "seconds": 12.5, "finished": "2026-05-09T07:35:25+00:00",
    "capture": {"rows": 900, "batches": 3, "transactions": 90, "seconds": 1.5, "rows_per_s": 600.0},
    "sync": {"g1": {"rows": 900, "batches": 3, "seconds": 9.0, "rows_per_s": 100.0, "ddl": 1,
                    "inserted": {"shop.t": 500, 'shop.we"ird': 1}, "updated": {"shop.t": 300},
                    "deleted": {"shop.t": 99},
                    "skipped": {}, "dead_lettered": {},
                    "executor": {"rows": 900, "partitions": 4, "failed_partitions": 0, "apply_seconds": 7.5}},
             "g2": {"rows": None, "batches": 0, "seconds": 1.0, "ok": False}},
    "lag": {"capture": {"lag_s": 0.0, "behind_bytes": 0, "last_event_age_s": 3.2},
            "groups": {"g1": {"cursor": 7, "pending_batches": 0, "pending_rows": 0, "lag_s": 0.0},
                       "g2": {"cursor": 4, "pending_batches": 3, "pending_rows": 900, "lag_s": 42.0}}},
    "errors": [{"stage": "sync", "group": "g2", "type": "ApplyFailed", "message": "boom"}],
}


def _samples(text: str) -> dict:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def test_prometheus_text_parses_and_carries_the_numbers():
    s = _samples(prometheus_text(REC))
    src = ("source", "shop")
    assert s[("sluice_last_run_exit_code", (src,))] == 0
    assert s[("sluice_last_run_errors", (src,))] == 1
    assert s[("sluice_last_run_capture_rows", (src,))] == 900
    assert s[("sluice_last_run_changes", (("group", "g1"), ("kind", "inserted"), src, ("table", "shop.t")))] == 500
    assert s[("sluice_last_run_changes", (("group", "g1"), ("kind", "inserted"), src, ("table", 'shop.we"ird')))] == 1
    assert s[("sluice_last_run_sync_success", (("group", "g2"), src))] == 0
    assert s[("sluice_last_run_executor_count", (("group", "g1"), ("name", "partitions"), src))] == 4
    assert s[("sluice_group_lag_seconds", (("group", "g2"), src))] == 42
    assert s[("sluice_group_pending_rows", (("group", "g2"), src))] == 900
    assert s[("sluice_last_success_timestamp_seconds", (src,))] == pytest.approx(1778312125)


def test_failed_run_keeps_the_previous_success_time():
    failed = dict(REC, status="failed", exit=1)
    s = _samples(prometheus_text(failed, {"finished": "2026-05-09T07:00:00+00:00"}))
    assert s[("sluice_last_run_success", (("source", "shop"),))] == 0
    assert s[("sluice_last_success_timestamp_seconds", (("source", "shop"),))] == pytest.approx(1778310000)


def test_write_metrics_paths_relative_to_the_config(tmp_path):
    cfg = parse_config({"metrics": {"textfile": "m/sluice.prom", "json": "m/sluice.json"}},
                       file=str(tmp_path / "sluice.yml"))
    written = write_metrics(cfg, REC)
    assert written == {"textfile": str(tmp_path / "m/sluice.prom"), "json": str(tmp_path / "m/sluice.json")}
    assert json.loads((tmp_path / "m/sluice.json").read_text())["run"]["run"] == "r1"
    assert list(text_string_to_metric_families((tmp_path / "m/sluice.prom").read_text()))
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["sluice.json", "sluice.prom"]
    assert write_metrics(parse_config({}), REC) == {}


def test_metrics_section_is_checked():
    with pytest.raises(ConfigError, match="metrics.keepRuns"):
        parse_config({"metrics": {"keepRuns": 1}}, file="x.yml")
    with pytest.raises(ConfigError, match="metrics.textfiel"):
        parse_config({"metrics": {"textfiel": "x"}}, file="x.yml")


def test_accumulator_param_adds_key_by_key():
    class Stats:
        inserted = {"a.t": 2, "a.u": 1}
        updated = {"a.t": 3}
        deleted: dict = {}
        skipped = {"a.t": 1}
        dead_lettered: dict = {}
        missed = {"a.u": 2}
        folded = {"a.t": 4}

    one = partition_counts(True, 7, Stats(), 1.25, 2)
    assert one == {"partitions": 1, "failed_partitions": 0, "rows": 7, "retries": 2, "apply_seconds": 1.25,
                   "inserted": 3, "updated": 3, "deleted": 0, "skipped": 1, "dead_lettered": 0, "missed": 2,
                   "folded": 4}
    total = CountsParam().addInPlace(CountsParam().zero({}), one)
    total = CountsParam().addInPlace(total, partition_counts(False, 0, Stats(), 0.5))
    assert total["partitions"] == 2 and total["failed_partitions"] == 1 and total["rows"] == 7
    assert merge({"rows": 1}, None) == {"rows": 1} and merge({"rows": 1}, {"rows": 2}) == {"rows": 3}
