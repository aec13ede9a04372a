"""Moving a running veth or tc link onto the link engine, keeping its interfaces.

A link built as a veth pair (nothing asked of it, or only what tc can do) may later
be asked for something the kernel cannot do: a delay or loss without ``sch_netem``,
a seeded loss, a trace. Mininet scripts do this all the time (``intf.config(delay=
'10ms')`` after ``start()``). Rebuilding the link would delete the interfaces and
with them the addresses, routes, sockets and bridge ports users set up on them, so
the veth pair stays and its traffic is *diverted* through the engine instead:

- linkd creates two TAP devices, one beside each veth end in the same namespace, with
  the veth's MAC and MTU, IPv6 off and no address, so the kernel never sends on them
  on its own and frames injected there look addressed to the veth end;
- what linkd writes into a TAP is redirected to the ingress of its veth end: the
  node receives the frame on the interface it always had;
- everything the node sends out of a veth end is redirected into its TAP, ahead of
  the root qdisc: linkd reads it, runs it through the link model (``ab`` from
  ``a``'s TAP to ``b``'s) and writes it into the other TAP.

The redirects are tcx BPF links that linkd makes and holds (Linux 6.6+, ``divert`` in
docs/linkd.md): attaching them deactivates nothing, so no frame is lost at the
switch, and if linkd dies they go with it and the veth carries its traffic directly
again. On older kernels the same redirects are tc ``clsact`` filters with ``mirred``
actions; adding the ``clsact`` qdisc to a busy interface briefly deactivates it, so
there a frame or two in flight at the switch can be lost (logged as a warning).

The engine starts with the link's current parameters, so nothing changes at the
moment of the switch; the caller then applies the new ones. Frames already queued
in a tc qdisc drain on the old path first (at most :data:`DRAIN_S`), then the qdisc is
removed. A diverted link stays on the engine for the rest of the run: moving back and
forth would reorder frames held in the engine. The TAPs belong to linkd and vanish
with it; the filters vanish with the veth ends.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from fidelnet.errors import UnsupportedError
from fidelnet.kernel import ns, tc
from fidelnet.kernel.state import mark_for
from fidelnet.links.choice import Choice
from fidelnet.links.drivers import EngineDriver
from fidelnet.links.engine import LinkEngine, LinkEngineError, find_linkd
from fidelnet.links.engine_params import direction_seed

if TYPE_CHECKING:
    from fidelnet.links.link import Link
    from fidelnet.network import Network
    from fidelnet.nodes.intf import Interface

__all__ = ["DRAIN_S", "divert", "divert_or_refuse", "tap_name"]

log = logging.getLogger("fidelnet")

DRAIN_S = 1.0
"""How long a tc qdisc that held frames at the switch may take to send them."""


def tap_name(intf: Interface) -> str:
    """The name of the engine's TAP beside ``intf``: readable when it fits IFNAMSIZ,
    else made from the interface index (unique in its namespace)."""
    name = f"{intf.name}-e"
    return name if len(name) <= 15 else f"fne{intf.index}"


def divert_or_refuse(net: Network, link: Link, why: str) -> EngineDriver:
    """Divert ``link`` (see :func:`divert`) unless its backend was asked for by name:
    a link built with backend ``tc`` stays on tc, and the change is refused."""
    requested = link.spec.backend or net.spec.link_backend
    if requested == "hw":
        raise UnsupportedError(
            why,
            f"{link.where} (backend hw)",
            "a hardware pair carries its packets on its own wire: only what the "
            "kernel's qdiscs do applies to it",
        )
    if requested == "tc":
        raise UnsupportedError(
            why,
            f"{link.where} (backend tc)",
            "the engine backend does all of this: build the link with backend "
            "'engine', or leave its backend 'auto' so that it moves to the engine",
        )
    find_linkd()
    return divert(net, link, why)


def divert(net: Network, link: Link, why: str) -> EngineDriver:
    """Put ``link``'s traffic through the run's engine; returns the link's new driver.
    Raises before anything is diverted when the engine cannot start or refuses."""
    engine = net.link_engine()
    ends = (link.intf1, link.intf2)
    name = f"{link.spec.a}:{link.intf1.name}"
    choice = Choice("engine", f"moved from {link.backend} at runtime: {why}")
    driver = EngineDriver(choice, engine, name, direction_seed(net.seed, name))
    taps = [tap_name(intf) for intf in ends]
    for intf, tap in zip(ends, taps, strict=True):
        if intf.node.netns is None:  # a node in the host namespace: record before
            net.state_record("link", ifname=tap)
    engine.add_link(
        name,
        (link.intf1.node.netns or ns.own_path(), taps[0]),
        (link.intf2.node.netns or ns.own_path(), taps[1]),
        driver.engine_params(link.params("ab"), "ab", f"{link.where}.ab"),
        driver.engine_params(link.params("ba"), "ba", f"{link.where}.ba"),
    )
    mark = mark_for(net.run_id)
    try:
        for intf, tap in zip(ends, taps, strict=True):
            nl = intf.node.netlink()
            ti = nl.index(tap)
            nl.write_sysctl(f"net.ipv6.conf.{tap}.disable_ipv6", "1")
            veth = nl.link_info(intf.index)
            nl.set_link(ti, address=veth["mac"], mtu=veth["mtu"], ifalias=mark, state="up")
        _redirect(engine, name, ends, taps)
    except BaseException:
        engine.remove_link(name)  # its TAPs and tcx redirects go with it
        raise
    if link.backend == "tc":  # the qdiscs were ours; a bare veth's are left alone
        for intf in ends:
            _drain_and_clear(intf)
    net.state_record("info", link=name, diverted=list(taps), **driver.describe())
    log.info("%s: moved onto the link engine at runtime (%s)", link.where, why)
    return driver


def _redirect(
    engine: LinkEngine, name: str, ends: tuple[Interface, Interface], taps: list[str]
) -> None:
    """The switch: from here on, what either end sends goes through the engine."""
    try:
        engine.divert(name, ends[0].name, ends[1].name)
        return
    except LinkEngineError as exc:
        if "tcx links need" not in str(exc):
            raise
        log.warning(
            "%s: %s; diverting with tc mirred instead, which may lose a frame in "
            "flight at the switch", name, exc,
        )  # fmt: skip
    mirred(ends, taps)


def mirred(ends: tuple[Interface, Interface], taps: list[str]) -> None:
    """The redirects as tc clsact filters (kernels without tcx). On failure the veth
    ends' clsact qdiscs, added here, are removed again."""
    try:
        for intf, tap in zip(ends, taps, strict=True):
            nl = intf.node.netlink()
            tc.redirect_all(nl, nl.index(tap), "ingress", intf.index, "ingress")
        for intf, tap in zip(ends, taps, strict=True):
            nl = intf.node.netlink()
            tc.redirect_all(nl, intf.index, "egress", nl.index(tap), "egress")
    except BaseException:
        for intf in ends:
            tc.remove_clsact(intf.node.netlink(), intf.index)
        raise


def _drain_and_clear(intf: Interface) -> None:
    nl = intf.node.netlink()
    deadline = time.monotonic() + DRAIN_S
    while time.monotonic() < deadline:
        if not any(q["qlen"] or q["backlog"] for q in tc.qdisc_stats(nl, intf.index)):
            break
        time.sleep(0.005)
    tc.clear_root(nl, intf.index)
    tc.remove_bpf_filter(nl, intf.index)  # a random loss of the tc backend's
