"""A scenario's forwarding work, for the capacity check (:mod:`fidelnet.fidelity.capacity`).

Paths are the shortest in links between a traffic item's ends (what ``auto_routes``
installs and what a learning switch forwards along without loops). ``pktgen``
traffic asks its rate on its path; ``iperf`` flows ask the rate of their path's
narrowest configured link in full-size segments, plus one ACK for every two
segments the other way, all flows at once; unshaped TCP has no rate to ask (it takes
what the machine gives, and the verdict judges it), nor has ``zero_loss``, whose
search goes past the machine's limit on purpose.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from fidelnet.fidelity.capacity import Demand, Finding, assess
from fidelnet.links.choice import Choice
from fidelnet.scenario import model as m
from fidelnet.topology.spec import TopologySpec

__all__ = ["check", "demands", "path_links"]

_MSS_FRAME_BITS = 1514 * 8


def path_links(spec: TopologySpec, src: str, dst: str) -> list[tuple[int, str]]:
    """The links (index, the end a packet enters from) on a shortest path from
    ``src`` to ``dst``; empty when there is none."""
    adj: dict[str, list[tuple[str, int]]] = {n: [] for n in spec.nodes}
    for i, link in enumerate(spec.links):
        adj.setdefault(link.a, []).append((link.b, i))
        adj.setdefault(link.b, []).append((link.a, i))
    prev: dict[str, tuple[str, int]] = {}
    seen = {src}
    queue = deque([src])
    while queue:
        node = queue.popleft()
        if node == dst:
            break
        for nxt, i in adj.get(node, []):
            if nxt not in seen:
                seen.add(nxt)
                prev[nxt] = (node, i)
                queue.append(nxt)
    if dst not in prev:
        return []
    out = []
    node = dst
    while node != src:
        before, i = prev[node]
        out.append((i, before))
        node = before
    return out[::-1]


def _hops(path: list[tuple[int, str]], choices: Sequence[Choice]) -> dict[str, int]:
    hops: dict[str, int] = {}
    for i, _src in path:
        backend = "engine" if choices[i].backend == "engine" else "tc"
        hops[backend] = hops.get(backend, 0) + 1
    return hops


def demands(
    scenario: m.Scenario, spec: TopologySpec, choices: Sequence[Choice]
) -> tuple[list[Demand], float]:
    """Each measured traffic item's demand, and the CPU share the CPU-limited nodes
    ask in total (of the whole machine)."""
    out: list[Demand] = []
    for item in scenario.traffic:
        if isinstance(item, m.Pktgen):
            path = path_links(spec, item.src, item.dst)
            if path:
                hops = _hops(path, choices)
                bits = item.rate_pps * (item.size - 4) * 8  # what the links carry: no FCS
                out.append(
                    Demand(
                        item.name,
                        item.rate_pps,
                        hops,
                        f"pktgen {item.rate}, {item.src} to {item.dst}",
                        {k: bits for k in hops},
                    )
                )
        elif isinstance(item, m.Iperf):
            flows = list(item.flow_pairs)
            if item.bidirectional:
                flows += [(b, a) for a, b in flows]
            total = 0.0
            work: dict[str, float] = {}
            for a, b in flows:
                path = path_links(spec, a, b)
                rates = [
                    p.bw for i, src in path if (p := spec.links[i].direction(src)).bw is not None
                ]
                if not path or not rates:
                    continue
                pps = 1.5 * min(rates) / _MSS_FRAME_BITS  # and an ACK per two segments back
                total += pps
                for k, v in _hops(path, choices).items():
                    work[k] = work.get(k, 0.0) + pps * v
            if total > 0:
                # Links per packet, averaged over the flows by their rates.
                mean_hops = {k: w / total for k, w in work.items()}
                out.append(Demand(item.name, total, mean_hops, f"iperf, {len(flows)} TCP flows"))
    cpu = sum(n.cpu for n in spec.nodes.values() if n.cpu is not None)
    return out, cpu


def check(scenarios: Sequence[m.Scenario]) -> list[tuple[str, Finding]]:
    """Every scenario's findings against this machine's profile, before anything is
    built (choosing link backends probes the kernel's qdiscs in a scratch namespace,
    nothing else)."""
    from fidelnet.measure.verdicts import current_profile
    from fidelnet.network import Network

    profile = current_profile()
    out: list[tuple[str, Finding]] = []
    for sc in scenarios:
        spec = sc.topology_spec()
        choices = Network(spec).check_link_params(spec.links)
        wants, cpu = demands(sc, spec, choices)
        out += [(sc.name, f) for f in assess(wants, profile, cpu_asked=cpu)]
    return out
