"""Where a deployment stands: capture position and lag, per-group backlog, the last run.

* **Capture lag.** ``last_event_age_s`` = now - the binlog timestamp (``es``) of the newest
  captured event. With a source connection, the stored position is compared with the
  server's end (``SHOW MASTER STATUS``; ``SHOW BINARY LOGS`` for the sizes between files):
  ``behind_bytes`` is how much binlog capture has not read yet, and ``lag_s`` (seconds behind
  the source) is 0 when nothing is left to read, else ``last_event_age_s`` (like MySQL's
  ``Seconds_Behind_Master``: the age of the newest event applied).
* **Sync lag** per group: ``lag_s`` = age of the oldest batch the group has not acked (0 when
  nothing is pending), next to the pending batch and row counts (the numbers of
  ``AdminLog.status()``).
* **Freshness** per group, end to end: ``applied_event_at`` = the source's commit time (binlog
  ``es``) of the newest row the group has applied (the last record of its newest acked batch
  that holds records), and ``freshness_s`` = now - that. While the source writes, this is how
  far the targets trail the source; on an idle source it grows with the idle time, while
  ``caught_up`` (nothing pending, and capture at the source's end when that is known) says
  there is nothing left to apply.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

from pipeline.config import Config
from pipeline.state.runlog import RunLog
from pipeline.store import AdminLog, BatchMeta, open_store
from pipeline.store.lastevent import last_event_ms
from sluice_common.errors import SluiceError


def iso_ts(text: str | None) -> float | None:
    """Seconds since the epoch of an ISO-8601 timestamp (the store's ``createdAt``)."""
    if not text:
        return None
    try:
        d = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    if d.tzinfo is None:
        d = d.replace(tzinfo=dt.UTC)
    return d.timestamp()


def binlog_behind(stored: dict[str, Any] | None, end: tuple[str, int], logs: list[tuple[str, int]]) -> int | None:
    """Bytes of binlog between a stored capture position and the server's end position."""
    if not stored or "logfile" not in stored:
        return None
    sfile, spos = str(stored["logfile"]), int(stored.get("logpos") or 0)
    efile, epos = end
    if sfile == efile:
        return max(0, epos - spos)
    names = [n for n, _ in logs]
    if sfile not in names or efile not in names:
        return None
    sizes = dict(logs)
    i, j = names.index(sfile), names.index(efile)
    if i > j:
        return 0
    return max(0, sizes[sfile] - spos) + sum(sizes[n] for n in names[i + 1:j]) + epos


def source_end(cfg: Config) -> tuple[tuple[str, int], list[tuple[str, int]]]:
    """The server's current binlog end and its binlog files with sizes."""
    from pipeline.capture.server_check import binary_logs, master_status
    from pipeline.source.connect import connect

    conn = connect(cfg.source)
    try:
        with conn.cursor() as cur:
            row = master_status(cur)
            logs = list(binary_logs(cur).items())
        return (row[0], int(row[1])), logs
    finally:
        conn.close()


def capture_lag(cfg: Config, store: AdminLog, *, with_source: bool = True, now: float | None = None,
                metas: list[BatchMeta] | None = None) -> dict[str, Any]:
    """Capture position and lag (see the module docstring); never raises for the source."""
    now = time.time() if now is None else now
    pos = store.last_position()
    es = last_event_ms(store, metas)
    out: dict[str, Any] = {"position": pos, "last_event_at": _iso(es / 1000) if es else None,
                           "last_event_age_s": round(now - es / 1000, 3) if es else None,
                           "source_end": None, "behind_bytes": None, "lag_s": None, "error": None}
    if not with_source:
        return out
    try:
        end, logs = source_end(cfg)
    except SluiceError as e:
        out["error"] = e.message
        return out
    except Exception as e:  # noqa: BLE001 - status must answer even when the source misbehaves
        out["error"] = f"{type(e).__name__}: {e}"
        return out
    out["source_end"] = {"logfile": end[0], "logpos": end[1]}
    behind = binlog_behind(pos, end, logs)
    out["behind_bytes"] = behind
    if behind == 0:
        out["lag_s"] = 0.0
    elif behind is not None:
        out["lag_s"] = out["last_event_age_s"]
    return out


def applied_event_ms(metas: list[BatchMeta], cursor: int) -> int | None:
    """``es`` (source commit time, ms) of the newest row in the batches acked up to ``cursor``."""
    acked = [m for m in metas if m.batch_id <= cursor]
    return last_event_ms(None, acked) if acked else None


def group_status(store: AdminLog, groups: list[str], *, now: float | None = None,
                 metas: list[BatchMeta] | None = None, capture_behind: int | None = None
                 ) -> dict[str, dict[str, Any]]:
    """Per group: cursor, pending batches/rows, oldest pending batch and its age (sync lag), and
    the end-to-end freshness (module docstring; ``capture_behind``: capture's ``behind_bytes``
    when known)."""
    now = time.time() if now is None else now
    metas = metas if metas is not None else store.batches()
    out = {}
    registered = set(store.groups()) if groups else set()  # once: on a Kafka store, a question to the brokers
    for g in groups:
        cursor = store.cursor(g)
        pending = [m for m in metas if m.batch_id > cursor]
        oldest = iso_ts(pending[0].created_at) if pending else None
        es = applied_event_ms(metas, cursor)
        out[g] = {"cursor": cursor, "registered": g in registered,
                  "pending_batches": len(pending), "pending_rows": sum(m.rows for m in pending),
                  "oldest_pending_batch": pending[0].batch_id if pending else None,
                  "oldest_pending_at": pending[0].created_at if pending else None,
                  "lag_s": round(max(0.0, now - oldest), 3) if oldest is not None else 0.0,
                  "applied_event_at": _iso(es / 1000) if es else None,
                  "freshness_s": round(max(0.0, now - es / 1000), 3) if es else None,
                  "caught_up": not any(m.rows for m in pending) and capture_behind in (0, None)}
    return out


def deployment_status(cfg: Config, *, with_source: bool = True) -> dict[str, Any]:
    """Everything ``sluice status`` shows, as one JSON-able dict."""
    store = open_store(cfg, create=False)
    now = time.time()
    metas = store.batches()
    st = store.status()
    groups = list(dict.fromkeys([g.groupId for g in cfg.groups] + sorted(st["groups"])))
    log = RunLog(store.root, cfg.metrics.keepRuns)
    last = log.last()
    ok = log.last_success()
    cap = capture_lag(cfg, store, with_source=with_source, now=now, metas=metas)
    return {
        "now": _iso(now),
        "source": {"name": cfg.source.name, "server": f"{cfg.source.host}:{cfg.source.port}",
                   "store": str(store.root), "batches": st["batches"], "first_batch": st["first_batch"],
                   "last_batch": st["last_batch"], "rows": st["rows"], "bytes": st["bytes"],
                   "capture": cap},
        "groups": {g: {**gs, "configured": any(c.groupId == g for c in cfg.groups),
                       "last_run": _group_run(log, g)}
                   for g, gs in group_status(store, groups, now=now, metas=metas,
                                             capture_behind=cap.get("behind_bytes")).items()},
        "last_run": run_brief(last),
        "last_success_at": ok.get("finished") if ok else None,
        "locks": {k: v for k, v in (st.get("locks") or {}).items() if v},
    }


def run_brief(rec: dict[str, Any] | None) -> dict[str, Any] | None:
    """A run record without the bulky parts (per-table counts, positions)."""
    if rec is None:
        return None
    cap = rec.get("capture") or {}
    return {"run": rec.get("run"), "started": rec.get("started"), "finished": rec.get("finished"),
            "seconds": rec.get("seconds"), "status": rec.get("status"), "exit": rec.get("exit"),
            "captured_rows": cap.get("rows"), "captured_batches": cap.get("batches"),
            "synced_rows": {g: s.get("rows") for g, s in (rec.get("sync") or {}).items()},
            "errors": rec.get("errors") or []}


def _group_run(log: RunLog, group: str) -> dict[str, Any] | None:
    """The group's newest run that ran it: a run refused because another job held the group's
    lock (e.g. a cron ``sluice run`` next to ``run --follow``) did not run it, so it is the last
    run only when no other was recorded."""
    runs = [r for r in log.runs() if group in (r.get("groups") or ())]
    rec = next((r for r in reversed(runs) if not _refused(r, group)), runs[-1] if runs else None)
    if rec is None:
        return None
    s = (rec.get("sync") or {}).get(group) or {}
    errors = [e for e in rec.get("errors") or () if e.get("group") == group]
    interrupted = rec.get("status") == "interrupted"  # the whole run stopped (SIGINT/SIGTERM): not ok
    return {"run": rec.get("run"), "finished": rec.get("finished"), "ok": not errors and not interrupted,
            "interrupted": interrupted, "batches": s.get("batches"), "rows": s.get("rows"),
            "seconds": s.get("seconds"), "rows_per_s": s.get("rows_per_s"), "errors": errors,
            "notes": list(s.get("notes") or ())}


def _refused(rec: dict[str, Any], group: str) -> bool:
    """Was ``group`` left out of this run because another job held a lock it needed?"""
    errors = [e for e in rec.get("errors") or () if e.get("group") == group]
    return bool(errors) and all(e.get("type") == "LockHeldError" for e in errors)


def _iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).isoformat(timespec="milliseconds")
