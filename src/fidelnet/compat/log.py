"""Mininet's ``mininet.log``: leveled messages that do not end with a newline.

Mininet's ``info('a', 'b\\n')`` joins its arguments with spaces and prints them
as they are (no newline is added), to standard error. This module keeps that:

- ``lg``: the logger (``logging.getLogger("mininet")``), with ``lg.setLogLevel``
  and ``lg.output``;
- :func:`setLogLevel`: also sets fidelnet's own logger to the same level, so
  fidelnet's warnings follow the script's verbosity;
- :func:`info`, :func:`output`, :func:`warn` / :func:`warning`, :func:`error`,
  :func:`debug`;
- ``LEVELS``, ``OUTPUT``, ``LOGLEVELDEFAULT``.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from fidelnet import log as _fnlog

__all__ = [
    "LEVELS",
    "LOGLEVELDEFAULT",
    "OUTPUT",
    "debug",
    "error",
    "info",
    "lg",
    "output",
    "setLogLevel",
    "warn",
    "warning",
]

OUTPUT = _fnlog.OUTPUT
LEVELS: dict[str, int] = dict(_fnlog.LEVELS)
LOGLEVELDEFAULT = OUTPUT


class _NoNewlineHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes each message as it is, to the *current* ``sys.stderr``."""

    terminator = ""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr  # not setStream(): it would flush a stream maybe closed
        super().emit(record)


class MininetLogger(logging.Logger):
    """The ``mininet`` logger, with Mininet's ``output`` level and ``setLogLevel``."""

    def setLogLevel(self, levelname: str | None = None) -> None:
        """Set the level by name (``info``, ``output``…); None restores the default."""
        if levelname is not None and levelname not in LEVELS:
            raise _fnlog_error(levelname)
        level = LEVELS[levelname] if levelname is not None else LOGLEVELDEFAULT
        self.setLevel(level)
        for handler in self.handlers:
            handler.setLevel(level)
        _fnlog.set_log_level(level)

    def output(self, msg: object, *args: Any, **kwargs: Any) -> None:
        if self.isEnabledFor(OUTPUT):
            self._log(OUTPUT, msg, args, **kwargs)


def _fnlog_error(levelname: str) -> Exception:
    from fidelnet.errors import ValidationError

    return ValidationError("setLogLevel", "unknown level", levelname, list(LEVELS))


def _make_logger() -> MininetLogger:
    manager = logging.Logger.manager
    existing = manager.loggerDict.get("mininet")
    if isinstance(existing, MininetLogger):
        return existing
    logger = MininetLogger("mininet")
    logger.parent = logging.getLogger()
    manager.loggerDict["mininet"] = logger
    handler = _NoNewlineHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(LOGLEVELDEFAULT)
    handler.setLevel(LOGLEVELDEFAULT)
    return logger


lg = _make_logger()


def _joined(args: tuple[object, ...]) -> object:
    if len(args) == 1:
        return args[0]
    return " ".join(str(a) for a in args)


def _emit(level: int, args: tuple[object, ...]) -> None:
    if lg.isEnabledFor(level):
        # Pass the text as the only argument so '%' in it is never interpreted.
        lg.log(level, "%s", _joined(args))


def info(*args: object) -> None:
    """Log at info level; arguments are joined with spaces, no newline added."""
    _emit(logging.INFO, args)


def output(*args: object) -> None:
    """Log at output level (results the user asked for)."""
    _emit(OUTPUT, args)


def warning(*args: object) -> None:
    """Log at warning level."""
    _emit(logging.WARNING, args)


warn = warning


def error(*args: object) -> None:
    """Log at error level."""
    _emit(logging.ERROR, args)


def debug(*args: object) -> None:
    """Log at debug level."""
    _emit(logging.DEBUG, args)


def setLogLevel(levelname: str | None = None) -> None:
    """Mininet's ``setLogLevel('info')``."""
    lg.setLogLevel(levelname)
