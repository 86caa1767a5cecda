"""The log sink (sluice_common/logs.py): a line that cannot be written never fails the work."""

from __future__ import annotations

import pickle
import sys

from sluice_common.logs import _Printer, configure, get_logger


class _Broken:
    """stderr after its reader went away (a Spark Python worker whose pipe Spark closed)."""

    def write(self, _text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


def test_a_line_to_a_broken_pipe_is_dropped_not_raised():
    printer = _Printer(_Broken())
    printer.info("event='chunk applied'")
    printer.debug("x")
    printer.error("y")


def test_logging_through_the_configured_sink_survives_a_broken_stderr(monkeypatch):
    monkeypatch.setattr(sys, "stderr", _Broken())
    configure(level="DEBUG")
    try:
        get_logger("test").debug("ordered chunk applied change by change", rows=3)
        get_logger("test").warning("still here")
    finally:
        monkeypatch.undo()
        configure()


def test_the_sink_still_pickles_as_structlogs_does():
    """Spark ships closures that reach a logger: a printer to stderr pickles (by name)."""
    printer = pickle.loads(pickle.dumps(_Printer(sys.stderr)))
    assert isinstance(printer, _Printer)


def test_a_spark_worker_logs_to_stderr_and_survives_an_orphaned_stdout(monkeypatch):
    """A Python worker whose daemon died keeps getting tasks while the JVM has closed its stdout's
    reader (seen in the chaos soak): the worker's lines go to stderr and a broken one is dropped."""
    import structlog

    from sluice_common.logs import worker_sink

    structlog.reset_defaults()
    try:
        monkeypatch.setattr(sys, "stderr", _Broken())
        worker_sink()
        assert structlog.is_configured()
        get_logger("rdb").debug("ordered chunk applied change by change", rows=3)  # no BrokenPipeError
        worker_sink()  # once per process: a no-op now
    finally:
        monkeypatch.undo()
        structlog.reset_defaults()
        configure()


def test_client_libraries_log_no_request_lines_at_info():
    """``sluice verify`` of an Elasticsearch index printed a line per HTTP request (a new user's probe)."""
    import logging

    configure(level="INFO")
    assert not logging.getLogger("elastic_transport.transport").isEnabledFor(logging.INFO)
