"""Mininet's ``mininet.net``: the :class:`Mininet` network object, on fidelnet.

A ``Mininet`` owns one fidelnet :class:`~fidelnet.network.Network`, opened when the
object is made (so nodes and links are created as they are added, as in
Mininet). ``build()`` first turns the whole ``Topo`` into a fidelnet spec and
validates it, so a bad name or parameter fails before any namespace or
interface exists; a build that fails part way is rolled back. ``stop()`` (also
run at exit, and on SIGTERM) removes everything the run made.

Names: :class:`Mininet`, :class:`MininetWithControlNet` (the same network; its
control network is not built), ``VERSION``.
"""

from __future__ import annotations

import itertools
import os
import random
import sys
from typing import Any

from fidelnet import l3, realize
from fidelnet.compat import _context
from fidelnet.compat._build import topo_spec
from fidelnet.compat._netrun import NetRunning
from fidelnet.compat._nettests import NetTests
from fidelnet.compat.link import Intf, Link
from fidelnet.compat.log import error, info
from fidelnet.compat.node import Controller, DefaultController, Host, Node, OVSKernelSwitch
from fidelnet.compat.nodelib import NAT
from fidelnet.compat.topo import SpecTopo
from fidelnet.compat.util import ensureRoot, ipAdd, macColonHex, netParse
from fidelnet.errors import UnknownNodeError, ValidationError
from fidelnet.kernel import procfs
from fidelnet.network import Network
from fidelnet.topology.addressing import assign_ips
from fidelnet.topology.validate import validate
from fidelnet.vt import run as vt_run

__all__ = ["VERSION", "Containernet", "Mininet", "MininetWithControlNet"]

VERSION = "2.3.0"


class Mininet(NetRunning, NetTests):
    """Network emulation with hosts in network namespaces (fidelnet underneath)."""

    inited = False

    def __init__(
        self,
        topo: Any = None,
        switch: Any = OVSKernelSwitch,
        host: Any = Host,
        controller: Any = DefaultController,
        link: Any = Link,
        intf: Any = Intf,
        build: bool = True,
        xterms: bool = False,
        cleanup: bool = False,
        ipBase: str = "10.0.0.0/8",
        inNamespace: bool = False,
        autoSetMacs: bool = False,
        autoStaticArp: bool = False,
        autoPinCpus: bool = False,
        listenPort: int | None = None,
        waitConnected: Any = False,
        ipv6: bool = True,
        tdf: float | str | None = None,
        **kwargs: Any,
    ) -> None:
        _context.warn_unknown("Mininet()", kwargs)
        self.topo = topo
        self.switch = switch
        self.host = host
        self.controller = controller
        self.link = link
        self.intf = intf
        self.ipBase = ipBase
        self.ipBaseNum, self.prefixLen = netParse(ipBase)
        host_part = (0xFFFFFFFF >> self.prefixLen) & self.ipBaseNum
        self.nextIP = host_part if host_part > 0 else 1
        self.inNamespace = inNamespace
        self.xterms = xterms
        self.cleanup = cleanup
        self.autoSetMacs = autoSetMacs
        self.autoStaticArp = autoStaticArp
        self.autoPinCpus = autoPinCpus
        self.numCores = os.cpu_count() or 1
        self.nextCore = 0
        self.listenPort = listenPort
        self.waitConn = waitConnected
        self.hosts: list[Any] = []
        self.switches: list[Any] = []
        self.controllers: list[Any] = []
        self.links: list[Any] = []
        self.nameToNode: dict[str, Any] = {}
        self.terms: list[Any] = []
        if inNamespace:
            _context.warn_once(
                "innamespace",
                "inNamespace=True ignored: fidelnet's switches "
                "always live in the run's fabric namespace",
            )
        if xterms:
            _context.warn_once(
                "xterms", "xterms are not supported; use `<node> <command>` in the CLI"
            )
        Mininet.init()
        self.fn_net = Network(command=" ".join(sys.argv) or "python")
        self.fn_net.spec.ip_base = ipBase
        self.fn_net.spec.ipv6 = ipv6  # fidelnet's own: False turns IPv6 off in every node
        if tdf is not None:  # virtual time for every node and link (docs/virtual-time.md)
            vt_run.tdf_arg(self.fn_net.spec, tdf, "Mininet.tdf")
        self._cpu_start = procfs.cpu_times()
        self.fn_net.open()
        _context.track(self.fn_net)
        self.built = False
        if topo and build:
            self.build()

    # -- adding and removing ---------------------------------------------------------------

    def addHost(self, name: str, cls: Any = None, **params: Any) -> Any:
        """Add a host (addresses numbered from ``ipBase`` in the order hosts are added)."""
        defaults: dict[str, Any] = {
            "ip": f"{ipAdd(self.nextIP, ipBaseNum=self.ipBaseNum, prefixLen=self.prefixLen)}"
            f"/{self.prefixLen}"
        }
        if self.autoSetMacs:
            defaults["mac"] = macColonHex(self.nextIP)
        if self.autoPinCpus:
            defaults["cores"] = self.nextCore
            self.nextCore = (self.nextCore + 1) % self.numCores
        self.nextIP += 1
        auto = "ip" not in params
        defaults.update(params)
        with _context.building(self.fn_net):
            h = (cls or self.host)(name, **defaults)
        h.fn_auto_ip = auto
        self.hosts.append(h)
        self.nameToNode[name] = h
        return h

    def addSwitch(self, name: str, cls: Any = None, **params: Any) -> Any:
        defaults: dict[str, Any] = {"listenPort": self.listenPort}
        defaults.update(params)
        with _context.building(self.fn_net):
            sw = (cls or self.switch)(name, **defaults)
        if not self.inNamespace and self.listenPort:
            self.listenPort += 1
        self.switches.append(sw)
        self.nameToNode[name] = sw
        return sw

    def addController(self, name: Any = "c0", controller: Any = None, **params: Any) -> Any:
        """Add a controller (accepted and not run: OpenFlow is out of scope)."""
        if isinstance(name, Controller):
            new, name = name, name.name
        else:
            with _context.building(self.fn_net):
                new = (controller or self.controller)(name, **params)
        if new:
            self.controllers.append(new)
            self.nameToNode[name] = new
        return new

    def addNAT(
        self, name: str = "nat0", connect: Any = True, inNamespace: bool = False, **params: Any
    ) -> Any:
        """A NAT node (in the host's namespace by default) linked to ``connect`` (the
        first switch when True); every host in a namespace routes through it by
        default (:class:`fidelnet.compat.nodelib.NAT`)."""
        nat = self.addHost(name, cls=NAT, inNamespace=inNamespace, subnet=self.ipBase, **params)
        if connect:
            if not isinstance(connect, Node):
                if not self.switches:
                    raise ValidationError("addNAT.connect", "the network has no switch", connect)
                connect = self.switches[0]
            self.addLink(nat, connect)
            nat_ip = str(nat.params["ip"]).split("/")[0]
            for host in self.hosts:
                if host.inNamespace:
                    host.setDefaultRoute(f"via {nat_ip}")
        return nat

    def addLink(
        self,
        node1: Any,
        node2: Any,
        port1: int | None = None,
        port2: int | None = None,
        cls: Any = None,
        **params: Any,
    ) -> Any:
        """Link two nodes (objects or names); ``cls`` defaults to the network's link class."""
        n1 = self[node1] if isinstance(node1, str) else node1
        n2 = self[node2] if isinstance(node2, str) else node2
        for end, given in ((n1, node1), (n2, node2)):
            if not hasattr(end, "name") or not hasattr(end, "newPort"):
                raise ValidationError(
                    "addLink", "a node or a node's name", repr(given), sorted(self.nameToNode)
                )
        options = dict(params)
        if port1 is not None:
            options.setdefault("port1", port1)
        if port2 is not None:
            options.setdefault("port2", port2)
        if self.intf is not None:
            options.setdefault("intf", self.intf)
        with _context.building(self.fn_net):
            link = (cls or self.link)(n1, n2, **options)
        self.links.append(link)
        return link

    def delNode(self, node: Any, nodes: list[Any] | None = None) -> None:
        if nodes is None:
            nodes = next(
                (lst for lst in (self.hosts, self.switches, self.controllers) if node in lst), []
            )
        node.stop(deleteIntfs=True)
        node.terminate()
        nodes.remove(node)
        del self.nameToNode[node.name]
        _context.release(node)  # a host's name may be used again, as in Mininet

    def delHost(self, host: Any) -> None:
        self.delNode(host, nodes=self.hosts)

    def delSwitch(self, switch: Any) -> None:
        self.delNode(switch, nodes=self.switches)

    def delController(self, controller: Any) -> None:
        self.delNode(controller)

    def delLink(self, link: Any) -> None:
        link.delete()
        self.links.remove(link)

    def linksBetween(self, node1: Any, node2: Any) -> list[Any]:
        return [
            lk
            for lk in self.links
            if (node1, node2) in ((lk.intf1.node, lk.intf2.node), (lk.intf2.node, lk.intf1.node))
        ]

    def delLinkBetween(
        self, node1: Any, node2: Any, index: int = 0, allLinks: bool = False
    ) -> list[Any]:
        links = self.linksBetween(node1, node2)
        if not allLinks:
            if not -len(links) <= index < len(links):
                raise ValidationError(
                    "delLinkBetween.index",
                    f"{len(links)} link(s) between {node1} and {node2}",
                    index,
                )
            links = [links[index]]
        for link in links:
            self.delLink(link)
        return links

    @staticmethod
    def randMac() -> str:
        """A random unicast, locally administered MAC."""
        return macColonHex(random.randint(1, 2**48 - 1) & 0xFEFFFFFFFFFF | 0x020000000000)

    # -- lookup -----------------------------------------------------------------------------

    def _named(self, name: Any) -> Any:
        try:
            return self.nameToNode[name]
        except (KeyError, TypeError):
            raise UnknownNodeError(name, list(self.nameToNode)) from None

    def getNodeByName(self, *args: str) -> Any:
        if len(args) == 1:
            return self._named(args[0])
        return [self._named(n) for n in args]

    def get(self, *args: str) -> Any:
        return self.getNodeByName(*args)

    def __getitem__(self, key: str) -> Any:
        return self._named(key)

    def __delitem__(self, key: str) -> None:
        self.delNode(self._named(key))

    def __iter__(self) -> Any:
        for node in itertools.chain(self.hosts, self.switches, self.controllers):
            yield node.name

    def __len__(self) -> int:
        return len(self.hosts) + len(self.switches) + len(self.controllers)

    def __contains__(self, item: object) -> bool:
        return item in self.nameToNode

    def keys(self) -> list[str]:
        return list(self)

    def values(self) -> list[Any]:
        return [self[name] for name in self]

    def items(self) -> Any:
        return zip(self.keys(), self.values(), strict=True)

    # -- building ---------------------------------------------------------------------------

    def configHosts(self) -> None:
        """Give every host its address, MAC and routes (``config``)."""
        for host in self.hosts:
            info(host.name + " ")
            if host.intfs:
                host.configDefault()
            else:
                host.configDefault(ip=None, mac=None)
        info("\n")

    def fn_check_topo(self) -> None:
        """Validate what building the topology would make, before making any of it."""
        spec = topo_spec(self)
        # Ports and names are planned inside validate() exactly as assign_ports() would
        # set them; leaving them unset lets a too-long default name be blamed on its node.
        assign_ips(spec)
        validate(spec)
        self.fn_net.check_link_params(spec.links)
        self.fn_net.check_capacity(spec)

    def buildFromTopo(self, topo: Any = None) -> None:
        """Create the topology's nodes and links (checked as a whole first)."""
        topo = topo or self.topo
        self.topo = topo
        self.fn_check_topo()
        info("*** Creating network\n")
        if not self.controllers and self.controller:
            info("*** Adding controller\n")
            classes = self.controller if isinstance(self.controller, list) else [self.controller]
            for i, cls in enumerate(classes):
                if isinstance(cls, Controller):
                    self.addController(cls)
                else:
                    self.addController(f"c{i}", cls)
        info("*** Adding hosts:\n")
        for name in topo.hosts():
            self.addHost(name, **topo.nodeInfo(name))
            info(name + " ")
        info("\n*** Adding switches:\n")
        for name in topo.switches():
            params = dict(topo.nodeInfo(name))
            params.pop("isSwitch", None)
            self.addSwitch(name, **params)
            info(name + " ")
        info("\n*** Adding links:\n")
        for src, dst, params in topo.links(sort=True, withInfo=True):
            self.addLink(**params)
            info(f"({src}, {dst}) ")
        info("\n")
        self.fn_report_backends()

    def fn_report_backends(self) -> None:
        """Say which backend carries the shaped links, and why (fidelnet only)."""
        reasons: dict[tuple[str, str], int] = {}
        for link in self.fn_net.links:
            if link.backend != "veth":
                key = (link.backend, link.driver.choice.reason)
                reasons[key] = reasons.get(key, 0) + 1
        for (backend, reason), count in sorted(reasons.items()):
            info(f"*** {count} link(s) on the {backend} backend: {reason}\n")

    def configureControlNetwork(self) -> None:
        """No control network: fidelnet's switches need no controller connection."""

    def build(self) -> None:
        """Build the network from its topology; rolled back entirely if any part fails."""
        try:
            if self.topo:
                self.buildFromTopo(self.topo)
            realize.fit_tables(self.fn_net)  # room for the hosts' neighbours (pingall)
            for datapath in self.fn_net.datapaths.values():
                sync = getattr(datapath, "sync", None)  # OVS: apply the build's commands
                if sync is not None:
                    sync()
            self.fn_net.start_nodes()  # VM hosts boot here, their links made
            info("*** Configuring hosts\n")
            self.configHosts()
            if isinstance(self.topo, SpecTopo) and self.topo.spec.auto_routes:
                l3.static_routes(self.fn_net)  # a fidelnet topology's routes
            for node in self.hosts + self.switches:
                for intf in node.intfs.values():
                    getattr(intf, "_fn_fresh", {}).clear()  # from here on, always apply
            if self.autoStaticArp:
                self.staticArp()
            self.built = True
        except BaseException:
            self.fn_net.stop()
            raise

    def staticArp(self) -> None:
        """Every host gets a permanent ARP entry for every other host."""
        for src in self.hosts:
            for dst in self.hosts:
                if src is not dst and dst.IP() and dst.MAC():
                    src.setARP(ip=dst.IP(), mac=dst.MAC())

    def startTerms(self) -> None:
        error("*** xterms are not supported by fidelnet\n")

    def stopXterms(self) -> None:
        """No terminals to stop."""

    def __enter__(self) -> Mininet:
        return self

    def __exit__(self, *args: object) -> None:
        self.stop()

    @classmethod
    def init(cls) -> None:
        """Check once that we can make namespaces (root)."""
        if cls.inited:
            return
        ensureRoot()
        cls.inited = True


class MininetWithControlNet(Mininet):
    """Mininet with a control network; fidelnet's switches need none, so it is the
    same network."""


class Containernet(Mininet):
    """Containernet's network: Mininet's, and hosts from OCI images
    (:class:`fidelnet.compat.node.Docker`, docs/containers.md)."""

    def addDocker(self, name: str, cls: Any = None, **params: Any) -> Any:
        """A host running the image ``dimage`` (Containernet's ``addDocker``)."""
        from fidelnet.compat._docker import Docker

        return self.addHost(name, cls=cls or Docker, **params)

    def removeDocker(self, name: Any, **params: Any) -> None:
        """Stop and remove a Docker host, by name or node (Containernet's)."""
        del params
        self.delHost(self.nameToNode[name] if isinstance(name, str) else name)
