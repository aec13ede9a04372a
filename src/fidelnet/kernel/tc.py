"""Traffic control over netlink: HTB rate limits, netem, read back, stats, probing.

Rate limits use an HTB root with one class whose burst is sized from the rate: at
least one millisecond of traffic at that rate and never less than one full frame
(Mininet's fixed 15 kB burst starves links with a large bandwidth-delay product).
Each class is read back after it is set and compared with what was asked.

The ``fq`` queue (:func:`set_rate` with ``flows``) puts a fair queue below the rate,
as a modern Linux host's default qdisc (systemd's ``fq_codel``) does on a real NIC:
``flows`` HTB classes under the rate class, each guaranteed an equal share and
allowed to borrow up to the whole rate with the same quantum (a 64 KiB GSO packet and
more), so backlogged classes take byte-fair turns (deficit round robin); a BPF
classifier on the root (:func:`fidelnet.kernel.bpf.flow_class_program`) puts each flow
in the class of its hash. Without it, flows a host sends share one FIFO, and on a
kernel with TCP Small Queues a flow that starts while another fills that FIFO can stay
at a few percent of the rate for seconds (docs/links.md#fair-queue).
"""

from __future__ import annotations

import contextlib
import errno
import os
from typing import Any

from fidelnet.errors import KernelError, UnsupportedError
from fidelnet.kernel import bpf, ns
from fidelnet.kernel._pyroute2 import NetlinkError
from fidelnet.kernel.netlink import Netlink

__all__ = [
    "FLOW_MINOR",
    "FQ_CLASSES",
    "HTB_MAX_RATE",
    "burst_for",
    "check_rate",
    "clear_root",
    "kernel_qdiscs",
    "probe_qdisc",
    "qdisc_stats",
    "redirect_all",
    "remove_bpf_filter",
    "remove_clsact",
    "root_qdisc_drops",
    "set_bpf_filter",
    "set_netem",
    "set_rate",
]

FRAME = 1514 + 4  # an Ethernet frame with its FCS
FQ_QUANTUM = 65536 + 2 * FRAME
"""The fair queue's classes' quantum: at least the largest packet a class can hold, a
GSO or GRO packet of 64 KiB. HTB gives a backlogged class one packet per turn and
adds one quantum to its deficit after it (``htb_dequeue_tree``): with a quantum below
the packet size the turns are per packet, not per byte, and a flow whose TCP sends
larger GSO packets (its rate is higher, so autosizing makes them larger) takes more
and more: two flows settled at 62 and 34 Mbit/s of 100 with a one-frame quantum."""
HTB_MAX_RATE = (2**32 - 1) * 8  # tc_ratespec.rate is u32 bytes/s without TCA_HTB_RATE64
_ROOT = 0x10000  # 1:
_CLASS = 0x10001  # 1:1
_LEAF = 0x20000  # 2:
_CLSACT = 0xFFFF0000  # ffff:, the clsact qdisc's handle
_HOOK = {"ingress": 0xFFFFFFF2, "egress": 0xFFFFFFF3}  # TC_H_CLSACT | TC_H_MIN_{IN,E}GRESS
_ETH_P_ALL = 0x0003  # pyroute2 puts it in network order
_BPF_PRIO = 2  # below the mirred redirect (prio 1) of a link moved onto the engine
FQ_CLASSES = 64
"""Flow classes of the ``fq`` queue: two flows share a class (and its FIFO) with
probability 1/64."""
FLOW_MINOR = 0x100  # the flow classes are 1:100 .. 1:13f


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


def set_rate(
    nl: Netlink,
    index: int,
    rate_bps: float,
    queue_packets: int | None,
    queue_bytes: int | None = None,
    *,
    change: bool = False,
    flows: int = 0,
) -> None:
    """Shape egress of interface ``index`` to ``rate_bps`` with an HTB class, with a
    packet (pfifo) or byte (bfifo) FIFO below it when a limit is given.

    ``flows``: a fair queue of that many flow classes below the rate class instead of
    one FIFO, each flow class with its own FIFO of the given limit.

    ``change=True`` alters an existing class in place (its queue is kept; not with
    ``flows``)."""
    check_rate(rate_bps, f"link {index}")
    if flows and change:
        raise KernelError(f"tc htb on link {index}: a fair queue is rebuilt, not changed")
    rate = f"{int(rate_bps)}bit"
    burst = burst_for(rate_bps)
    try:
        if not change:
            nl.ipr.tc("add", "htb", index, _ROOT, default=FLOW_MINOR if flows else 1)
        nl.ipr.tc(
            "change-class" if change else "add-class",
            "htb",
            index,
            _CLASS,
            parent=_ROOT,
            rate=rate,
            ceil=rate,
            burst=burst,
            cburst=burst,
        )
        if flows:
            _flow_classes(nl, index, rate_bps, flows, queue_packets, queue_bytes)
        elif queue_bytes is not None:
            nl.ipr.tc("replace", "bfifo", index, _LEAF, parent=_CLASS, limit=queue_bytes)
        elif queue_packets is not None:
            nl.ipr.tc("replace", "pfifo", index, _LEAF, parent=_CLASS, limit=queue_packets)
    except NetlinkError as exc:
        raise KernelError(f"tc htb on link {index}: {exc}") from exc
    _check_rate(nl, index, rate_bps)
    if flows:
        _check_flow_classes(nl, index, flows)


def _flow_classes(
    nl: Netlink,
    index: int,
    rate_bps: float,
    flows: int,
    queue_packets: int | None,
    queue_bytes: int | None,
) -> None:
    rate, share = f"{int(rate_bps)}bit", f"{max(8, int(rate_bps / flows))}bit"
    burst = burst_for(rate_bps)
    for i in range(flows):
        minor = FLOW_MINOR + i
        classid = (_ROOT & 0xFFFF0000) | minor
        nl.ipr.tc(
            "add-class", "htb", index, classid, parent=_CLASS, rate=share, ceil=rate,
            burst=burst, cburst=burst, quantum=FQ_QUANTUM,
        )  # fmt: skip
        leaf = minor << 16
        if queue_bytes is not None:
            nl.ipr.tc("add", "bfifo", index, leaf, parent=classid, limit=queue_bytes)
        elif queue_packets is not None:
            nl.ipr.tc("add", "pfifo", index, leaf, parent=classid, limit=queue_packets)
    fd = bpf.load(bpf.flow_class_program(flows, (_ROOT & 0xFFFF0000) | FLOW_MINOR), "fidelnet_fq")
    try:
        nl.ipr.tc(
            "add-filter", "bpf", index, handle=1, parent=_ROOT, protocol=_ETH_P_ALL, prio=1,
            fd=fd, name="fidelnet_fq",
        )  # fmt: skip
    finally:
        os.close(fd)


def _check_flow_classes(nl: Netlink, index: int, flows: int) -> None:
    minors = {
        int(msg["handle"]) & 0xFFFF
        for msg in nl.ipr.get_classes(index=index)
        if int(msg["parent"]) == _CLASS
    }
    missing = set(range(FLOW_MINOR, FLOW_MINOR + flows)) - minors
    if missing:
        raise KernelError(f"tc fq on link {index}: {len(missing)} of {flows} flow classes missing")
    for msg in nl.ipr.get_filters(index=index, parent=_ROOT):
        if msg.get_attr("TCA_KIND") == "bpf" and msg.get_attr("TCA_OPTIONS") is not None:
            return
    raise KernelError(f"tc fq on link {index}: the flow classifier is missing after it was set")


def set_netem(
    nl: Netlink, index: int, opts: dict[str, Any], *, under_rate: bool, change: bool = False
) -> None:
    """Put a netem qdisc on interface ``index``: below the HTB class when
    ``under_rate``, else at the root. ``opts`` are pyroute2's netem keywords
    (``delay``/``jitter`` in microseconds, ``loss``/``duplicate``/``prob_corrupt`` in
    percent, ``limit`` in packets). Read back and compared."""
    handle, parent = (_LEAF, _CLASS) if under_rate else (_ROOT, None)
    kwargs: dict[str, Any] = dict(opts)
    if parent is not None:
        kwargs["parent"] = parent
    else:
        kwargs["root"] = True
    try:
        nl.ipr.tc("change" if change else "replace", "netem", index, handle, **kwargs)
    except NetlinkError as exc:
        raise KernelError(f"tc netem on link {index}: {exc}") from exc
    _check_netem(nl, index, handle, opts)


def _check_netem(nl: Netlink, index: int, handle: int, opts: dict[str, Any]) -> None:
    from pyroute2.netlink.rtnl.tcmsg import sched_netem

    want = sched_netem.get_parameters(dict(opts))
    for msg in nl.ipr.get_qdiscs(index=index):
        if msg["handle"] != handle or msg.get_attr("TCA_KIND") != "netem":
            continue
        got = msg.get_attr("TCA_OPTIONS")
        for key in ("delay", "jitter", "loss", "duplicate", "limit"):
            if got is None or got[key] != want[key]:
                raise KernelError(
                    f"tc netem on link {index}: asked for {key}={want[key]}, kernel holds "
                    f"{None if got is None else got[key]}"
                )
        return
    raise KernelError(f"tc netem on link {index}: qdisc {handle:x} missing after it was set")


def qdisc_stats(nl: Netlink, index: int) -> list[dict[str, Any]]:
    """Counters of every qdisc on interface ``index``: kind, handle, bytes, packets,
    drops, overlimits, backlog (bytes) and qlen (packets)."""
    out: list[dict[str, Any]] = []
    for msg in nl.ipr.get_qdiscs(index=index):
        basic = msg.get_nested("TCA_STATS2", "TCA_STATS_BASIC") or {}
        queue = msg.get_nested("TCA_STATS2", "TCA_STATS_QUEUE") or {}
        out.append(
            {
                "kind": msg.get_attr("TCA_KIND"),
                "handle": f"{msg['handle'] >> 16:x}:",
                "bytes": basic.get("bytes", 0),
                "packets": basic.get("packets", 0),
                "drops": queue.get("drops", 0),
                "overlimits": queue.get("overlimits", 0),
                "backlog": queue.get("backlog", 0),
                "qlen": queue.get("qlen", 0),
            }
        )
    return out


def root_qdisc_drops(nl: Netlink) -> dict[int, tuple[str, int]]:
    """(kind, drops) of the root qdisc of every interface in ``nl``'s namespace, by
    interface index (one dump)."""
    out: dict[int, tuple[str, int]] = {}
    for msg in nl.ipr.get_qdiscs():
        if msg["parent"] != 0xFFFFFFFF:
            continue
        queue = msg.get_nested("TCA_STATS2", "TCA_STATS_QUEUE") or {}
        out[int(msg["index"])] = (str(msg.get_attr("TCA_KIND")), int(queue.get("drops", 0)))
    return out


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


def _ensure_clsact(nl: Netlink, index: int) -> None:
    try:
        nl.ipr.tc("add", "clsact", index, _CLSACT)
    except NetlinkError as exc:
        if exc.code != errno.EEXIST:
            raise KernelError(f"tc clsact on link {index}: {exc}") from exc


def set_bpf_filter(nl: Netlink, index: int, prog_fd: int, name: str) -> None:
    """Run BPF classifier ``prog_fd`` (direct action) on every frame leaving interface
    ``index``, ahead of its root qdisc; replaces the one set before, in one step."""
    _ensure_clsact(nl, index)
    try:
        nl.ipr.tc(
            "replace-filter",
            "bpf",
            index,
            handle=1,
            parent=_HOOK["egress"],
            protocol=_ETH_P_ALL,
            prio=_BPF_PRIO,
            fd=prog_fd,
            name=name,
            direct_action=True,
        )
    except NetlinkError as exc:
        raise KernelError(f"tc bpf filter {name} on link {index}: {exc}") from exc
    for msg in nl.ipr.get_filters(index=index, parent=_HOOK["egress"]):
        if msg.get_attr("TCA_KIND") == "bpf" and msg.get_attr("TCA_OPTIONS") is not None:
            return
    raise KernelError(f"tc bpf filter {name} on link {index}: missing after it was set")


def remove_bpf_filter(nl: Netlink, index: int) -> None:
    """Remove the BPF classifier :func:`set_bpf_filter` set, if there is one."""
    try:
        nl.ipr.tc(
            "del-filter", "bpf", index, parent=_HOOK["egress"], protocol=_ETH_P_ALL,
            prio=_BPF_PRIO,
        )  # fmt: skip
    except NetlinkError as exc:
        if exc.code not in (errno.ENOENT, errno.EINVAL):
            raise KernelError(f"tc: removing the bpf filter of link {index}: {exc}") from exc


def redirect_all(nl: Netlink, index: int, hook: str, to_index: int, to: str) -> None:
    """Steal every frame at interface ``index``'s ``hook`` (``"ingress"`` or
    ``"egress"``, a clsact hook, added here when missing) and hand it to interface
    ``to_index`` of the same namespace, as received there (``to="ingress"``) or
    transmitted (``to="egress"``): a u32 match-all filter with a mirred redirect. The
    hook runs before the root qdisc, so what is stolen never queues on ``index``."""
    if hook not in _HOOK or to not in ("ingress", "egress"):
        raise KernelError(f"tc redirect on link {index}: hook {hook!r}, to {to!r}")
    _ensure_clsact(nl, index)
    action = {"kind": "mirred", "direction": to, "action": "redirect", "ifindex": to_index}
    try:
        nl.ipr.tc(
            "add-filter",
            "u32",
            index,
            parent=_HOOK[hook],
            protocol=_ETH_P_ALL,
            prio=1,
            keys=["0x0/0x0+0"],
            target=0,  # pyroute2 always sends a classid; the redirect decides
            action=[action],
        )
    except NetlinkError as exc:
        raise KernelError(
            f"tc {hook} redirect from link {index} to {to} of link {to_index}: {exc}"
        ) from exc
    for msg in nl.ipr.get_filters(index=index, parent=_HOOK[hook]):
        if msg.get_attr("TCA_KIND") == "u32" and msg.get_attr("TCA_OPTIONS") is not None:
            return
    raise KernelError(f"tc {hook} redirect on link {index}: filter missing after it was added")


def remove_clsact(nl: Netlink, index: int) -> None:
    """Remove interface ``index``'s clsact qdisc and every filter on it, if any."""
    try:
        nl.ipr.tc("del", "clsact", index, _CLSACT)
    except NetlinkError as exc:
        if exc.code not in (errno.ENOENT, errno.EINVAL):
            raise KernelError(f"tc: removing clsact of link {index}: {exc}") from exc


def kernel_qdiscs(kinds: tuple[str, ...]) -> frozenset[str]:
    """Probe, in one scratch namespace, which of ``kinds`` the kernel can make: qdisc
    kinds, and ``"bpf_loss"`` for random loss by a BPF classifier (:mod:`.bpf`).

    The namespace is a run of its own (a state file, the namespace recorded before it
    exists), so a probe killed half way leaves nothing ``fidelnet clean`` misses."""
    from fidelnet.kernel.state import RunState

    st = RunState.create(command="qdisc probe")
    name = f"fn{st.run_id}-probe"
    st.record("netns", name=name)
    try:
        path = ns.create(name)
    except BaseException:
        st.gone("netns", name=name)
        st.close(remove=True)
        raise
    try:
        nl = Netlink(path)
        try:
            nl.set_link(1, state="up")
            found = {k for k in kinds if k != "bpf_loss" and probe_qdisc(nl, k)}
            if "bpf_loss" in kinds and _probe_bpf_loss(nl):
                found.add("bpf_loss")
            return frozenset(found)
        finally:
            nl.close()
    finally:
        ns.delete(name)
        st.gone("netns", name=name)
        st.close(remove=True)


def _probe_bpf_loss(nl: Netlink) -> bool:
    try:
        fd = bpf.load(bpf.loss_program(0.5))
    except KernelError:
        return False
    try:
        set_bpf_filter(nl, 1, fd, "fidelnet_probe")
    except KernelError:
        return False
    finally:
        os.close(fd)
    remove_clsact(nl, 1)
    return True
