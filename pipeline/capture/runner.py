"""Run the capture stage: server check -> resume position -> reader -> batcher -> store.

``run_capture`` holds the store's capture lock for the whole run, checks the server,
resumes from ``store.last_position()`` (a new store starts at the server's current
position unless a target was applied to from this source before: :mod:`pipeline.capture.fresh`;
the start is recorded first), and logs a progress line every few seconds and a
summary at the end. ``--once`` stops at the server's end position seen at start;
``--follow`` runs until interrupted, and on a lost connection resumes from the last
stored position (never from an in-memory one). Each start and each reconnect first decides
how that position is resumed on the server that answers (:mod:`identity`: by file and offset
on the server it was read from, by GTID on another one, or refused), and every stored
position names that server and its file's creation time.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import pymysql

from pipeline.config import Config
from pipeline.source.connect import connect, is_transient
from pipeline.state import unfinished
from pipeline.store import CaptureLog, open_store
from sluice_common.errors import TransientError
from sluice_common.logs import get_logger, register_secret

from . import charsets, filterlog, fresh
from .batcher import Batcher
from .identity import Resume, resolve_start, stamp
from .native import load
from .position import Position
from .reader import BinlogReader, ReaderOptions
from .rowcodec import CodecCache
from .server_check import current_position, inspect_server
from .writer import AsyncAppender

log = get_logger("capture")
PROGRESS_SECONDS = 5.0
MAX_RECONNECTS = 20


@dataclass(frozen=True)
class CaptureSummary:
    """What one run did (printed by the CLI, returned to tests)."""

    batches: int
    rows: int
    transactions: int
    elapsed_s: float
    rows_per_s: float
    start: dict[str, Any]
    end: dict[str, Any]
    stopped: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Progress:
    def __init__(self, every: float) -> None:
        self.every = every
        self.t0 = self.last = time.monotonic()
        self.last_rows = 0

    def maybe(self, b: Batcher, r: BinlogReader) -> None:
        now = time.monotonic()
        if now - self.last < self.every:
            return
        rows = b.rows + b.batch_rows + b.tx_rows
        lag = round(time.time() - r.last_ts, 1) if r.last_ts else None
        log.info("capture progress", rows=rows, rows_per_s=round((rows - self.last_rows) / (now - self.last)),
                 batches=b.batches, position=f"{r.logfile}:{r.logpos}", gtid=r.gtids.text(), lag_s=lag)
        self.last, self.last_rows = now, rows


def run_capture(cfg: Config, *, follow: bool = False, max_batches: int | None = None,
                progress_every: float = PROGRESS_SECONDS, quiet: bool = False,
                start_from: str | None = None) -> CaptureSummary:
    """Capture from the stored position into the store; see the module docstring.
    ``quiet``: the start and end lines only at DEBUG when nothing was captured (``sluice run
    --follow`` captures every second). ``start_from``: ``FILE:POS`` or ``now`` for a store without a
    position (:mod:`pipeline.capture.fresh`)."""
    src = cfg.source
    register_secret(src.password.reveal())
    load()  # a native decoder built from other sources is refused before anything is read or recorded
    store: CaptureLog = open_store(cfg)  # imports the store's module (e.g. the Kafka client): start-up, not capture
    t0 = time.monotonic()
    store.check_writable()
    with store.capture_lock():
        conn = connect(src)
        try:
            info = inspect_server(src, conn)
            charsets.learn(conn, (src.host, src.port, info.version))  # decode text as the server converts it
            from pipeline.job.covered import check_capture_covers

            check_capture_covers(cfg, conn)  # a filter that leaves out a mapped table: refused, position unmoved
            filterlog.check(store.root, cfg, conn)  # ... or a table the store's captures took so far (shared)
            stored = store.last_position()
            if stored is None:  # a new store: the targets say whether "now" is right (fresh.py)
                start, resume = fresh.new_start(cfg, conn, info.flavor, store, start_from)
                from pipeline.job.mapped import record_start

                record_start(store.root, [g.groupId for g in cfg.groups])  # a group added later is told
                store.set_start_position(start.to_dict())  # recorded once it is known to be on the server
                unfinished.clear(store.root)  # the operator chose where the store starts (--from)
            elif start_from is not None:
                fresh.refuse_resumed_store(store, stored)
            else:
                start = Position.from_dict(stored)
                resume = resolve_start(conn, info.flavor, start, src.resumeBy, cfg.file)
            stop_at = None if follow else current_position(conn, info.flavor)
        finally:
            conn.close()
        first = start
        say = log.debug if quiet else log.info
        say("capture starting", source=f"{src.host}:{src.port}", flavor=info.flavor, version=info.version,
            mode="follow" if follow else "once", start=start.text(), stop_at=stop_at and stop_at.text())
        _say_failover(resume)
        codecs = CodecCache()
        totals = [0, 0, 0]
        stopped = "end of binlog"
        reconnects = 0
        appender = AsyncAppender(store)
        try:
            again: Position | None = None  # after a lost connection: the stored position, resolved again
            while True:
                batcher: Batcher | None = None
                try:
                    try:
                        if again is not None:
                            resume = _resolve_again(cfg, info.flavor, again)
                            again = None
                        opts = ReaderOptions(follow=follow, stop_at=stop_at, resume_by=resume.mode, filter=src.filter,
                                             config_file=cfg.file)
                        reader = BinlogReader(src, info.flavor, resume.read_from(), opts, codecs)
                        batcher = Batcher(store, cfg.store.batch, resume.position, sink=appender.append,
                                          idle=appender.keep_alive, stamp=_stamper(resume, reader))
                        progress = _Progress(progress_every)
                        for item in reader:
                            batcher.feed(item)
                            if max_batches is not None and totals[0] + batcher.batches >= max_batches:
                                stopped = f"--max-batches {max_batches}"
                                break
                            progress.maybe(batcher, reader)
                        else:
                            batcher.finish()
                    except KeyboardInterrupt:
                        stopped = "interrupted"
                    appender.drain()
                except TransientError as e:
                    if batcher is not None and batcher.batches:  # this connection made progress: a new fault
                        reconnects = 0
                    if not follow or reconnects >= MAX_RECONNECTS or stopped != "end of binlog":
                        raise  # (stopped: Ctrl-C or --max-batches ended the loop, and the store then failed)
                    reconnects += 1
                    log.warning("binlog connection lost; resuming from the last stored position",
                                error=e.message, attempt=reconnects)
                    appender.drain()  # what was handed to the writer is stored before we look
                    time.sleep(min(30.0, 0.25 * 2 ** min(reconnects, 7)))
                    again = Position.from_dict(store.last_position() or first.to_dict())
                    continue
                finally:
                    if batcher is not None:
                        totals[0] += batcher.batches
                        totals[1] += batcher.rows
                        totals[2] += batcher.transactions
                start = batcher.last_end
                break
        finally:
            appender.close()
    elapsed = time.monotonic() - t0
    summary = CaptureSummary(batches=totals[0], rows=totals[1], transactions=totals[2],
                             elapsed_s=round(elapsed, 3), rows_per_s=round(totals[1] / elapsed, 1) if elapsed else 0.0,
                             start=first.to_dict(), end=start.to_dict(), stopped=stopped)
    say = log.debug if quiet and not totals[1] else log.info
    say("capture done", **{k: v for k, v in summary.to_dict().items() if k not in ("start", "end")},
        end_position=start.text())
    return summary


def _resolve_again(cfg: Config, flavor: str, stored: Position) -> Resume:
    """After a lost connection: how ``stored`` resumes on the server that answers now (it may be
    another one: an address moved to a promoted replica). A broken connection is transient."""
    conn = connect(cfg.source, transient=True)
    try:
        resume = resolve_start(conn, flavor, stored, cfg.source.resumeBy, cfg.file)
    except pymysql.MySQLError as e:
        if is_transient(e):
            raise TransientError(f"the source connection was lost while checking the position: {e.args[-1]}",
                                 hint="capture resumes from the last stored position") from None
        raise
    finally:
        conn.close()
    _say_failover(resume)
    return resume


def _say_failover(resume: Resume) -> None:
    if resume.failover:
        p = resume.position
        log.warning("the source is another server than the one the stored position was read from: resuming by "
                    "GTID", server=resume.server.text(), stored_position=f"{p.logfile}:{p.logpos}",
                    stored_server=f"server_id {p.server_id}" + (f", server_uuid {p.server_uuid}" if p.server_uuid
                                                                 else ""), gtid=p.gtid)


def _stamper(resume: Resume, reader: BinlogReader):
    """What the batcher does to each position it stores: name the server and the file's creation time,
    and mark it when its GTID set lacks a tagged GTID read so far (once set, every later one)."""
    formats = reader.formats

    def stamped(p: Position) -> Position:
        return stamp(p, resume.server).with_(file_ts=formats.get(p.logfile),
                                              gtid_partial=p.gtid_partial or reader.gtids.gtid_partial)
    return stamped
