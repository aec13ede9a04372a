#!/usr/bin/env python3
"""A cut link against a local engine link, on this machine (issue 36's targets:
delay error after compensation p50 <= 50 us and p99.9 <= 500 us beyond the wire's
own jitter; a cut link carries >= 80 % of a local engine link's packet rate).

Three runs of the same two hosts h1 and h2, one link between them configured at
``--delay`` (5 ms):

- ``local``: an engine link, as one machine builds it;
- ``cut``: the link cut in two halves (fidelnet.links.cut) whose sockets live in
  two "machine" namespaces w1 and w2, joined by a wire (an engine link of the same
  run) that takes ``--wire-delay`` with ``--wire-jitter``;
- each measured with a 1 kpps UDP flow for ``--seconds`` (one-way latency minus
  the configured delay: the error, p50 and p99.9) and a zero-loss search of 64-byte
  packets (NDR, pps), then the ratio cut / local.

The time to a pingable network (the build, then the first ping that crosses) is
printed for both. A benchmark, not a test: it asserts nothing. As root:

    .venv/bin/python bench/cluster.py [--delay 5ms] [--wire-delay 1ms] [--wire-jitter 200us]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms"


def main(argv: list[str] | None = None) -> int:
    from fidelnet import Network
    from fidelnet.links.cut import CutWire, add_cut_end
    from fidelnet.measure.packets import udp, zero_loss_rate
    from fidelnet.topology import LinkParams, LinkSpec, NodeSpec, TopologySpec
    from fidelnet.topology.units import parse_duration

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--delay", default="5ms")
    ap.add_argument("--wire-delay", default="1ms")
    ap.add_argument("--wire-jitter", default="200us")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--high-pps", type=float, default=300_000.0)
    args = ap.parse_args(argv)
    delay = parse_duration("--delay", args.delay)
    wire_delay = parse_duration("--wire-delay", args.wire_delay)
    jitter = parse_duration("--wire-jitter", args.wire_jitter)

    def spec(cut: bool) -> TopologySpec:
        t = TopologySpec()
        t.ipv6 = False
        t.add_node(NodeSpec("h1", ip="10.9.0.1/24"))
        t.add_node(NodeSpec("h2", ip="10.9.0.2/24"))
        if cut:
            t.add_node(NodeSpec("w1", ip="10.77.0.1/24"))
            t.add_node(NodeSpec("w2", ip="10.77.0.2/24"))
            wire = LinkParams(delay=wire_delay, jitter=jitter or None)
            t.add_link(LinkSpec("w1", "w2", params=wire, backend="engine"))
        else:
            t.add_link(LinkSpec("h1", "h2", params=LinkParams(delay=delay), backend="engine"))
        return t

    rows = {}
    for kind in ("local", "cut"):
        t0 = time.monotonic()
        with Network(spec(kind == "cut")) as net:
            if kind == "cut":
                p = LinkParams(delay=delay)
                a, b = "10.77.0.1:47000", "10.77.0.2:47001"
                w1, w2 = net["w1"].netns, net["w2"].netns
                add_cut_end(net, "h1", "h1-eth0", p, p, CutWire(a, b, netns=w1), ip="10.9.0.1/24")
                add_cut_end(net, "h2", "h2-eth0", p, p, CutWire(b, a, netns=w2), ip="10.9.0.2/24")
            ping = ["ping", "-c", "1", "-W", "1", "10.9.0.2"]
            for _ in range(50):
                if net["h1"].popen(ping, stdout=subprocess.DEVNULL).wait() == 0:
                    break
            pingable = time.monotonic() - t0
            r = udp(net, "h1", "h2", 1_000, duration=args.seconds)
            z = zero_loss_rate(net, "h1", "h2", high_pps=args.high_pps, trial_s=1.0)
        err50 = r.latency.p50_ns - delay * 1e9
        err999 = r.latency.p999_ns - delay * 1e9
        verdict = r.verdict.summary(2) if r.verdict else "none"
        rows[kind] = (pingable, err50, err999, z.ndr_pps, verdict)
        print(
            f"{kind:5}: pingable after {pingable:.2f} s; one-way error p50 {_ms(err50)}, "
            f"p99.9 {_ms(err999)} ({r.received}/{r.sent} received; verdict {verdict}); "
            f"NDR {z.ndr_pps:,.0f} pps",
            flush=True,
        )
    lo, cu = rows["local"], rows["cut"]
    print(
        f"\ncut / local: NDR {cu[3] / max(lo[3], 1):.2f} (target >= 0.80); "
        f"time to pingable {cu[0] / max(lo[0], 1e-9):.2f}x"
    )
    print(
        f"cut link delay error: p50 {_ms(cu[1])} (target <= 0.050 ms), "
        f"p99.9 {_ms(cu[2])} (target <= 0.500 ms beyond the wire's jitter of "
        f"{jitter * 1e3:g} ms)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
