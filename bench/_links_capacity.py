"""Link fidelity benchmark, ``capacity``: the highest zero-loss rate of 64-byte
frames (``bench/links.py`` runs it)."""

from __future__ import annotations

import itertools
import math
import time
from typing import Any

from _linkslib import (
    MBIT,
    Ctx,
    Pair,
    pairs_spec,
    print_table,
    proc_cpu_s,
)

from fidelnet import Network
from fidelnet.measure.packets import zero_loss_rate
from fidelnet.topology import LinkParams, LinkSpec, NodeSpec, TopologySpec

# -- capacity -------------------------------------------------------------------------

SMALL_FRAME = 60  # bytes as the engine counts them (no FCS)

CHAIN = 6  # engine links in the chain, as in the "six engine links" figure
CHAIN_BEFORE_KPPS = 46.0  # the chain's zero-loss rate before AF_XDP (issue 18)


def chain_spec(spec: TopologySpec, n: int, tag: int, endpoint: str) -> tuple[str, str, str]:
    """Hosts joined through n-1 switches by n engine links with ``endpoint``; (source,
    sink, sink address)."""
    src, dst = f"x{tag}", f"y{tag}"
    spec.add_node(NodeSpec(src, ip=f"10.0.{tag}.1/24"))
    spec.add_node(NodeSpec(dst, ip=f"10.0.{tag}.2/24"))
    hops = [src] + [f"w{tag}s{k}" for k in range(1, n)] + [dst]
    for name in hops[1:-1]:
        spec.add_node(NodeSpec(name, kind="switch"))
    for u, v in itertools.pairwise(hops):
        link = LinkSpec(u, v)
        link.backend = "engine"
        link.endpoint = endpoint  # type: ignore[assignment]
        spec.add_link(link)
    return src, dst, f"10.0.{tag}.2"


def target_capacity(ctx: Ctx) -> dict[str, Any]:
    """The zero-loss rate of 64-byte frames (RFC 2544 NDR, fidelnet's pktgen in gso
    mode so that the generator is not the limit) through a veth pair, one engine link
    of each endpoint kind, and a chain of six of each."""
    trials = 9 if ctx.args.quick else 14
    high = 1_500_000.0
    pairs = [
        Pair("veth pair (reference)", "veth", LinkParams(), LinkParams()),
        Pair("one engine link, tap", "engine", LinkParams(), LinkParams(), "tap"),
        Pair("one engine link, af_xdp", "engine", LinkParams(), LinkParams(), "af_xdp"),
    ]
    spec = pairs_spec(pairs, ctx.args.seed)
    paths = [(p.label, f"a{i}", f"b{i}", f"10.0.{i}.2", high) for i, p in enumerate(pairs, 1)]
    for tag, kind in ((90, "tap"), (91, "af_xdp")):
        src, dst, ip = chain_spec(spec, CHAIN, tag, kind)
        # a lower ceiling: the search's resolution is 1 % of it
        paths.append((f"{CHAIN} engine links, {kind}", src, dst, ip, high / 4))
    results = []
    with Network(spec) as net:
        for label, src, dst, ip, ceiling in paths:
            print(f"# capacity: {label}", flush=True)
            linkd = net.engine.pid if net.engine is not None else None
            cpu0, t0 = proc_cpu_s(linkd), time.monotonic()
            r = zero_loss_rate(
                net,
                src,
                dst,
                dst_addr=ip,
                mode="gso",
                high_pps=ceiling,
                max_trials=trials,
                monitor=False,
            )
            cpu1, t1 = proc_cpu_s(linkd), time.monotonic()
            print(f"#   NDR {r.ndr_pps:.0f} pps, PDR {r.pdr_pps:.0f} pps", flush=True)
            results.append(
                {
                    "label": label,
                    "ndr_pps": r.ndr_pps,
                    "pdr_pps": r.pdr_pps,
                    "generator_max_pps": r.generator_max_pps,
                    "linkd_cpu_percent_of_search": (
                        100 * (cpu1 - cpu0) / (t1 - t0) if linkd and cpu0 is not None else None
                    ),
                    "trials": len(r.trials),
                }
            )
    veth = results[0]["ndr_pps"]
    rows = []
    for r in results:
        ratio = r["ndr_pps"] / veth if veth else math.nan
        goal = ""
        if r["label"].startswith(f"{CHAIN} "):
            x = r["ndr_pps"] / 1e3 / CHAIN_BEFORE_KPPS
            goal = f"{x:.1f}x the {CHAIN_BEFORE_KPPS:g} kpps before (goal 6x)"
        elif "engine" in r["label"]:
            goal = f"{r['ndr_pps'] / 1e6:.2f} Mpps on a shared core (goal 1 Mpps per engine core)"
        gen = r["generator_max_pps"]
        rows.append(
            [
                r["label"],
                f"{r['ndr_pps'] / 1e3:.1f} kpps",
                f"{r['pdr_pps'] / 1e3:.1f} kpps",
                f"{r['ndr_pps'] * SMALL_FRAME * 8 / MBIT:.1f}",
                "-" if gen is None else f"{gen / 1e3:.0f} kpps",
                "(reference)" if r is results[0] else f"{ratio:.2f}",
                goal,
            ]
        )
    print_table(
        "CAPACITY: zero-loss rate (NDR) of 64-byte frames, fidelnet-pktgen --mode gso, "
        f"binary search up to {high / 1e6:g} Mpps, 1 s trials; the generator, the receiver "
        "and linkd share the machine's cores",
        ["path", "NDR", "PDR (0.5 %)", "Mb/s (60 B)", "generator max", "ratio to veth", "target"],
        rows,
    )
    return {"runs": results, "max_trials": trials}
