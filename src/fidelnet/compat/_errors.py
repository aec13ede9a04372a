"""Errors of a Mininet script run on the shim: one line, not a traceback.

A fidelnet error says what is wrong and what to do in its message
(:mod:`fidelnet.errors`); a script that does not catch it ends with that line, led
by the script's own line that made the call (``controlnet.py:42: root-eth0: ...``),
and exit status 1. ``FIDELNET_TRACEBACK=1`` keeps Python's traceback. Other
exceptions are Python's to report, as before. The ``mininet`` shim package installs
the hook when it is imported (:func:`install`).
"""

from __future__ import annotations

import os
import sys
import traceback
import types
from pathlib import Path

from fidelnet.errors import FidelnetError

__all__ = ["install"]

_PACKAGE = str(Path(__file__).resolve().parents[1])  # src/fidelnet


def _caller(tb: types.TracebackType | None) -> str:
    """``file:line`` of the last frame outside fidelnet (the script's call), or ""."""
    where = ""
    for frame in traceback.extract_tb(tb):
        if not os.path.abspath(frame.filename).startswith(_PACKAGE + os.sep):
            where = f"{os.path.basename(frame.filename)}:{frame.lineno}: "
    return where


def _hook(kind: type[BaseException], exc: BaseException, tb: types.TracebackType | None) -> None:
    if isinstance(exc, FidelnetError) and not os.environ.get("FIDELNET_TRACEBACK"):
        print(f"{_caller(tb)}{exc}", file=sys.stderr)
        return
    _previous(kind, exc, tb)


_previous = sys.excepthook


def install() -> None:
    """Report uncaught fidelnet errors in one line (once per process)."""
    global _previous
    if sys.excepthook is not _hook:
        _previous = sys.excepthook
        sys.excepthook = _hook
