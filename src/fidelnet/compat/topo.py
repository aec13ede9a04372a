"""Mininet's ``mininet.topo``: topologies as graphs of names with options.

A :class:`Topo` records nodes and links with their options and checks nothing,
as in Mininet; ``Mininet.build()`` turns it into a fidelnet topology and
validates the whole of it before any kernel object is made.

- :class:`MultiGraph`: the small multigraph Mininet uses instead of networkx.
- :class:`Topo`: ``build``, ``addHost``, ``addSwitch``, ``addNode``, ``addLink``,
  ``nodes``, ``hosts``, ``switches``, ``links``, ``isSwitch``, ``port``,
  ``nodeInfo``, ``setNodeInfo``, ``linkInfo``, ``setlinkInfo``, ``convertTo``.
- :class:`SingleSwitchTopo`, :class:`SingleSwitchReversedTopo`,
  :class:`MinimalTopo`, :class:`LinearTopo`.
- :class:`SpecTopo`: a fidelnet :class:`~fidelnet.topology.spec.TopologySpec`
  seen as a Topo (what ``fidelnet mn --topo`` builds).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from fidelnet.compat.util import irange, natural, naturalSeq
from fidelnet.topology.spec import TopologySpec

__all__ = [
    "LinearTopo",
    "MinimalTopo",
    "MultiGraph",
    "SingleSwitchReversedTopo",
    "SingleSwitchTopo",
    "SpecTopo",
    "Topo",
]


class MultiGraph:
    """Nodes with attribute dicts, and keyed edges between them."""

    def __init__(self) -> None:
        self.node: dict[Any, dict[str, Any]] = {}
        self.edge: dict[Any, dict[Any, dict[Any, dict[str, Any]]]] = {}

    def add_node(self, node: Any, attr_dict: dict[str, Any] | None = None, **attrs: Any) -> None:
        attr_dict = {} if attr_dict is None else attr_dict
        attr_dict.update(attrs)
        self.node[node] = attr_dict

    def add_edge(
        self,
        src: Any,
        dst: Any,
        key: Any = None,
        attr_dict: dict[str, Any] | None = None,
        **attrs: Any,
    ) -> Any:
        attr_dict = {} if attr_dict is None else attr_dict
        attr_dict.update(attrs)
        self.node.setdefault(src, {})
        self.node.setdefault(dst, {})
        self.edge.setdefault(src, {})
        self.edge.setdefault(dst, {})
        self.edge[src].setdefault(dst, {})
        entry = self.edge[dst][src] = self.edge[src][dst]
        if key is None:
            keys = [k for k in entry if isinstance(k, int)]
            key = max([0, *keys]) + 1
        entry[key] = attr_dict
        return key

    def nodes(self, data: bool = False) -> Any:
        return self.node.items() if data else self.node.keys()

    def edges_iter(self, data: bool = False, keys: bool = False) -> Iterator[tuple[Any, ...]]:
        for src, entry in self.edge.items():
            for dst, entrykeys in entry.items():
                if src > dst:
                    continue  # each edge is stored both ways
                for k, attrs in entrykeys.items():
                    row: tuple[Any, ...] = (src, dst)
                    if keys:
                        row += (k,)
                    if data:
                        row += (attrs,)
                    yield row

    def edges(self, data: bool = False, keys: bool = False) -> list[tuple[Any, ...]]:
        return list(self.edges_iter(data=data, keys=keys))

    def __getitem__(self, node: Any) -> dict[Any, dict[Any, dict[str, Any]]]:
        return self.edge[node]

    def __len__(self) -> int:
        return len(self.node)

    def convertTo(self, cls: Any, data: bool = False, keys: bool = False) -> Any:
        g = cls()
        g.add_nodes_from(self.nodes(data=data))
        g.add_edges_from(self.edges(data=(data or keys), keys=keys))
        return g


class Topo:
    """A topology: override :meth:`build` and call ``addHost``/``addSwitch``/``addLink``."""

    def __init__(self, *args: Any, **params: Any) -> None:
        self.g = MultiGraph()
        self.hopts: dict[str, Any] = params.pop("hopts", {})
        self.sopts: dict[str, Any] = params.pop("sopts", {})
        self.lopts: dict[str, Any] = params.pop("lopts", {})
        # ports[src][sport] = (dst, dport)
        self.ports: dict[Any, dict[int, tuple[Any, int]]] = {}
        self.build(*args, **params)

    def build(self, *args: Any, **params: Any) -> None:
        """Override this method to build your topology."""

    def addNode(self, name: str, **opts: Any) -> str:
        self.g.add_node(name, **opts)
        return name

    def addHost(self, name: str, **opts: Any) -> str:
        if not opts and self.hopts:
            opts = self.hopts
        return self.addNode(name, **opts)

    def addSwitch(self, name: str, **opts: Any) -> str:
        if not opts and self.sopts:
            opts = self.sopts
        return self.addNode(name, isSwitch=True, **opts)

    def addLink(
        self,
        node1: str,
        node2: str,
        port1: int | None = None,
        port2: int | None = None,
        key: Any = None,
        **opts: Any,
    ) -> Any:
        """Link two nodes; returns the link's key (1, 2… between the same pair)."""
        if not opts and self.lopts:
            opts = self.lopts
        port1, port2 = self.addPort(node1, node2, port1, port2)
        info = dict(opts)
        info.update(node1=node1, node2=node2, port1=port1, port2=port2)
        return self.g.add_edge(node1, node2, key, info)

    def nodes(self, sort: bool = True) -> list[str]:
        if sort:
            return self.sorted(self.g.nodes())
        return list(self.g.nodes())

    def isSwitch(self, n: str) -> bool:
        return bool(self.g.node[n].get("isSwitch", False))

    def switches(self, sort: bool = True) -> list[str]:
        return [n for n in self.nodes(sort) if self.isSwitch(n)]

    def hosts(self, sort: bool = True) -> list[str]:
        return [n for n in self.nodes(sort) if not self.isSwitch(n)]

    def iterLinks(
        self, withKeys: bool = False, withInfo: bool = False
    ) -> Iterator[tuple[Any, ...]]:
        for _src, _dst, key, info in self.g.edges_iter(data=True, keys=True):
            row: tuple[Any, ...] = (info["node1"], info["node2"])
            if withKeys:
                row += (key,)
            if withInfo:
                row += (info,)
            yield row

    def links(
        self, sort: bool = False, withKeys: bool = False, withInfo: bool = False
    ) -> list[tuple[Any, ...]]:
        """Links as (node1, node2[, key][, info]); ``sort`` orders them naturally by
        (node1, node2[, key]), keeping each link's own (node1, node2) order."""
        links = list(self.iterLinks(withKeys, withInfo))
        if not sort:
            return links
        size = 3 if withKeys else 2
        return sorted(links, key=lambda row: naturalSeq(row[:size]))

    def addPort(
        self, src: str, dst: str, sport: int | None = None, dport: int | None = None
    ) -> tuple[int, int]:
        """Ports for a new link: the number of links a node has, plus its base
        (0 for hosts, 1 for switches), unless given."""
        self.ports.setdefault(src, {})
        self.ports.setdefault(dst, {})
        if sport is None:
            sport = len(self.ports[src]) + (1 if self.isSwitch(src) else 0)
        if dport is None:
            dport = len(self.ports[dst]) + (1 if self.isSwitch(dst) else 0)
        self.ports[src][sport] = (dst, dport)
        self.ports[dst][dport] = (src, sport)
        return sport, dport

    def port(self, src: str, dst: str) -> Any:
        """(sport, dport) of the link from ``src`` to ``dst``; a list if there are several."""
        ports = [(sport, entry[1]) for sport, entry in self.ports[src].items() if entry[0] == dst]
        return ports if len(ports) != 1 else ports[0]

    def _linkEntry(self, src: str, dst: str, key: Any = None) -> tuple[dict[Any, Any], Any]:
        entry = self.g[src][dst]
        if key is None:
            key = min(entry)
        return entry, key

    def linkInfo(self, src: str, dst: str, key: Any = None) -> dict[str, Any]:
        entry, key = self._linkEntry(src, dst, key)
        info: dict[str, Any] = entry[key]
        return info

    def setlinkInfo(self, src: str, dst: str, info: dict[str, Any], key: Any = None) -> None:
        entry, key = self._linkEntry(src, dst, key)
        entry[key] = info

    def nodeInfo(self, name: str) -> dict[str, Any]:
        return self.g.node[name]

    def setNodeInfo(self, name: str, info: dict[str, Any]) -> None:
        self.g.node[name] = info

    def convertTo(self, cls: Any, data: bool = True, keys: bool = True) -> Any:
        return self.g.convertTo(cls, data=data, keys=keys)

    @staticmethod
    def sorted(items: Iterable[Any]) -> list[Any]:
        return sorted(items, key=natural)


class SingleSwitchTopo(Topo):
    """One switch s1 and k hosts h1..hk."""

    def build(self, k: int = 2, **_opts: Any) -> None:
        self.k = k
        switch = self.addSwitch("s1")
        for h in irange(1, k):
            self.addLink(self.addHost(f"h{h}"), switch)


class SingleSwitchReversedTopo(Topo):
    """Like SingleSwitchTopo, with host h_i on switch port k - i + 1."""

    def build(self, k: int = 2) -> None:
        self.k = k
        switch = self.addSwitch("s1")
        for h in irange(1, k):
            self.addLink(self.addHost(f"h{h}"), switch, port1=0, port2=k - h + 1)


class MinimalTopo(SingleSwitchTopo):
    """Two hosts and one switch."""

    def build(self) -> None:  # type: ignore[override]
        SingleSwitchTopo.build(self, k=2)


class LinearTopo(Topo):
    """k switches in a chain, n hosts on each (h_i, or h{j}s{i} when n > 1)."""

    def build(self, k: int = 2, n: int = 1, **_opts: Any) -> None:
        self.k = k
        self.n = n
        last: str | None = None
        for i in irange(1, k):
            switch = self.addSwitch(f"s{i}")
            for j in irange(1, n):
                self.addLink(self.addHost(f"h{i}" if n == 1 else f"h{j}s{i}"), switch)
            if last is not None:
                self.addLink(switch, last)
            last = switch


class SpecTopo(Topo):
    """A fidelnet TopologySpec as a Topo: its nodes, links and ports in its order.

    Switch options (``dpid``, ``stp``), node and link addresses are carried over;
    routers become :class:`~fidelnet.compat._node.Router` hosts, and a spec with
    ``auto_routes`` gets its static routes once built; link ports are the spec's when
    it set them.
    """

    def build(self, spec: TopologySpec) -> None:
        self.spec = spec
        for node in spec.nodes.values():
            opts: dict[str, Any] = dict(node.opts)
            if node.kind == "switch":
                if node.stp:
                    opts["stp"] = True
                self.addSwitch(node.name, **opts)
                continue
            for attr, key in (("ip", "ip"), ("mac", "mac"), ("default_route", "defaultRoute")):
                value = getattr(node, attr)
                if value is not None:
                    opts[key] = value
            if node.kind == "router":
                from fidelnet.compat._node import Router

                opts.setdefault("cls", Router)
            self.addHost(node.name, **opts)
        for link in spec.links:
            ends: dict[str, Any] = {}
            if link.a_ip:
                ends["params1"] = {"ip": link.a_ip}
            if link.b_ip:
                ends["params2"] = {"ip": link.b_ip}
            self.addLink(link.a, link.b, port1=link.a_port, port2=link.b_port, **ends)
