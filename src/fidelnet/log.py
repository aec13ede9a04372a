"""Logging with Mininet's levels: debug, info, output, warning, error, critical.

fidelnet logs through the standard :mod:`logging` logger ``"fidelnet"``. ``output``
(25, between info and warning) is Mininet's level for results a user asked for.
Following shadow's rule: an error means the run exits non-zero; a warning means the
user ought to check it before trusting the results.
"""

from __future__ import annotations

import logging
import sys

__all__ = ["LEVELS", "OUTPUT", "logger", "set_log_level"]

OUTPUT = 25
logging.addLevelName(OUTPUT, "OUTPUT")

LEVELS: dict[str, int] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "output": OUTPUT,
    "warning": logging.WARNING,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}

logger = logging.getLogger("fidelnet")


class _Formatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        msg = record.getMessage()
        if record.levelno >= logging.WARNING and not msg.startswith("*** "):
            return f"fidelnet: {record.levelname.lower()}: {msg}"
        return msg


_handler: logging.Handler | None = None


def set_log_level(level: str | int = "output") -> None:
    """Set the level of fidelnet's messages (a name from :data:`LEVELS` or a number)."""
    global _handler
    if isinstance(level, str):
        if level not in LEVELS:
            from fidelnet.errors import ValidationError

            raise ValidationError("log level", "unknown level", level, list(LEVELS))
        level = LEVELS[level]
    if _handler is None:
        _handler = logging.StreamHandler(sys.stderr)
        _handler.setFormatter(_Formatter())
        logger.addHandler(_handler)
        logger.propagate = False
    logger.setLevel(level)
