"""Link fidelity benchmark, ``tcp``: bulk TCP through one link, unshaped and shaped,
against a bare veth pair and htb measured in the same run (``bench/links.py`` runs
it)."""

from __future__ import annotations

from typing import Any

from _linkslib import (
    Ctx,
    Pair,
    finish,
    iperf_json,
    iperf_server,
    own_stats,
    pairs_spec,
    print_table,
    start,
    verdict,
)

from fidelnet import Network
from fidelnet.topology import LinkParams

TCP_UNSHAPED_GOAL = 0.90  # of a bare veth pair's throughput
TCP_SHAPED_GOAL = 1.0  # percent: delivered vs what the machine carries at that rate
SHAPED = (1e9, 10e9)


def _run(net: Network, i: int, seconds: int, label: str) -> dict[str, Any]:
    a, b = net[f"a{i}"], net[f"b{i}"]
    server = iperf_server(b)
    client = start(a, ["iperf3", "-c", f"10.0.{i}.2", "-t", str(seconds), "-J"])
    out, err = finish(client, seconds + 30)
    finish(server, 5)
    j = iperf_json(out, err, f"tcp {label}")
    link = net.links[i - 1]
    stats = own_stats(link.stats()) if link.backend == "engine" else {}
    return {
        "label": label,
        "backend": link.backend,
        "received_bps": j["end"]["sum_received"]["bits_per_second"],
        "retransmits": j["end"]["sum_sent"].get("retransmits"),
        "offload": stats.get("ab", {}).get("offload"),
        "link_stats": stats,
    }


def target_tcp(ctx: Ctx) -> dict[str, Any]:
    seconds = 3 if ctx.args.quick else 8
    pairs = [
        Pair("veth (reference)", "veth", LinkParams(), LinkParams()),
        Pair("engine, unshaped", "engine", LinkParams(), LinkParams()),
        Pair("engine, 10 ms each way", "engine", LinkParams(delay=0.010), LinkParams(delay=0.010)),
    ]
    for rate in SHAPED:
        for backend in ("tc", "engine"):
            label = f"{backend}, {rate / 1e9:g} Gbit/s"
            pairs.append(Pair(label, backend, LinkParams(bw=rate), LinkParams()))
    runs: list[dict[str, Any]] = []
    with Network(pairs_spec(pairs, ctx.args.seed)) as net:
        for i, p in enumerate(pairs, 1):
            print(f"# tcp: {p.label}", flush=True)
            runs.append(_run(net, i, seconds, p.label))
    # The same unshaped link without segmentation offloads, for the gain they bring.
    off = [Pair("engine, unshaped, --offload off", "engine", LinkParams(), LinkParams())]
    with Network(pairs_spec(off, ctx.args.seed), engine_args=["--offload", "off"]) as net:
        print(f"# tcp: {off[0].label}", flush=True)
        runs.append(_run(net, 1, seconds, off[0].label))
    veth = runs[0]["received_bps"]
    rows = []
    for r in runs:
        got = r["received_bps"]
        ok: bool | None = None
        goal = "(reference)"
        ref = ""
        if r["label"].startswith("engine, unshaped"):
            ok = got >= TCP_UNSHAPED_GOAL * veth
            goal = f">= {TCP_UNSHAPED_GOAL:.0%} of veth"
            ref = f"veth {veth / 1e9:.2f} Gbit/s: {got / veth:.0%}"
        elif "Gbit/s" in r["label"] and r["backend"] == "engine":
            rate = float(r["label"].split(", ")[1].split()[0]) * 1e9
            tc = next(
                x for x in runs if x["backend"] == "tc" and x["label"].endswith(r["label"][8:])
            )
            # What this machine carries through a link shaped at that rate: the
            # kernel's own shaper (htb) measured in the same run. TCP goodput is
            # below the configured L2 rate by its headers in both.
            carries = max(tc["received_bps"], 1.0)
            dev = (got - carries) / carries * 100
            ok = dev >= -TCP_SHAPED_GOAL and got <= rate
            goal = f"at most {TCP_SHAPED_GOAL:g} % below htb, never above the rate"
            ref = f"htb {carries / 1e9:.2f} Gbit/s; engine {dev:+.1f} %"
        r["ok"] = ok
        counts = r["offload"] or {}
        rows.append(
            [
                r["label"],
                f"{got / 1e9:.2f}",
                str(r["retransmits"]),
                (
                    f"{counts.get('whole', 0)} whole, {counts.get('split', 0)} cut"
                    f" ({counts.get('chunks', 0)} chunks)"
                    if counts
                    else "-"
                ),
                goal,
                verdict(ok),
                ref,
            ]
        )
    print_table(
        f"TCP: iperf3 -t {seconds}, one flow, received rate (Gbit/s); the shaped rows' "
        "goal is what htb (the kernel's shaper) carries at the same rate in the same run",
        ["link", "Gbit/s", "retransmits", "super-frames", "goal", "pass", "reference"],
        rows,
    )
    return {"runs": runs, "seconds": seconds}
