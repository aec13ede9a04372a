"""Making a link's kernel side, and waiting for spanning trees: the parts of building
a :class:`~fidelnet.network.Network` that work per object.

:func:`realize_link` creates one link on the backend already chosen for it (a veth
pair that tc shapes, or an engine link: TAP devices, or veth pairs with AF_XDP
sockets, :mod:`fidelnet.links.engine_link`), brings both ends up with their MACs and
addresses and attaches them to their nodes. Every object is recorded under the run id
before it exists (the network's ``_owning``).
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any

from fidelnet import fastpath, hwlinks, stale, switches
from fidelnet.errors import KernelError
from fidelnet.kernel import l2switch, neigh, ns
from fidelnet.kernel.netlink import Netlink
from fidelnet.kernel.state import mark_for
from fidelnet.links.choice import Choice, choose
from fidelnet.links.drivers import LinkDriver, TcDriver
from fidelnet.links.engine import find_linkd
from fidelnet.links.engine_link import add_engine_link
from fidelnet.nodes.intf import Interface
from fidelnet.nodes.netns import IPV6_OFF
from fidelnet.nodes.node import Node, Switch
from fidelnet.topology.spec import LinkSpec

if TYPE_CHECKING:
    from fidelnet.network import Network

__all__ = ["fit_tables", "make_fabric", "realize_link", "realize_node", "setup_end", "wait_stp"]

log = logging.getLogger("fidelnet")


def fit_tables(net: Network) -> None:
    """Make room in the machine's neighbour tables for what the run's hosts and routers
    may resolve (:mod:`fidelnet.kernel.neigh`), given back at teardown."""
    l3 = sum(1 for spec in net.spec.nodes.values() if spec.kind != "switch")
    need = neigh.needed(l3) - net.neigh_reserved
    if need > 0 and neigh.fit(need, net.state_record):
        net.neigh_reserved += need


def make_fabric(net: Network) -> tuple[str, Netlink]:
    """Create the run's fabric namespace (every switch's bridge lives there), recorded
    first; return its path and a netlink handle in it.

    Switches are layer-2 devices: their bridges and ports get no IPv6 address, route
    or multicast membership of their own (they still forward IPv6 between nodes).
    With IPv6 on, every bridge and port in this one namespace had a link-local
    address and an fe80::/64 route, and every IPv6 multicast frame a node sent while
    coming up (DAD, router solicitation, MLD) was passed up to each bridge and looked
    up in that growing table: build time grew with the square of the switches
    (docs/scale.md). Set before the first device exists."""
    name = f"fn{net.run_id}.fabric"
    with net._owning("netns", name=name):
        path = ns.create(name)
    nl = Netlink(path)
    for key in IPV6_OFF:
        nl.write_sysctl(key, "1")
    nl.set_link(1, state="up")
    return path, nl


def preflight(net: Network, shells: bool) -> None:
    """What is checked before a build creates anything: each link's backend, the
    machine's capacity, the fast path, the switches' datapaths, the hardware pairs."""
    net.check_link_params(net.spec.links)
    net.check_capacity(shells=shells)
    fastpath.preflight(net.spec)
    switches.preflight(net.spec, l2switch.missing)
    hwlinks.preflight(net.spec, len(net.hw_pairs), net.sriov_pairs is not None)


def choose_link(net: Network, link: LinkSpec, where: str) -> Choice:
    """The backend that carries ``link`` (:func:`fidelnet.links.choice.choose`); the
    engine must be installed when it is the one."""
    requested = link.backend or net.spec.link_backend
    ab, ba = link.direction(link.a), link.direction(link.b)
    unshaped = ab.is_empty() and ba.is_empty()
    caps = net.kernel_caps() if requested != "engine" and not unshaped else frozenset()
    choice = choose(requested, ab, ba, caps, where)
    if choice.backend == "engine":
        find_linkd()
    return choice


def realize_node(net: Network, node: Node) -> None:
    """Create the kernel side of ``node``: its place in the fabric for a switch; for
    a host or router in a namespace, what its backend makes (the namespace, recorded
    first)."""
    spec = node.spec
    if isinstance(node, Switch):
        node._nl = net._fabric_netlink()
        node.netns = net._fabric
        kind = switches.choose(spec, net.spec, l2switch.missing)
        node.forwarder = net.datapath(kind)
        node.forwarder.add_switch(node)
        log.debug("%s: a switch on the %s datapath, in %s", spec.name, kind, net._fabric)
    elif spec.in_namespace:
        try:
            node.backend.create(node)  # its namespace, and what its backend needs
        except BaseException:
            # Never registered, so the network's stop will not close it: its netlink
            # handle (opened in its namespace) is closed here; the rollback removes
            # what it recorded.
            if node._nl is not None:
                node._nl.close()
                node._nl = None
            raise


def realize_link(
    net: Network,
    link: LinkSpec,
    choice: Choice,
    intf_classes: tuple[type[Interface], type[Interface]],
) -> tuple[Interface, Interface]:
    """Create ``link`` (ports and names assigned) on ``choice``'s backend, register
    the driver that carries it with ``net``, and return its two ends."""
    na, nb = net.nodes[link.a], net.nodes[link.b]
    assert link.a_intf and link.b_intf and link.a_port is not None and link.b_port is not None
    mark = mark_for(net.run_id)
    nla, nlb = na.netlink(), nb.netlink()
    where = f"link {link.a}-{link.b}"
    ab, ba = link.direction(link.a), link.direction(link.b)
    driver: LinkDriver
    with contextlib.ExitStack() as owned:
        for node, ifname in ((na, link.a_intf), (nb, link.b_intf)):
            if node.netns is None:
                stale.clear_host_name(ifname, net.run_id)  # a killed run's leftover
                owned.enter_context(net._owning("link", ifname=ifname))
        if choice.backend == "engine":
            driver = add_engine_link(net, link, choice, where)
            ia = nla.index(link.a_intf)
        elif choice.backend == "hw":
            driver = TcDriver(choice, net.kernel_caps, net.tdf_now)
            ia = hwlinks.lend_pair(net, link)
        else:
            driver = TcDriver(choice, net.kernel_caps, net.tdf_now)
            ia = nla.add_veth(link.a_intf, link.b_intf, nb.netns or ns.own_path())
    net.state_record("info", link=f"{link.a}:{link.a_intf}", **driver.describe())
    net._drivers[id(link)] = driver  # from here on, a rollback closes it
    ib = nlb.index(link.b_intf)
    intf_a = intf_classes[0](na, link.a_intf, link.a_port, ia)
    intf_b = intf_classes[1](nb, link.b_intf, link.b_port, ib)
    setup_end(na, intf_a, link.a_mac, link.a_ip, mark)
    setup_end(nb, intf_b, link.b_mac, link.b_ip, mark)
    for node, intf, peer in ((na, intf_a, intf_b), (nb, intf_b, intf_a)):
        if isinstance(node, Switch):
            node.forwards_by().link_added(node, intf, peer)
        elif node.backend_started:
            node.backend.intf_added(node, intf)  # a running VM gets a NIC for it
    if choice.backend == "tc" or (choice.backend == "hw" and not (ab.is_empty() and ba.is_empty())):
        driver.apply((intf_a, intf_b), ab, ba, where, initial=True)
    log.debug(
        "link %s:%s <-> %s:%s on %s (%s)",
        link.a,
        link.a_intf,
        link.b,
        link.b_intf,
        choice.backend,
        choice.reason,
    )
    return intf_a, intf_b


def setup_end(node: Node, intf: Interface, mac: str | None, ip: str | None, mark: str) -> None:
    """Bring one end up (in its switch's bridge, with its MAC) and give it its address;
    a node's first interface takes the node's own MAC and address when the link sets
    none."""
    first = not node.intfs
    attrs: dict[str, Any] = {"state": "up", "ifalias": mark}
    if mac is None and first and node.spec.mac and node.kind != "switch":
        mac = node.spec.mac
    if mac:
        attrs["address"] = mac
    node.add_intf(intf)
    if isinstance(node, Switch):
        attrs.update(node.forwards_by().port_attrs(node))
        # A port before it comes up: the datapath sees the first frame its link
        # carries, the MLD reports a node sends once it has carrier included.
        node.forwards_by().add_port(node, intf)
    node.netlink().set_link(intf.index, **attrs)
    if ip is None and first and node.kind != "switch" and node.spec.ip:
        ip = node.spec.ip
    if ip:
        intf.set_ip(ip, replace=False)  # a new interface has no address to replace
    log.debug(
        "%s: %s up (port %s)%s%s", node.name, intf.name, intf.port,
        f", MAC {mac}" if mac else "", f", {ip}" if ip else "",
    )  # fmt: skip


def wait_stp(switches: list[Switch], timeout: float) -> None:
    """Wait until these switches forward: no STP port listening or learning, every
    controller connected; the error names the switches that did not."""
    deadline = time.monotonic() + timeout
    delay = 0.02
    while True:
        pending = [s for s in switches if not s.forwarding()]
        if not pending:
            return
        if time.monotonic() > deadline:
            stp = [s.name for s in pending if s.spec.stp]
            other = [s.name for s in pending if not s.spec.stp]
            parts = [f"STP did not converge on {stp}"] if stp else []
            if other:
                ctl = ", ".join(
                    f"{c.name} at {c.address}" for c in switches[0].net.spec.controllers
                )
                parts.append(f"not connected to their controllers ({ctl}): {other}")
            raise KernelError(f"within {timeout:.0f} s: " + "; ".join(parts))
        time.sleep(delay)
        delay = min(0.2, delay * 2)
