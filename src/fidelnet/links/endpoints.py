"""How an engine link's frames reach linkd: a TAP device per end, or an AF_XDP
socket on a veth end (docs/links.md, "Engine endpoints").

- ``tap``: the node's interface is a TAP device that linkd created. Frames carry
  virtio-net headers, so TCP and UDP leave the stack as 64 KiB super-frames; a
  direction that only delays passes them whole. linkd stamps a frame when it reads
  it, so the time it waited to be read (the daemon's wake-up) is added to the
  emulated delay.
- ``af_xdp``: the node's interface is one end of a veth pair; the other end, beside
  it in the node's namespace (``h1-eth0-x``), carries linkd's XDP program and
  AF_XDP socket. The kernel stamps each frame as it arrives (in the sender's own
  softirq), so the emulated delay starts when the frame was sent. Wire frames
  only (no segmentation offloads; at most :data:`MAX_FRAME` bytes), transport
  checksums computed by the sender's stack, and :data:`LINK_MEMORY` bytes of
  pinned memory per link.

``auto`` (the default) takes ``af_xdp`` for a link that delays or shapes in either
direction, where a frame's timing is what is measured and a TAP's super-frames
would be cut into wire packets anyway; ``tap`` for an unshaped engine link, whose
super-frames pass whole (measured on the 2-core VM, one TCP flow: 11.6 Gbit/s
through TAPs, 2.15 through AF_XDP), for a rate of :data:`MAX_AUTO_RATE` or more
(super-frames cross in chunks there), for a node in the host namespace, where the
kernel lacks AF_XDP, and once the run's AF_XDP links would pin more than
:data:`MEMORY_SHARE` of the memory available.
"""

from __future__ import annotations

from dataclasses import dataclass

from fidelnet.errors import UnsupportedError
from fidelnet.topology.spec import LinkParams

__all__ = [
    "LINK_MEMORY",
    "MAX_AUTO_RATE",
    "MAX_FRAME",
    "MEMORY_SHARE",
    "EndpointChoice",
    "choose_endpoint",
    "xsk_peer_name",
]

MAX_FRAME = 1792
"""Largest frame (Ethernet header included) an AF_XDP endpoint carries: a 2 KiB
UMEM chunk less the kernel's 256-byte headroom (crates/linkd/src/xsk.rs)."""

LINK_MEMORY = 2 * (2048 + 512) * 2048
"""Pinned bytes per AF_XDP link (10 MiB): two endpoints, each with 2048 receive and
512 transmit frames of 2 KiB (crates/linkd/src/xsk.rs)."""

MEMORY_SHARE = 0.10
"""At most this share of MemAvailable goes to AF_XDP links; past it, ``auto`` takes
TAPs."""

MAX_AUTO_RATE = 500e6
"""From this rate (bit/s) up ``auto`` takes TAPs: linkd's default chunk (50 µs,
``--chunk-us``) then holds two or more full-size frames, so TCP crosses a TAP in
chunks of its super-frames, where AF_XDP carries wire frames one by one. Measured on
the 2-core VM, one TCP flow through a 1 Gbit/s link, 10 ms windows (two runs each):
|deviation| p95 0.34 and 0.45 % with TAPs (linkd 78-80 % of a core), 1.45 and 1.73 %
with AF_XDP (95 %)."""


@dataclass(frozen=True)
class EndpointChoice:
    """The endpoint kind of one engine link and why."""

    kind: str  # "tap" or "af_xdp"
    reason: str


def _shaped(p: LinkParams) -> bool:
    return not p.is_empty()


def choose_endpoint(
    requested: str,
    ab: LinkParams,
    ba: LinkParams,
    *,
    where: str,
    in_namespaces: bool,
    missing: str | None,
    memory_left: int,
) -> EndpointChoice:
    """The endpoint for an engine link with directions ``ab`` and ``ba``.

    ``in_namespaces``: both nodes have their own namespace; ``missing``: why this
    kernel has no AF_XDP (None: it has); ``memory_left``: bytes the run may still pin
    for AF_XDP links. An ``af_xdp`` asked for by name that cannot be had raises."""
    if requested == "tap":
        return EndpointChoice("tap", "asked for")
    blocker = missing
    if blocker is None and not in_namespaces:
        blocker = "a node in the host namespace (its veth pair would be the host's)"
    if requested == "af_xdp":
        if blocker is not None:
            raise UnsupportedError(
                blocker, f"{where}.endpoint (af_xdp)", "choose endpoint 'tap' or 'auto'"
            )
        return EndpointChoice("af_xdp", "asked for")
    if blocker is not None:
        return EndpointChoice("tap", f"no AF_XDP: {blocker}")
    if not (_shaped(ab) or _shaped(ba)):
        return EndpointChoice("tap", "unshaped: super-frames pass whole through TAPs")
    rates = [p.bw for p in (ab, ba) if p.bw is not None]
    if rates and max(rates) >= MAX_AUTO_RATE:
        return EndpointChoice(
            "tap",
            f"a rate of {MAX_AUTO_RATE / 1e6:g} Mbit/s or more (TCP crosses TAPs in chunks"
            " of super-frames; AF_XDP carries wire frames)",
        )
    if memory_left < LINK_MEMORY:
        return EndpointChoice(
            "tap",
            f"the run's AF_XDP links already pin {MEMORY_SHARE:.0%} of the memory available",
        )
    return EndpointChoice("af_xdp", "shaped: the kernel stamps each frame's arrival")


def xsk_peer_name(intf: str, seq: int) -> str:
    """The name of the veth end linkd attaches to, beside interface ``intf``:
    readable when it fits IFNAMSIZ, else numbered (``seq`` is unique in the run)."""
    name = f"{intf}-x"
    return name if len(name) <= 15 else f"fnx{seq}"
