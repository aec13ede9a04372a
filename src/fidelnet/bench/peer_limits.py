"""What stock Mininet changes on the machine, kept and given back.

``Mininet()`` calls ``mininet.util.fixLimits()`` once per process, which raises, for
the whole machine and for good: the TCP buffer sizes (``net.ipv4.tcp_rmem``,
``tcp_wmem``, ``net.core.rmem_max``, ``wmem_max``), the input backlog
(``net.core.netdev_max_backlog``), the neighbour-table limits and ``kernel.pty.max``.
Every later run on the machine, fidelnet's included, then measures TCP with other
buffers than before the peer ran. The peer scripts (``bench/peer_mininet.py``,
``fidelnet/bench/mininet_line.py``) run Mininet inside :func:`kept`, which writes every
one of these values back as it found it.

Plain standard library: the peers run under the system Python, without fidelnet.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

__all__ = ["FIXLIMITS", "kept", "restore", "snapshot"]

FIXLIMITS = (
    "/proc/sys/fs/file-max",
    "/proc/sys/net/core/wmem_max",
    "/proc/sys/net/core/rmem_max",
    "/proc/sys/net/ipv4/tcp_rmem",
    "/proc/sys/net/ipv4/tcp_wmem",
    "/proc/sys/net/core/netdev_max_backlog",
    "/proc/sys/net/ipv4/neigh/default/gc_thresh1",
    "/proc/sys/net/ipv4/neigh/default/gc_thresh2",
    "/proc/sys/net/ipv4/neigh/default/gc_thresh3",
    "/proc/sys/net/ipv4/route/max_size",
    "/proc/sys/kernel/pty/max",
)
"""Every sysctl ``fixLimits()`` of Mininet 2.3.0 may raise."""


def snapshot(paths: tuple[str, ...] = FIXLIMITS) -> dict[str, str]:
    """The values now, by path (those that cannot be read are left out)."""
    out = {}
    for path in paths:
        with contextlib.suppress(OSError), open(path, encoding="ascii") as f:
            out[path] = f.read().strip()
    return out


def restore(saved: dict[str, str]) -> list[str]:
    """Write back what :func:`snapshot` read where it differs now; the paths written."""
    changed = []
    for path, value in saved.items():
        with contextlib.suppress(OSError):
            with open(path, encoding="ascii") as f:
                now = f.read().strip()
            if now.split() != value.split():
                with open(path, "w", encoding="ascii") as f:
                    f.write(value)
                changed.append(path)
    return changed


@contextlib.contextmanager
def kept(paths: tuple[str, ...] = FIXLIMITS) -> Iterator[dict[str, str]]:
    """Run the block, then give back every value it changed."""
    saved = snapshot(paths)
    try:
        yield saved
    finally:
        restore(saved)
