"""Building one engine link: its endpoint kind (:mod:`fidelnet.links.endpoints`), the
veth pairs an AF_XDP link needs, and the link in the run's linkd."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fidelnet.errors import KernelError
from fidelnet.kernel import nic, ns, procfs
from fidelnet.kernel.xsk import af_xdp_missing
from fidelnet.links.choice import Choice
from fidelnet.links.drivers import EngineDriver
from fidelnet.links.endpoints import (
    LINK_MEMORY,
    MEMORY_SHARE,
    choose_endpoint,
    xsk_peer_name,
)
from fidelnet.links.engine import LinkEngine
from fidelnet.links.engine_params import direction_seed
from fidelnet.topology.spec import LinkSpec

if TYPE_CHECKING:
    from fidelnet.network import Network
    from fidelnet.nodes.node import Node

__all__ = ["XskBudget", "add_engine_link", "start_engine"]


def start_engine(net: Network, netns: str | None) -> LinkEngine:
    """Start the run's linkd in ``netns``. A dilated run's engine reads the run's
    clock page (``--clock-page``): its links' rates, delays and lateness are then in
    virtual time, and follow every TDF change (:mod:`fidelnet.vt`)."""
    args = list(net.engine_args)
    if net.vt_page is not None:
        args += ["--clock-page", str(net.vt_page.path)]
    engine = LinkEngine(
        net.run_id, netns, net.state_record, extra_args=args, threads=net.spec.engine_threads
    )
    engine.start()
    return engine


class XskBudget:
    """What the run's AF_XDP links pin, against :data:`MEMORY_SHARE` of the memory
    that was available when the first one was chosen."""

    def __init__(self) -> None:
        self.limit: int | None = None
        self.pinned = 0
        self.links = 0

    def left(self) -> int:
        if self.limit is None:
            avail = procfs.mem_available_bytes()
            self.limit = int(avail * MEMORY_SHARE) if avail is not None else 0
        return self.limit - self.pinned

    def take(self) -> int:
        """Account one more AF_XDP link; its sequence number in the run."""
        self.pinned += LINK_MEMORY
        self.links += 1
        return self.links


def add_engine_link(net: Network, link: LinkSpec, choice: Choice, where: str) -> EngineDriver:
    """Create ``link`` (ports and names assigned) in the run's linkd, with the
    endpoint kind chosen for it; its node-side interfaces exist when this returns."""
    na, nb = net.nodes[link.a], net.nodes[link.b]
    assert link.a_intf and link.b_intf
    ab, ba = link.direction(link.a), link.direction(link.b)
    requested = link.endpoint or net.spec.engine_endpoint
    budget = net.xsk_budget
    endpoint = choose_endpoint(
        requested,
        ab,
        ba,
        where=where,
        in_namespaces=na.netns is not None and nb.netns is not None,
        missing=af_xdp_missing() if requested != "tap" else None,
        memory_left=budget.left() if requested == "auto" else LINK_MEMORY,
    )
    engine = net.link_engine()
    name = f"{link.a}:{link.a_intf}"
    driver = EngineDriver(choice, engine, name, direction_seed(net.seed, name), endpoint)
    ends = [(na, link.a_intf), (nb, link.b_intf)]
    if endpoint.kind == "af_xdp":
        seq = budget.take()
        names = [
            _xsk_pair(node, ifname, xsk_peer_name(ifname, 2 * seq + i), where)
            for i, (node, ifname) in enumerate(ends)
        ]
    else:
        names = [ifname for _, ifname in ends]
    engine.add_link(
        name,
        (na.netns or ns.own_path(), names[0]),
        (nb.netns or ns.own_path(), names[1]),
        driver.engine_params(ab, "ab", f"{where}.ab"),
        driver.engine_params(ba, "ba", f"{where}.ba"),
        kind=endpoint.kind,
    )
    return driver


def _xsk_pair(node: Node, ifname: str, peer: str, where: str) -> str:
    """The veth pair of an AF_XDP end in ``node``'s namespace: ``ifname`` for the node,
    ``peer`` for linkd (up, no IPv6, no address). The node's end computes transport
    checksums itself: XDP carries no checksum state, so a frame left for "the
    device" to complete would arrive with a wrong one. Returns ``peer``."""
    nl = node.netlink()
    nl.add_veth(ifname, peer, None)
    nl.write_sysctl(f"net.ipv6.conf.{peer}.disable_ipv6", "1")
    nl.set_link(nl.index(peer), state="up")
    try:
        nic.set_tx_checksum(node.netns, ifname, False)  # in the namespace: any node kind
    except KernelError as exc:
        raise KernelError(f"{where}: {exc}") from exc
    return peer
