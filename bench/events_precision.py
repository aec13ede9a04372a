"""How precisely a flap's outage is told from the packets, run after run (issue 15's
claim: to one packet interval): an engine link h1-s1-h2 flapped for 2 s under a
10 kpps pktgen flow, ``--runs`` times. Prints, per run, the engine's own outage (its
instants of cutting and restoring the path), the outage told from the packets and the
difference, then the distribution. A benchmark, not a test: it asserts nothing.

    .venv/bin/python bench/events_precision.py --runs 30
"""

from __future__ import annotations

import argparse
import statistics
import sys

RATE = 10_000


def main(argv: list[str] | None = None) -> int:
    from fidelnet import Network
    from fidelnet.events import Event
    from fidelnet.measure.packets import udp
    from fidelnet.topology import LinkSpec, NodeSpec, TopologySpec

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args(argv)
    t = TopologySpec()
    t.ipv6 = False
    t.add_node(NodeSpec("s1", kind="switch"))
    t.add_node(NodeSpec("h1"))
    t.add_node(NodeSpec("h2"))
    t.add_link(LinkSpec("h1", "s1"))
    t.add_link(LinkSpec("s1", "h2", backend="engine"))
    errors, flaps = [], []
    with Network(t) as net:
        for i in range(args.runs):
            flap = Event(at=1.0, action="flap", link=("s1", "h2"), duration=2.0, name="cut")
            res = udp(net, "h1", "h2", RATE, duration=4.0, events=[flap], monitor=False)
            down, up = res.events
            if down.effective_s is None or up.effective_s is None or down.outage_s is None:
                print(f"run {i + 1}: no outage measured ({down.error or up.error})")
                continue
            truth = up.effective_s - down.effective_s
            err = down.outage_s - truth
            errors.append(abs(err))
            flaps.append(abs(truth - 2.0))
            print(f"run {i + 1}: engine {truth * 1e3:.3f} ms, packets {down.outage_s * 1e3:.3f}"
                  f" ms, difference {err * 1e6:+.1f} us, lost {down.lost}")  # fmt: skip
    if errors:
        q = statistics.quantiles(errors, n=20) if len(errors) > 1 else errors * 19
        print(f"|packets - engine|: median {statistics.median(errors) * 1e6:.1f} us, "
              f"p95 {q[18] * 1e6:.1f} us, max {max(errors) * 1e6:.1f} us "
              f"(one packet interval: {1e6 / RATE:.0f} us); |engine - 2 s|: max "
              f"{max(flaps) * 1e6:.1f} us, over {len(errors)} runs")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
