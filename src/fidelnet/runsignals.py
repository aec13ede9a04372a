"""A run's termination signals: SIGTERM and SIGHUP raise ``SystemExit`` in the main
thread while a run is open, so that ``finally`` blocks and ``Network.stop`` run, and
the previous handlers come back when it ends. Handlers someone else installed are
left alone."""

from __future__ import annotations

import contextlib
import signal
import threading
import types
from typing import Any

__all__ = ["install", "restore"]


def install(saved: dict[int, Any]) -> None:
    """Install the handlers where the default is in force, saving the old ones in
    ``saved``."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) in (signal.SIG_DFL, None):
            saved[sig] = signal.signal(sig, raise_exit)


def restore(saved: dict[int, Any]) -> None:
    """Put back what :func:`install` replaced."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig, old in saved.items():
        with contextlib.suppress(ValueError, TypeError):
            signal.signal(sig, old)
    saved.clear()


def raise_exit(signum: int, _frame: types.FrameType | None) -> None:
    raise SystemExit(128 + signum)
