"""A Mininet ``Topo`` as a fidelnet TopologySpec, to check it whole before building.

:func:`topo_spec` reproduces what ``Mininet.buildFromTopo`` is about to do — host
addresses numbered in ``topo.hosts()`` order, MACs with ``autoSetMacs``, the
topology's ports and interface names, link addresses and the shaping ``TCLink``
or ``TCIntf`` would apply — on top of whatever the network already holds.
``Mininet.build`` validates the result (and the kernel features its links need)
before a single namespace or interface exists.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fidelnet.compat.link import LINK_KEYS, TCLink, end_params, preset, resolve
from fidelnet.compat.util import ipAdd, macColonHex
from fidelnet.topology.spec import LinkSpec, NodeSpec, TopologySpec

__all__ = ["topo_spec"]


def _cidr(ip: Any) -> Any:
    return f"{ip}/8" if isinstance(ip, str) and ip and "/" not in ip else ip


def _host_spec(mn: Any, name: str, number: int) -> tuple[NodeSpec, bool]:
    params = dict(mn.topo.nodeInfo(name))
    cls = params.pop("cls", None) or mn.host
    params = {**params, **preset(cls)}
    auto = "ip" not in params
    ip = params.get(
        "ip", f"{ipAdd(number, ipBaseNum=mn.ipBaseNum, prefixLen=mn.prefixLen)}/{mn.prefixLen}"
    )
    mac = params.get("mac", macColonHex(number) if mn.autoSetMacs else None)
    target = resolve(cls)
    cpu = params.get("cpu") if getattr(target, "fn_cpu_limited", False) else None
    spec = NodeSpec(
        name,
        kind="host",
        ip=_cidr(ip),
        mac=mac,
        in_namespace=bool(params.get("inNamespace", True)),
        cpu=float(cpu) if isinstance(cpu, (int, float)) and cpu > 0 else None,
    )
    return spec, auto


def _switch_spec(mn: Any, name: str) -> NodeSpec:
    params = dict(mn.topo.nodeInfo(name))
    cls = params.get("cls") or mn.switch
    params = {**params, **preset(cls)}
    return NodeSpec(name, kind="switch", stp=bool(params.get("stp")))


def _link_spec(mn: Any, info: dict[str, Any], auto: set[str], spec: TopologySpec) -> LinkSpec:
    n1, n2 = info["node1"], info["node2"]
    params = {k: v for k, v in info.items() if k not in LINK_KEYS}
    p1 = {**dict(info.get("params1") or {}), **params}
    p2 = {**dict(info.get("params2") or {}), **params}
    cls = info.get("cls") or mn.link
    intf = info.get("intf") or mn.intf
    target = resolve(cls)
    tc = isinstance(target, type) and issubclass(target, TCLink)
    from fidelnet.compat._intf import TCIntf

    cls1 = info.get("cls1") or (TCIntf if tc else intf)
    cls2 = info.get("cls2") or (TCIntf if tc else intf)
    link_params = {**params, **preset(cls)}
    where = f"link {n1}-{n2}"
    link = LinkSpec(
        n1,
        n2,
        a_port=info.get("port1"),
        b_port=info.get("port2"),
        a_intf=info.get("intfName1"),
        b_intf=info.get("intfName2"),
        a_mac=info.get("addr1"),
        b_mac=info.get("addr2"),
        a_ip=p1.get("ip"),
        b_ip=p2.get("ip"),
        params_ab=end_params(cls1, {**p1, **link_params}, f"{where}.params1"),
        params_ba=end_params(cls2, {**p2, **link_params}, f"{where}.params2"),
        backend=getattr(target, "fn_backend", None),
    )
    for a, b in getattr(target, "available_pairs", ()):  # HwPair's pool
        if (str(a), str(b)) not in spec.hardware_pairs:
            spec.hardware_pairs.append((str(a), str(b)))
    # An address given for a host's first interface replaces its automatic one.
    for end, port, ip in ((n1, link.a_port, link.a_ip), (n2, link.b_port, link.b_ip)):
        if ip is None or end not in auto or port is None:
            continue
        used = [lk.a_port if lk.a == end else lk.b_port for lk in spec.links if end in (lk.a, lk.b)]
        if all(p is None or port < p for p in used):
            spec.nodes[end].ip = None
            auto.discard(end)
    return link


def topo_spec(mn: Any) -> TopologySpec:
    """What building ``mn.topo`` into ``mn`` would give, as a spec (ports assigned)."""
    net = mn.fn_net
    spec = TopologySpec(ip_base=mn.ipBase, ipv6=net.spec.ipv6)
    for node in net.spec.nodes.values():
        spec.add_node(replace(node))
    spec.links = [replace(link) for link in net.spec.links]
    spec.hardware_pairs = list(net.spec.hardware_pairs)
    auto: set[str] = set()
    number = mn.nextIP
    for name in mn.topo.hosts():
        node, is_auto = _host_spec(mn, name, number)
        number += 1
        spec.add_node(node)
        if is_auto:
            auto.add(name)
    for name in mn.topo.switches():
        spec.add_node(_switch_spec(mn, name))
    for _src, _dst, _key, info in mn.topo.links(sort=True, withKeys=True, withInfo=True):
        spec.links.append(_link_spec(mn, info, auto, spec))
    return spec
