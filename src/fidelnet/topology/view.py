"""A topology as a picture's source: text, Graphviz ``dot`` or Mermaid.

``fidelnet show FILE --format text|dot|mermaid``. Nodes are drawn by kind (host a
box, router an ellipse, switch a diamond) and backend (a VM's box is 3-D, a
container's rounded and dashed, with its image); links by backend (engine bold, tc
plain, hardware dashed, ``auto`` dotted: chosen at build) and labelled with what
was asked of them: rate, delay and jitter, loss, queue. A direction with parameters
of its own gets both labels (a to b, then b to a).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

from fidelnet.topology.spec import LinkParams, LinkSpec, NodeSpec, TopologySpec

__all__ = ["FORMATS", "link_label", "node_label", "render"]

FORMATS = ("text", "dot", "mermaid")


def _rate(bps: float) -> str:
    for unit, scale in (("Gbit", 1e9), ("Mbit", 1e6), ("kbit", 1e3)):
        if bps >= scale:
            return f"{bps / scale:g}{unit}"
    return f"{bps:g}bit"


def _time(s: float) -> str:
    if s >= 1:
        return f"{s:g}s"
    if s >= 1e-3:
        return f"{s * 1e3:g}ms"
    return f"{s * 1e6:g}us"


def params_label(p: LinkParams) -> str:
    """What was asked of one direction, shortest first: ``10Mbit 5ms±1ms 1% q100``."""
    parts = []
    if p.bw is not None:
        parts.append(_rate(p.bw))
    if p.delay is not None:
        parts.append(_time(p.delay) + (f"±{_time(p.jitter)}" if p.jitter else ""))
    elif p.jitter:
        parts.append(f"±{_time(p.jitter)}")
    if p.loss:
        parts.append(f"{p.loss:g}%")
    if p.loss_model is not None:
        parts.append("GE loss")
    if p.max_queue_size is not None:
        parts.append(f"q{p.max_queue_size}")
    if p.queue_bytes is not None:
        parts.append(f"q{p.queue_bytes}B")
    if p.trace:
        parts.append("trace")
    return " ".join(parts)


def _directions(link: LinkSpec) -> tuple[LinkParams, LinkParams]:
    ab = link.params.merged(link.params_ab) if link.params_ab else link.params
    ba = link.params.merged(link.params_ba) if link.params_ba else link.params
    return ab, ba


def link_label(link: LinkSpec, spec: TopologySpec) -> str:
    """Its backend and parameters: ``engine 10Mbit 5ms``; ``a>b ... / b>a ...``."""
    backend = link.backend or spec.link_backend
    ab, ba = _directions(link)
    la, lb = params_label(ab), params_label(ba)
    text = la if la == lb else f"{link.a}>{link.b} {la or '-'} / {link.b}>{link.a} {lb or '-'}"
    return f"{backend} {text}".strip()


def node_label(node: NodeSpec) -> str:
    """Name, address, and how it is made when that is not a namespace."""
    lines = [node.name]
    if node.ip:
        lines.append(node.ip)
    if node.backend == "qemu":
        lines.append("VM")
    elif node.backend == "container" and node.container is not None:
        lines.append(_short_image(node.container.image))
    if node.kind == "switch" and node.datapath:
        lines.append(node.datapath)
    return "\n".join(lines)


def _short_image(ref: str) -> str:
    ref = re.sub(r"^(oci-archive|docker-archive|oci):", "", ref)
    return ref.rsplit("/", 1)[-1][:32]


def _style(link: LinkSpec, spec: TopologySpec) -> str:
    return {"engine": "bold", "tc": "solid", "hw": "dashed"}.get(
        link.backend or spec.link_backend, "dotted"
    )


def _q(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _dot(spec: TopologySpec) -> Iterator[str]:
    yield "graph topology {"
    yield '  graph [rankdir=LR, fontname="Helvetica"];'
    yield '  node [fontname="Helvetica", fontsize=10];'
    yield '  edge [fontname="Helvetica", fontsize=9];'
    for node in spec.nodes.values():
        shape = {"host": "box", "router": "ellipse", "switch": "diamond"}[node.kind]
        attrs = [f"label={_q(node_label(node))}", f"shape={shape}"]
        if node.backend == "qemu":
            attrs[1] = "shape=box3d"
        elif node.backend == "container":
            attrs.append('style="rounded,dashed"')
        yield f"  {_q(node.name)} [{', '.join(attrs)}];"
    for link in spec.links:
        attrs = [f"label={_q(link_label(link, spec))}", f"style={_style(link, spec)}"]
        if link.a_ip:
            attrs.append(f"taillabel={_q(link.a_ip)}")
        if link.b_ip:
            attrs.append(f"headlabel={_q(link.b_ip)}")
        yield f"  {_q(link.a)} -- {_q(link.b)} [{', '.join(attrs)}];"
    yield "}"


def _mermaid_id(name: str) -> str:
    return "n_" + re.sub(r"[^A-Za-z0-9_]", "_", name)


def _mermaid(spec: TopologySpec) -> Iterator[str]:
    yield "graph LR"
    for node in spec.nodes.values():
        text = node_label(node).replace("\n", "<br/>").replace('"', "'")
        nid = _mermaid_id(node.name)
        if node.kind == "switch":
            yield f'  {nid}{{"{text}"}}'
        elif node.kind == "router":
            yield f'  {nid}(["{text}"])'
        elif node.backend == "container":
            yield f'  {nid}("{text}")'
        elif node.backend == "qemu":
            yield f'  {nid}[["{text}"]]'
        else:
            yield f'  {nid}["{text}"]'
    for link in spec.links:
        arrow = {"bold": "===", "dashed": "-.-", "dotted": "-.-"}.get(_style(link, spec), "---")
        label = link_label(link, spec).replace('"', "'")
        yield f'  {_mermaid_id(link.a)} {arrow}|"{label}"| {_mermaid_id(link.b)}'


def _text(spec: TopologySpec) -> Iterator[str]:
    yield f"{len(spec.nodes)} nodes, {len(spec.links)} links"
    for node in spec.nodes.values():
        how = node.backend if node.kind != "switch" else (node.datapath or spec.datapath)
        extra = ""
        if node.backend == "container" and node.container is not None:
            extra = f" image {node.container.image}"
        yield f"  {node.kind:6} {node.name:12} {how:9} {node.ip or ''}{extra}".rstrip()
    for link in spec.links:
        a = f"{link.a} ({link.a_ip})" if link.a_ip else link.a
        b = f"{link.b} ({link.b_ip})" if link.b_ip else link.b
        yield f"  {a} -- {b}: {link_label(link, spec)}"


def render(spec: TopologySpec, fmt: str = "text") -> str:
    """The topology in ``fmt`` (:data:`FORMATS`)."""
    lines = {"text": _text, "dot": _dot, "mermaid": _mermaid}[fmt](spec)
    return "\n".join(lines) + "\n"
