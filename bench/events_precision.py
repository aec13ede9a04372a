"""How precisely events happen and how precisely their outages are told from the
packets, run after run (issue 15's targets: event timing error p99 <= 1 ms, the
outage to one packet interval): a 10 kpps pktgen flow h1 -> s1 -> h2, with a 2 s
flap at 1 s of the engine link s1-h2 (told to the engine ahead: it cuts and restores
the path at the planned instants itself) or, every other run with ``--veth``, of the
veth link h1-s1 (cut and restored by the timeline thread at the instants). Prints,
per run, the truth (the instants the path was cut and whole again), the outage told
from the packets and the difference, then the distributions: |packets - truth|,
|outage - 2 s| and how late the timeline started each event. A benchmark, not a
test: it asserts nothing.

    .venv/bin/python bench/events_precision.py --runs 30 --veth
"""

from __future__ import annotations

import argparse
import statistics
import sys

RATE = 10_000


def _dist(name: str, values: list[float]) -> str:
    if not values:
        return f"{name}: no values"
    vs = sorted(abs(v) for v in values)
    p99 = vs[min(len(vs) - 1, round(0.99 * (len(vs) - 1)))]
    return (
        f"{name}: median {statistics.median(vs) * 1e6:.1f} us, p99 {p99 * 1e6:.1f} us,"
        f" max {vs[-1] * 1e6:.1f} us (n={len(vs)})"
    )


def main(argv: list[str] | None = None) -> int:
    from fidelnet import Network
    from fidelnet.events import Event
    from fidelnet.measure.packets import udp
    from fidelnet.topology import LinkSpec, NodeSpec, TopologySpec

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--veth", action="store_true", help="every other run flaps h1-s1 (veth)")
    args = ap.parse_args(argv)
    t = TopologySpec()
    t.ipv6 = False
    t.add_node(NodeSpec("s1", kind="switch"))
    t.add_node(NodeSpec("h1"))
    t.add_node(NodeSpec("h2"))
    t.add_link(LinkSpec("h1", "s1"))
    t.add_link(LinkSpec("s1", "h2", backend="engine"))
    diffs: dict[str, list[float]] = {"engine": [], "veth": []}
    outages: dict[str, list[float]] = {"engine": [], "veth": []}
    late: dict[str, list[float]] = {"engine": [], "veth": []}
    with Network(t) as net:
        for i in range(args.runs):
            kind = "veth" if args.veth and i % 2 else "engine"
            link = ("h1", "s1") if kind == "veth" else ("s1", "h2")
            flap = Event(at=1.0, action="flap", link=link, duration=2.0, name="cut")
            res = udp(net, "h1", "h2", RATE, duration=4.0, events=[flap], monitor=False)
            down, up = res.events
            late[kind] += [down.late_s, up.late_s]
            if down.effective_s is None or up.effective_s is None or down.outage_s is None:
                print(f"run {i + 1} ({kind}): no outage measured ({down.error or up.error})")
                continue
            truth = up.effective_s - down.effective_s
            err = down.outage_s - truth
            diffs[kind].append(err)
            outages[kind].append(down.outage_s - 2.0)
            print(f"run {i + 1} ({kind}{', exact' if down.exact else ''}): truth "
                  f"{truth * 1e3:.3f} ms, packets {down.outage_s * 1e3:.3f} ms, difference "
                  f"{err * 1e6:+.1f} us, lost {down.lost}, late {down.late_s * 1e6:.0f}"
                  f"/{up.late_s * 1e6:.0f} us")  # fmt: skip
    print(f"one packet interval: {1e6 / RATE:.0f} us")
    for kind in ("engine", "veth"):
        if late[kind]:
            print(f"{kind} link flaps:")
            print("  " + _dist("|packets - truth|", diffs[kind]))
            print("  " + _dist("|packets - 2 s|", outages[kind]))
            print("  " + _dist("event start, late", late[kind]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
