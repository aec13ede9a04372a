"""Hardware links (backend ``hw``): a pair of real interfaces of this machine, joined
by a cable or by a VLAN between two SR-IOV virtual functions, carries a link instead
of a veth pair (CIMininet's ``HwPair``; docs/hwlinks.md).

Each link with backend ``hw`` takes the next free pair of ``TopologySpec.hardware_pairs``
in link order. :func:`preflight` checks, before anything is built, every interface
the links will take: it exists, is not the loopback, does not carry the default
route, is no bridge or bond port, and is not up with addresses (in use).
:func:`lend_pair` lends the pair's first interface to the link's ``a`` node and the
second to its ``b`` node (:mod:`fidelnet.kernel.hostintf`: recorded in the run state
before it moves, renamed as the link's end there, ``h1-eth0``), and the run gives
each back at teardown or ``fidelnet clean`` with its name, MTU, MAC, addresses and
up/down state, and without the qdiscs the run put on it. A VM node's end is an
interface in its namespace like any other: its NIC is joined to it as to a veth.
Shaping is the kernel's (tc), on the real interfaces.

:func:`attach_external` gives nodes real interfaces that are not links
(``TopologySpec.external``), for traffic that enters and leaves the emulation: a
macvlan on the host's interface made straight in the node's namespace (the host
keeps its interface), or the interface itself, lent and given back as a pair's ends
are. :func:`provision` makes the spec's SR-IOV VFs (:mod:`fidelnet.kernel.sriov`)
and puts their pairs in the run's pool.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from fidelnet.errors import ValidationError
from fidelnet.kernel import hostintf, sriov
from fidelnet.topology.spec import LinkSpec, SriovSpec, TopologySpec
from fidelnet.topology.validate_hw import external_name, hw_links

EXTERNAL_PORT = 1000
"""External interfaces take ports from here: after every link's, never a node's
default interface while it has links."""

if TYPE_CHECKING:
    from fidelnet.network import Network

__all__ = ["EXTERNAL_PORT", "attach_external", "lend_pair", "preflight", "provision", "release"]


def preflight(spec: TopologySpec, taken: int = 0, provisioned: bool = False) -> None:
    """Check the interfaces of the pairs the not yet taken hw links will take (the
    pool's first ``taken`` pairs are in use by this run already), and, unless the run
    ``provisioned`` them already, the SR-IOV PFs it will make VFs on."""
    wanted = len(hw_links(spec)) - taken
    for i, pair in enumerate(spec.hardware_pairs[taken : taken + max(0, wanted)], taken):
        for j, name in enumerate(pair):
            hostintf.check(name, f"hardware_pairs[{i}][{j}]", free=True)
    if not provisioned:
        for i, plan in enumerate(spec.sriov):
            sriov.check(_plan(plan), sriov.Host(), f"sriov[{i}]")
    for i, ext in enumerate(spec.external):
        if ext.mode == "lend":
            hostintf.check(ext.interface, f"external[{i}].interface")
        else:
            hostintf.check_parent(ext.interface, f"external[{i}].interface")


def attach_external(net: Network) -> None:
    """Give each node its external interfaces not given yet (after its links, so that
    a node's first interface stays its first link's): a macvlan on the host's
    interface, or the interface itself, named as asked, up, with its address."""
    from fidelnet.kernel.state import mark_for
    from fidelnet.nodes.intf import Interface
    from fidelnet.realize import setup_end

    for i, ext in enumerate(net.spec.external):
        if i in net.external_done:
            continue
        node = net.nodes[ext.node]
        assert node.netns is not None
        name = external_name(net.spec, i)
        where = f"external[{i}]"
        if ext.mode == "lend":
            hostintf.lend(
                ext.interface, os.path.basename(node.netns), net.state_record, rename=name,
                where=f"{where}.interface",
            )  # fmt: skip
        else:
            hostintf.add_macvlan(
                ext.interface, os.path.basename(node.netns), name, net.state_record,
                f"{where}.interface",
            )  # fmt: skip
        net.external_done.add(i)
        intf = Interface(node, name, EXTERNAL_PORT + i, int(node.netlink().index(name)))
        setup_end(node, intf, None, ext.ip, mark_for(net.run_id))
        if node.backend_started:
            node.backend.intf_added(node, intf)


def _plan(spec: SriovSpec) -> sriov.SriovPlan:
    return sriov.SriovPlan((spec.pfs[0], spec.pfs[1]), spec.vfs, spec.vlan_base)


def provision(net: Network) -> None:
    """Make the spec's SR-IOV VFs (recorded first, reverted at teardown) and put their
    pairs in the run's pool, after the spec's own pairs."""
    if net.sriov_pairs is not None:
        return
    made: list[tuple[str, str]] = []
    for i, plan in enumerate(net.spec.sriov):
        made += sriov.provision(_plan(plan), sriov.Host(), net.state_record, where=f"sriov[{i}]")
    net.sriov_pairs = made


def _take(net: Network, link: LinkSpec) -> tuple[str, str]:
    used = set(net.hw_pairs.values())
    for given in [*net.spec.hardware_pairs, *(net.sriov_pairs or [])]:
        pair = (given[0], given[1])
        if pair not in used:
            net.hw_pairs[id(link)] = pair
            return pair
    raise ValidationError(
        f"link {link.a}-{link.b}.backend",
        f"every pair of hardware_pairs is in use ({len(used)}): add pairs",
        "hw",
    )


def lend_pair(net: Network, link: LinkSpec) -> int:
    """Lend the link's pair to its two nodes; returns the ``a`` end's index."""
    assert link.a_intf and link.b_intf
    pair = _take(net, link)
    pool = [tuple(p) for p in net.spec.hardware_pairs]
    where = f"hardware_pairs[{pool.index(pair)}]" if pair in pool else f"SR-IOV pair {pair}"
    for (node_name, ifname), (j, hw) in zip(
        ((link.a, link.a_intf), (link.b, link.b_intf)), enumerate(pair), strict=True
    ):
        node = net.nodes[node_name]
        if node.netns is None:
            raise ValidationError(
                f"link {link.a}-{link.b}.backend",
                f"{node_name} is in the host's namespace: a hardware link joins nodes in "
                "namespaces of their own",
                "hw",
            )
        hostintf.lend(
            hw,
            os.path.basename(node.netns),
            net.state_record,
            rename=ifname,
            where=f"{where}[{j}]",
            free=True,
        )
    return int(net.nodes[link.a].netlink().index(link.a_intf))


def release(net: Network, link: LinkSpec) -> None:
    """Give the link's pair back now (a link deleted while the network runs)."""
    pair = net.hw_pairs.pop(id(link), None)
    if pair is None or net._state is None:
        return
    for rec in list(net._state.live_objects()):
        if rec["kind"] == "hostintf" and rec.get("ifname") in pair:
            hostintf.give_back(rec)
            ident = {k: v for k, v in rec.items() if k != "kind"}
            net._state.gone("hostintf", **ident)
