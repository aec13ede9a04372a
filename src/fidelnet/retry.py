"""Run a command in a node until it does what is expected, or a deadline passes:
the wait-until of setup steps, command checks and event conditions
(docs/scenarios.md, docs/events.md)."""

from __future__ import annotations

import re
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fidelnet.network import Network

__all__ = ["Tried", "try_until"]


@dataclass(frozen=True)
class Tried:
    """The last try: whether it did what was expected, its exit code (None: it ran
    out of time), its output, and how many tries it took over how many seconds
    (from the first try's start to the last one's end)."""

    ok: bool
    rc: int | None
    out: str
    err: str
    tries: int
    seconds: float

    def summary(self) -> str:
        """``after 4.2 s (9 tries)``, or "" for a single try."""
        return f"after {self.seconds:.1f} s ({self.tries} tries)" if self.tries > 1 else ""


def try_until(
    net: Network,
    node: str,
    argv: Sequence[str],
    *,
    expect_exit: int | None,
    output: re.Pattern[str] | None,
    timeout_s: float,
    wait_s: float | None,
    interval_s: float,
    cancel: threading.Event | None = None,
) -> Tried:
    """Run ``argv`` in ``node`` (each try at most ``timeout_s``) until it exits with
    ``expect_exit`` (None: any) and its output matches ``output``; tries again every
    ``interval_s`` while less than ``wait_s`` has passed (None: one try), unless
    ``cancel`` is set."""
    t0 = time.monotonic()
    tries = 0
    while True:
        tries += 1
        rc: int | None
        try:
            out, err, rc = net[node].pexec(list(argv), timeout=timeout_s)
        except subprocess.TimeoutExpired:
            out, err, rc = "", f"no exit within {timeout_s:g} s", None
        ok = rc is not None and (expect_exit is None or rc == expect_exit)
        if ok and output is not None and output.search(out) is None:
            ok = False
        elapsed = time.monotonic() - t0
        if ok or wait_s is None or elapsed + interval_s > wait_s:
            return Tried(ok, rc, out, err, tries, elapsed)
        if cancel is not None:
            if cancel.wait(interval_s):
                return Tried(False, rc, out, "cancelled", tries, elapsed)
        else:
            time.sleep(interval_s)
