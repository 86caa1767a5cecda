"""Structured logging: one key=value (or JSON) line per event, never a password.

``configure()`` is called once by the CLI. ``redact`` scrubs any value whose key looks like
a secret and any known secret value that slipped into a message.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback

import structlog

_SECRET_KEYS = ("password", "passwd", "secret", "token")
_known_secrets: set[str] = set()


def register_secret(value: str) -> None:
    """Remember a secret value so that it is masked wherever it appears in a log line."""
    if value and len(value) >= 3:
        _known_secrets.add(value)


def mask(text: str) -> str:
    """Replace every registered secret in ``text`` with ``***``."""
    for s in _known_secrets:
        text = text.replace(s, "***")
    return text


def redact(_logger, _name, event: dict) -> dict:
    """structlog processor: hide secret-looking keys and registered secret values."""
    for k, v in list(event.items()):
        if any(s in k.lower() for s in _SECRET_KEYS):
            event[k] = "***"
        elif isinstance(v, str):
            event[k] = mask(v)
    return event


def exc_info_to_error(_logger, _name, event: dict) -> dict:
    """structlog processor: ``log.exception(...)`` / ``exc_info=True`` becomes ``error="Type: first
    line"`` (the traceback only at DEBUG), instead of a literal ``exc_info=True`` in the line."""
    exc = event.pop("exc_info", None)
    if not exc:
        return event
    if exc is True:
        exc = sys.exc_info()[1]
    elif isinstance(exc, tuple):
        exc = exc[1]
    if isinstance(exc, BaseException):
        first = (str(exc).strip().splitlines() or [""])[0][:500]
        event.setdefault("error", f"{type(exc).__name__}: {first}" if first else type(exc).__name__)
        if logging.getLogger().isEnabledFor(logging.DEBUG):
            event["traceback"] = "".join(traceback.format_exception(exc))
    return event


def _not_py4j(record: logging.LogRecord) -> bool:
    """Drop py4j's own log records (below DEBUG): its connection chatter, and on Ctrl-C the
    tracebacks of the JVM call it was in ("reentrant call", Py4JNetworkError, KeyboardInterrupt);
    some it logs on the root logger, so they are told by the module that wrote them. Sluice says
    what failed itself."""
    return not (record.name.startswith("py4j") or f"{os.sep}py4j{os.sep}" in (record.pathname or ""))


class _Printer(structlog.PrintLogger):
    """structlog's PrintLogger, except that a line that cannot be written is dropped instead of
    raised into the work that logged it: a Spark Python worker whose output pipe Spark closed (its
    daemon died, the JVM still hands it tasks) would otherwise fail every chunk it logs about, round
    after round, with ``BrokenPipeError`` (:func:`worker_sink`)."""

    def msg(self, message: str) -> None:
        try:
            super().msg(message)
        except (BrokenPipeError, ValueError):  # the reader is gone / the stream was closed
            pass

    log = debug = info = warn = warning = msg
    fatal = failure = err = error = critical = exception = msg


def _printer_factory(file):
    def make(*_args) -> _Printer:
        return _Printer(file)
    return make


def worker_sink() -> None:
    """In a Spark Python worker (a process the CLI's :func:`configure` never ran in): structlog's
    defaults, but lines go to stderr through :class:`_Printer`. structlog's default prints to
    stdout, and a worker orphaned by its daemon's death (the JVM goes on handing it tasks) has a
    stdout whose reader the JVM closed: every line raised ``BrokenPipeError`` into the task, and the
    group's rounds failed until Spark replaced the worker (13 minutes in the chaos soak, seed 40).
    Once per process; a no-op where logging was configured."""
    if not structlog.is_configured():
        structlog.configure(logger_factory=_printer_factory(sys.stderr))


#: client libraries that log every request at INFO: WARNING and above only, unless at DEBUG
CHATTY = ("elastic_transport", "opensearch", "urllib3")


def configure(level: str | None = None, json_lines: bool | None = None) -> None:
    """Set up structlog (stderr). SLUICE_LOG_LEVEL / SLUICE_LOG_JSON override."""
    level = (level or os.environ.get("SLUICE_LOG_LEVEL", "INFO")).upper()
    if json_lines is None:
        json_lines = os.environ.get("SLUICE_LOG_JSON", "") in ("1", "true", "yes")
    logging.basicConfig(level=level, stream=sys.stderr, format="%(message)s")
    if level != "DEBUG":
        for handler in logging.getLogger().handlers:
            handler.addFilter(_not_py4j)
        for name in CHATTY:  # a line per HTTP request at INFO (sluice verify of an index printed each)
            logging.getLogger(name).setLevel(logging.WARNING)
    renderer = (structlog.processors.JSONRenderer() if json_lines
                else structlog.processors.KeyValueRenderer(key_order=["ts", "level", "event"]))
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", key="ts"),
            exc_info_to_error,
            redact,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level)),
        logger_factory=_printer_factory(sys.stderr),
        cache_logger_on_first_use=False,
    )


def get_logger(name: str = "sluice"):
    """A structlog logger bound to a component name."""
    return structlog.get_logger(component=name)
