"""Traffic control over netlink: HTB rate limits, read back, and qdisc probing.

Rate limits use an HTB root with one class whose burst is sized from the rate: at
least one millisecond of traffic at that rate and never less than one full frame
(Mininet's fixed 15 kB burst starves links with a large bandwidth-delay product).
Each class is read back after it is set and compared with what was asked.
"""

from __future__ import annotations

import contextlib
import errno

from pyroute2.netlink.exceptions import NetlinkError

from fidelnet.errors import KernelError, UnsupportedError
from fidelnet.kernel.netlink import Netlink

__all__ = ["HTB_MAX_RATE", "burst_for", "check_rate", "clear_root", "probe_qdisc", "set_rate"]

FRAME = 1514 + 4  # an Ethernet frame with its FCS
HTB_MAX_RATE = (2**32 - 1) * 8  # tc_ratespec.rate is u32 bytes/s without TCA_HTB_RATE64
_ROOT = 0x10000  # 1:
_CLASS = 0x10001  # 1:1
_LEAF = 0x20000  # 2:


def burst_for(rate_bps: float) -> int:
    """Bytes of burst for ``rate_bps``: one millisecond at line rate, at least a frame."""
    return max(FRAME, int(rate_bps / 8 * 1e-3))


def check_rate(rate_bps: float, where: str) -> None:
    """Raise when HTB cannot hold ``rate_bps``."""
    if rate_bps > HTB_MAX_RATE:
        raise UnsupportedError(
            f"an HTB rate above {HTB_MAX_RATE / 1e9:.1f} Gbit/s (no 64-bit rates in this backend)",
            f"{where}: bw={rate_bps / 1e9:.3g}Gbit",
            "use a lower rate, or the engine link backend once it is available",
        )


def set_rate(nl: Netlink, index: int, rate_bps: float, queue_packets: int | None) -> None:
    """Shape egress of interface ``index`` to ``rate_bps`` with an HTB class, optionally
    with a packet FIFO of ``queue_packets`` below it."""
    check_rate(rate_bps, f"link {index}")
    rate = f"{int(rate_bps)}bit"
    burst = burst_for(rate_bps)
    try:
        nl.ipr.tc("add", "htb", index, _ROOT, default=1)
        nl.ipr.tc(
            "add-class",
            "htb",
            index,
            _CLASS,
            parent=_ROOT,
            rate=rate,
            ceil=rate,
            burst=burst,
            cburst=burst,
        )
        if queue_packets is not None:
            nl.ipr.tc("add", "pfifo", index, _LEAF, parent=_CLASS, limit=queue_packets)
    except NetlinkError as exc:
        raise KernelError(f"tc htb on link {index}: {exc}") from exc
    _check_rate(nl, index, rate_bps)


def clear_root(nl: Netlink, index: int) -> None:
    """Remove the root qdisc of interface ``index`` (and all below it), if it has one."""
    try:
        nl.ipr.tc("del", index=index, root=True)
    except NetlinkError as exc:
        if exc.code not in (errno.ENOENT, errno.EINVAL):
            raise KernelError(f"tc: removing the root qdisc of link {index}: {exc}") from exc


def _check_rate(nl: Netlink, index: int, rate_bps: float) -> None:
    for msg in nl.ipr.get_classes(index=index):
        if msg["handle"] != _CLASS:
            continue
        opts = msg.get_attr("TCA_OPTIONS")
        parms = opts.get_attr("TCA_HTB_PARMS") if opts is not None else None
        got = parms["rate"] * 8 if parms is not None else None
        if got is None or abs(got - rate_bps) > max(8.0, rate_bps * 1e-6):
            raise KernelError(
                f"tc htb on link {index}: asked for {rate_bps:.0f} bit/s, kernel holds {got}"
            )
        return
    raise KernelError(f"tc htb on link {index}: class 1:1 missing after it was added")


def probe_qdisc(nl: Netlink, kind: str, index: int = 1) -> bool:
    """Whether the kernel of ``nl``'s namespace can make a ``kind`` qdisc (tried on
    ``index``, normally a namespace's own loopback, and removed again)."""
    try:
        nl.ipr.tc("add", kind, index, _ROOT)
    except NetlinkError as exc:
        if exc.code in (errno.ENOENT, errno.EOPNOTSUPP, errno.EINVAL):
            return False
        raise KernelError(f"probing qdisc {kind}: {exc}") from exc
    with contextlib.suppress(NetlinkError):
        nl.ipr.tc("del", kind, index, _ROOT)
    return True
