"""The kernel's neighbour tables (ARP, IPv6 neighbour discovery) are one table each
for the whole machine, all network namespaces together, with machine-wide limits
(``net.ipv4.neigh.default.gc_thresh1..3``, only in the initial namespace). Past
``gc_thresh3`` (1,024 by default) the kernel cannot resolve another neighbour and
drops the packet waiting for it ("neighbour: arp_cache: neighbor table overflow!";
``table_fulls`` in ``/proc/net/stat/arp_cache``). A pingall among 64 hosts needs
64 x 63 = 4,032 entries: Mininet's own treeping64.py lost 1-7 % of its pings to it.

So a run whose hosts could need more raises the limits by what it needs (:func:`fit`)
and gives exactly that back when it ends: each raise is recorded (``sysctl_add``,
with its path and the amount) before it is made, and teardown or ``fidelnet clean``
subtracts that amount from whatever the value is then, so runs that overlap each
take back only their own share.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any

__all__ = ["MAX_ENTRIES", "fit", "needed", "table_fulls", "undo"]

MAX_ENTRIES = 1 << 20
"""The most a run adds (a neighbour entry takes a few hundred bytes when it exists)."""

_DIRS = ("/proc/sys/net/ipv4/neigh/default", "/proc/sys/net/ipv6/neigh/default")
_STATS = ("/proc/net/stat/arp_cache", "/proc/net/stat/ndisc_cache")


def needed(l3_nodes: int) -> int:
    """Neighbour entries ``l3_nodes`` hosts and routers can need at most: each may
    resolve every other (one broadcast domain, a pingall)."""
    return min(MAX_ENTRIES, max(0, l3_nodes * (l3_nodes - 1)))


def _read(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def _write(path: str, value: int) -> None:
    with open(path, "w", encoding="ascii") as f:
        f.write(str(value))


def fit(need: int, record: Callable[..., Any], dirs: tuple[str, ...] = _DIRS) -> dict[str, int]:
    """Raise ``gc_thresh2`` and ``gc_thresh3`` of each table by ``need`` when what is
    left below ``gc_thresh3`` is less than that (``record`` is called with each
    raise before it is made); returns the raises by path."""
    done: dict[str, int] = {}
    for d in dirs:
        t3 = _read(os.path.join(d, "gc_thresh3"))
        if t3 is None or need <= t3 // 2:
            continue
        for name in ("gc_thresh3", "gc_thresh2"):  # keep thresh2 <= thresh3 at each step
            path = os.path.join(d, name)
            now = _read(path)
            if now is None:
                continue
            record("sysctl_add", path=path, delta=need)
            _write(path, now + need)
            done[path] = need
    return done


def undo(path: str, delta: int) -> None:
    """Give back a raise :func:`fit` made: subtract ``delta`` from the value now
    (never below 1). Teardown goes newest first, so thresh2 comes down before
    thresh3 and never stands above it."""
    now = _read(path)
    if now is None:
        return
    with contextlib.suppress(OSError):
        _write(path, max(1, now - delta))


def table_fulls(paths: tuple[str, ...] = _STATS) -> int:
    """Times the kernel found a neighbour table full (``table_fulls``, all CPUs, both
    tables): each is a packet dropped for want of an entry."""
    total = 0
    for path in paths:
        try:
            with open(path, encoding="ascii") as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        if not lines:
            continue
        head = lines[0].split()
        if "table_fulls" not in head:
            continue
        col = head.index("table_fulls")
        for line in lines[1:]:
            fields = line.split()
            if len(fields) > col:
                with contextlib.suppress(ValueError):
                    total += int(fields[col], 16)
    return total
