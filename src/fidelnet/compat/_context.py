"""Shared state of the Mininet layer: which fidelnet Network new objects join, checks,
and one-time warnings.

Mininet constructs nodes as ``cls(name, **params)`` without telling them which
network they belong to. ``Mininet`` methods wrap such calls in :func:`building`,
and a node constructed outside any of them (``Host('h1')`` in a script with no
``Mininet`` object) joins one implicit module-level Network, stopped at exit.

- :func:`current_network`, :func:`building`, :func:`stopping`, :func:`is_stopping`,
  :func:`track`, :func:`stop_all`, :func:`is_standalone`, :func:`release`;
- :func:`add_node_spec`, :func:`add_link_spec`: put a spec into a running
  network after checking it (cheap per-object checks; whole topologies are
  checked up front by ``Mininet.build``);
- :func:`warn_once`, :func:`warn_unknown`, :func:`accepted_params`.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import sys
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Any

from fidelnet.errors import ValidationError
from fidelnet.network import Network
from fidelnet.topology.spec import LinkSpec, NodeSpec, TopologySpec
from fidelnet.topology.validate import validate

__all__ = [
    "accepted_params",
    "add_link_spec",
    "add_node_spec",
    "adopt",
    "building",
    "current_network",
    "forget_intf",
    "is_standalone",
    "is_stopping",
    "open_networks",
    "release",
    "stop_all",
    "stopping",
    "track",
    "warn_once",
    "warn_unknown",
]

log = logging.getLogger("fidelnet")

_stack: list[Network] = []
_implicit: Network | None = None
_opened: list[Network] = []
_stopping: set[int] = set()
_warned: set[str] = set()


def current_network() -> Network:
    """The network a node constructed now belongs to (opened if needed)."""
    global _implicit
    if _stack:
        return _stack[-1]
    if _implicit is None or not _implicit.is_open:
        _implicit = Network(command=" ".join(sys.argv) or "python")
        _implicit.open()  # registers its own stop at exit
        track(_implicit)
    return _implicit


def open_networks() -> list[Network]:
    """Every network of this process the Mininet layer knows, open or building."""
    nets = [*_opened, *_stack]
    if _implicit is not None:
        nets.append(_implicit)
    return [n for i, n in enumerate(nets) if n.is_open and n not in nets[:i]]


def adopt(node: Any, net: Network) -> bool:
    """Move ``node`` into ``net`` if nothing of it is in the kernel yet besides its
    shell: a node of the host's namespace with no interface (sshd.py's ``root``, made
    with ``Node('root', inNamespace=False)`` before its network exists). False when
    it cannot move."""
    old = node.net
    if old is net:
        return True
    if node.netns is not None or node.intfs or node.name in net.nodes:
        return False
    if node.name in net.spec.nodes:
        return False
    spec = old.spec.nodes.pop(node.name, None)
    old.nodes.pop(node.name, None)
    if spec is None:
        return False
    net.spec.add_node(spec)
    net.nodes[node.name] = node
    node.net = net
    return True


def is_standalone(net: Network) -> bool:
    """Whether ``net`` is the implicit network of nodes made without a ``Mininet``."""
    return net is _implicit


def release(node: Any) -> None:
    """Take ``node`` out of its running network and free its name, as Mininet lets a
    deleted or stopped node's name be used again: its links are deleted through their
    own objects (both ends, switches told), then the network removes the node and
    what the run recorded as its (:meth:`fidelnet.network.Network.remove_node`). A
    network being stopped, or a node it no longer holds, is left alone."""
    net = node.net
    if not getattr(node, "fn_releasable", False):
        return  # switches and controllers go with their network
    if not net.is_open or is_stopping(net) or net.nodes.get(node.name) is not node:
        return
    for link in [lk for lk in net.links if node in (lk.intf1.node, lk.intf2.node)]:
        delete = getattr(link, "delete", None)
        if callable(delete):
            delete()
    net.remove_node(node)
    table: dict[str, set[str]] = net.__dict__.get("_fn_intf_names", {})
    table.pop(node.name, None)  # the names in its own namespace went with it


def track(net: Network) -> None:
    """Remember ``net`` so :func:`stop_all` can tear it down."""
    _opened.append(net)


def stop_all() -> None:
    """Tear down every network the Mininet layer opened that is still up."""
    while _opened:
        _opened.pop().stop()


@contextlib.contextmanager
def building(net: Network) -> Iterator[None]:
    """Nodes constructed inside the block join ``net``."""
    _stack.append(net)
    try:
        yield
    finally:
        _stack.pop()


@contextlib.contextmanager
def stopping(net: Network) -> Iterator[None]:
    """Inside the block ``net`` is being torn down: deleting single interfaces is
    pointless, the namespaces go with everything in them."""
    _stopping.add(id(net))
    try:
        yield
    finally:
        _stopping.discard(id(net))


def is_stopping(net: Network) -> bool:
    return id(net) in _stopping


# -- checks before the kernel is touched ------------------------------------------------


def add_node_spec(net: Network, spec: NodeSpec) -> None:
    """Check ``spec`` on its own and add it to ``net.spec``."""
    if spec.name in net.spec.nodes or spec.name in net.nodes:
        raise ValidationError(f"nodes.{spec.name}", "a node with this name exists", spec.name)
    validate(TopologySpec(nodes={spec.name: spec}, ip_base=net.spec.ip_base))
    net.spec.add_node(spec)


def _space(net: Network, node: str) -> str:
    """Which namespace a node's interfaces live in: its own, the switches' shared
    fabric, or the host's (nodes outside a namespace)."""
    spec = net.spec.nodes[node]
    if spec.kind == "switch":
        return "<fabric>"
    return node if spec.in_namespace else "<root>"


def _names(net: Network, space: str) -> set[str]:
    """Interface names in use in a namespace (kept up to date as links come and go)."""
    table: dict[str, set[str]] = net.__dict__.setdefault("_fn_intf_names", {})
    if space not in table:
        table[space] = {
            i.name
            for n in net.nodes.values()
            if _space(net, n.name) == space
            for i in n.intfs.values()
        }
    return table[space]


def forget_intf(net: Network, node: str, name: str) -> None:
    """An interface was deleted: its name may be used again."""
    if node in net.spec.nodes:
        _names(net, _space(net, node)).discard(name)


def add_link_spec(net: Network, link: LinkSpec) -> None:
    """Check ``link`` (ports and interface names set) against the two nodes it joins
    and add it to ``net.spec``; raises ValidationError or UnsupportedError."""
    for side, end in (("a", link.a), ("b", link.b)):
        if end not in net.spec.nodes:
            raise ValidationError(f"link.{side}", "unknown node", end, list(net.spec.nodes)[:8])
    nodes: dict[str, NodeSpec] = {}
    for end, port in ((link.a, link.a_port), (link.b, link.b_port)):
        node = net.nodes.get(end)
        ports = list(node.intfs) if node is not None else []
        # The node's own ip/mac go to its lowest port only: keep them in the check
        # only if this link's end becomes that port.
        default = port is not None and all(port < p for p in ports)
        spec = net.spec.nodes[end]
        nodes[end] = spec if default else replace(spec, ip=None, mac=None)
        if port is not None and port in ports:
            raise ValidationError(
                f"link {link.a}-{link.b}", f"port {port} of {end} is in use", port
            )
    taken = set(net.hw_pairs.values())
    free = [p for p in net.spec.hardware_pairs if (p[0], p[1]) not in taken]
    validate(TopologySpec(nodes=nodes, links=[link], ip_base=net.spec.ip_base, hardware_pairs=free))
    spaces = [
        (_names(net, _space(net, end)), name)
        for end, name in ((link.a, link.a_intf), (link.b, link.b_intf))
    ]
    for used, name in spaces:
        if name is not None and name in used:
            raise ValidationError(
                f"link {link.a}-{link.b}", f"interface name {name!r} is already used", name
            )
    net.check_link_params([link])  # the backend can do what the link asks
    net.spec.add_link(link)
    for used, name in spaces:
        if name is not None:
            used.add(name)


# -- warnings ---------------------------------------------------------------------------


def warn_once(key: str, message: str) -> None:
    """Log ``message`` as a warning the first time ``key`` is seen in this process."""
    if key in _warned:
        return
    _warned.add(key)
    log.warning("%s", message)


def warn_unknown(where: str, names: Iterable[str], why: str = "") -> None:
    """One warning naming parameters that nothing uses."""
    unknown = sorted(set(names))
    if not unknown:
        return
    what = "parameter" if len(unknown) == 1 else "parameters"
    log.warning(
        "%s: unknown %s %s ignored%s",
        where,
        what,
        ", ".join(unknown),
        f" ({why})" if why else " (Mininet ignores them silently)",
    )


def _named(fn: Any) -> set[str]:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return set()
    return {
        p.name
        for p in sig.parameters.values()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    }


_accepted: dict[tuple[Any, tuple[str, ...]], frozenset[str]] = {}


def accepted_params(cls: Any, methods: tuple[str, ...] = ("__init__", "config")) -> frozenset[str]:
    """Names a class's ``__init__``/``config`` methods take, over its whole MRO
    (user subclasses included), so parameters they consume are not called unknown."""
    cls = getattr(cls, "fn_cls", cls)  # a custom() constructor
    key = (cls, methods)
    if key in _accepted:
        return _accepted[key]
    names: set[str] = set()
    for klass in getattr(cls, "__mro__", (cls,)):
        for method in methods:
            fn = klass.__dict__.get(method)
            if fn is not None:
                names |= _named(fn)
        names |= set(klass.__dict__.get("fn_extra_params", ()))
    names.discard("self")
    _accepted[key] = frozenset(names)
    return _accepted[key]
