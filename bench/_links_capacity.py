"""Link fidelity benchmark, ``capacity``: the highest zero-loss rate of 64-byte
frames (``bench/links.py`` runs it)."""

from __future__ import annotations

import itertools
import json
import math
from typing import Any

from _linkslib import (
    MBIT,
    Ctx,
    Pair,
    finish,
    iperf_json,
    iperf_server,
    pairs_spec,
    print_table,
    proc_cpu_s,
    start,
)

from fidelnet import Network
from fidelnet.nodes.node import Node
from fidelnet.topology import LinkParams, LinkSpec, NodeSpec, TopologySpec

# -- capacity -------------------------------------------------------------------------

SMALL_PAYLOAD = 18  # bytes of UDP payload: 60-byte frames, 64 with the FCS
SMALL_FRAME = 60  # bytes as the engine counts them (no FCS)
SOCKET_BUFFER = "8M"  # iperf3 -w: both ends' socket buffers, so a receiver's burst is not lost


def chain_links(spec: TopologySpec, n: int) -> None:
    """Hosts x1 (10.0.99.1) and x2 (10.0.99.2) joined through n-1 switches by n engine
    links."""
    spec.add_node(NodeSpec("x1", ip="10.0.99.1/24"))
    spec.add_node(NodeSpec("x2", ip="10.0.99.2/24"))
    hops = ["x1"] + [f"w{k}" for k in range(1, n)] + ["x2"]
    for name in hops[1:-1]:
        spec.add_node(NodeSpec(name, kind="switch"))
    for u, v in itertools.pairwise(hops):
        link = LinkSpec(u, v)
        link.backend = "engine"
        spec.add_link(link)


def counters(net: Network, src: Node, dst: Node) -> dict[str, int]:
    """Where packets can be lost on the way: the sender's interface queue (a TAP's
    queue fills when linkd reads too slowly), the engine (queue drops, failed TAP
    writes), the receiver's interface and its UDP socket buffers."""
    out: dict[str, int] = {}
    for node, key, direction in (
        (src, "sender_tx_dropped", "tx"),
        (dst, "receiver_rx_dropped", "rx"),
    ):
        intf = node.default_intf()
        assert intf is not None
        text, _, _ = node.pexec(["ip", "-j", "-s", "link", "show", "dev", intf.name])
        link = json.loads(text)[0]
        out[key] = int(link["stats64"][direction]["dropped"])
    text, _, _ = dst.pexec(["cat", "/proc/net/snmp"])
    udp = [line.split() for line in text.splitlines() if line.startswith("Udp:")]
    if len(udp) >= 2:
        out["receiver_udp_rcvbuf_errors"] = int(
            dict(zip(udp[0], udp[1], strict=False))["RcvbufErrors"]
        )
    queue = writes = 0
    if net.engine is not None:
        for dirs in net.engine.stats().values():
            for d in ("ab", "ba"):
                if isinstance(dirs.get(d), dict):
                    queue += dirs[d]["drops"]["queue"]
                    writes += dirs[d].get("write_errors", 0)
    out["engine_queue_drops"] = queue
    out["engine_write_errors"] = writes
    return out


def small_trial(
    net: Network, src: Node, dst: Node, ip: str, pps: float | None, seconds: int
) -> dict[str, Any]:
    """One iperf3 run of 18-byte UDP payloads at ``pps`` (None: as fast as it goes)."""
    server = iperf_server(dst)
    bps = "0" if pps is None else str(int(pps * SMALL_PAYLOAD * 8))
    linkd = net.engine.pid if net.engine is not None else None
    before = counters(net, src, dst)
    cpu0 = proc_cpu_s(linkd)
    argv = ["iperf3", "-c", ip, "-u", "-l", str(SMALL_PAYLOAD), "-b", bps, "-t", str(seconds), "-J"]
    client = start(src, [*argv, "-w", SOCKET_BUFFER])
    out, err = finish(client, seconds + 30)
    cpu1 = proc_cpu_s(linkd)
    finish(server, 5)
    after = counters(net, src, dst)
    j = iperf_json(out, err, "capacity")
    rx = j["end"]["sum_received"]
    sent = j["end"]["sum_sent"]
    secs = sent["seconds"] or math.nan
    return {
        "offered_pps": pps,
        "sent_packets": sent["packets"],
        "lost": rx["lost_packets"],
        "seconds": sent["seconds"],
        "achieved_pps": sent["packets"] / secs,
        "generator_cpu_percent": j["end"]["cpu_utilization_percent"]["host_total"],
        "receiver_cpu_percent": j["end"]["cpu_utilization_percent"]["remote_total"],
        # linkd's CPU time over the seconds iperf3 sent (it idles before and after)
        "linkd_cpu_percent": 100 * (cpu1 - cpu0) / secs if linkd else None,
        "lost_at": {k: after[k] - before[k] for k in after if after[k] != before[k]},
    }


def search(net: Network, src: Node, dst: Node, ip: str, steps: int, label: str) -> dict[str, Any]:
    """The highest rate with no loss in a 1 s trial: first as fast as the generator
    goes (if nothing is lost there, the generator is the limit), then a binary search
    on the offered rate between 0 and that."""
    trials = [small_trial(net, src, dst, ip, None, 1)]
    ceiling = trials[0]["achieved_pps"]
    print(f"#   unlimited: {ceiling:.0f} pps sent, {trials[0]['lost']} lost", flush=True)
    best: dict[str, Any] | None = trials[0] if trials[0]["lost"] == 0 else None
    first_lossy: dict[str, Any] | None = trials[0] if best is None else None
    if best is None:
        lo, hi = 0.0, ceiling
        for _ in range(steps):
            mid = (lo + hi) / 2
            t = small_trial(net, src, dst, ip, mid, 1)
            trials.append(t)
            print(
                f"#   {mid:.0f} pps offered: {t['achieved_pps']:.0f} sent, {t['lost']} lost"
                + (
                    f" ({', '.join(f'{k} {v}' for k, v in t['lost_at'].items())})"
                    if t["lost"]
                    else ""
                ),
                flush=True,
            )
            if t["lost"] == 0:
                lo = mid
                if best is None or t["achieved_pps"] > best["achieved_pps"]:
                    best = t
            else:
                hi = mid
                first_lossy = t
    return {
        "label": label,
        "generator_ceiling_pps": ceiling,
        "zero_loss_pps": best["achieved_pps"] if best else 0.0,
        "generator_limited": best is trials[0],
        "best": best,
        "lowest_lossy": first_lossy,
        "trials": trials,
    }


def target_capacity(ctx: Ctx) -> dict[str, Any]:
    steps = 5 if ctx.args.quick else 7
    pairs = [
        Pair("veth", "veth", LinkParams(), LinkParams()),
        Pair("engine", "engine", LinkParams(), LinkParams()),
    ]
    spec = pairs_spec(pairs, ctx.args.seed)
    chain_links(spec, 6)
    results = []
    with Network(spec) as net:
        for label, src, dst, ip in (
            ("veth pair (reference)", "a1", "b1", "10.0.1.2"),
            ("one engine link", "a2", "b2", "10.0.2.2"),
            ("six engine links, 5 switches", "x1", "x2", "10.0.99.2"),
        ):
            print(f"# capacity: {label}", flush=True)
            results.append(search(net, net[src], net[dst], ip, steps, label))
    veth = results[0]
    rows = []
    for r in results:
        b = r["best"] or {}
        ratio = r["zero_loss_pps"] / veth["zero_loss_pps"] if veth["zero_loss_pps"] else math.nan
        linkd = b.get("linkd_cpu_percent")
        lossy = r["lowest_lossy"] or {}
        where = ", ".join(f"{k} {v}" for k, v in lossy.get("lost_at", {}).items())
        rows.append(
            [
                r["label"],
                f"{r['zero_loss_pps'] / 1e3:.1f} kpps"
                + (" (generator-limited)" if r["generator_limited"] else ""),
                f"{r['zero_loss_pps'] * SMALL_FRAME * 8 / MBIT:.1f}",
                f"{r['generator_ceiling_pps'] / 1e3:.1f} kpps",
                "(reference)" if r is veth else f"{ratio:.2f}",
                f"gen {b.get('generator_cpu_percent', math.nan):.0f}% recv "
                f"{b.get('receiver_cpu_percent', math.nan):.0f}%"
                + (f" linkd {linkd:.0f}%" if linkd is not None and r is not veth else ""),
                (
                    f"{lossy['achieved_pps'] / 1e3:.1f} kpps: {lossy['lost']} lost"
                    + (f" ({where})" if where else "")
                )
                if lossy
                else "-",
            ]
        )
    print_table(
        "CAPACITY: highest zero-loss rate of 64-byte frames (18-byte UDP payload, iperf3 -w "
        f"{SOCKET_BUFFER}, 1 s trials, binary search on the offered rate); rough until "
        "fidelnet's own packet generator exists",
        [
            "path",
            "zero-loss rate",
            "Mb/s (60 B)",
            "generator, unlimited",
            "ratio to veth",
            "CPU at that rate",
            "lowest lossy trial: where lost",
        ],
        rows,
    )
    return {"runs": results, "steps": steps}
