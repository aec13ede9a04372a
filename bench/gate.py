"""Does the regression gate catch a regression, and only a regression?

A benchmark, not a test: it asserts nothing. Each trial measures a baseline (an
engine link with ``--delay``, UDP at ``--rate`` for ``--duration``) and then one run
per step, each compared with that trial's baseline by ``fidelnet.gate.compare`` on
``--metric`` (default p99 and p50):

- ``unchanged``: the same link again (every ``regressed`` here is a false alarm);
- ``+5%``, ``+10%``, ``+30%``: the link's delay that much longer;
- ``jitter``: the same delay with ``--jitter`` of jitter added.

It prints, per step and metric, how often the decision was ``regressed``, ``same``,
``improved`` and ``inconclusive``, the detection rate (regressed among the decided
runs, and among all), and the reasons of the inconclusive ones (the monitor's), and
writes every decision to ``bench/results/gate-<UTC timestamp>.json``::

    sudo .venv/bin/python bench/gate.py                    # 20 trials, about 8 minutes
    sudo .venv/bin/python bench/gate.py --trials 5 --delay 20ms --metric p99:10%

Targets (issue 38): at least 95 % detection at +10 % on p99, at most 5 % false
``regressed`` on unchanged runs, the rest honest ``inconclusive``.

Not measured here: a CPU-limited service whose share is halved (it needs a service
whose latency is its own processing, not the link's).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from fidelnet import Network  # noqa: E402
from fidelnet.gate.compare import Comparison, compare, parse_metric  # noqa: E402
from fidelnet.measure import udp  # noqa: E402
from fidelnet.measure.provenance import collect  # noqa: E402
from fidelnet.measure.results import ResultFile, UdpResult  # noqa: E402
from fidelnet.topology import LinkParams, LinkSpec, NodeSpec, TopologySpec  # noqa: E402
from fidelnet.topology.units import parse_duration  # noqa: E402


def _measure(delay_s: float, jitter_s: float, rate: float, duration: float) -> ResultFile:
    spec = TopologySpec()
    spec.add_node(NodeSpec("h1", ip="10.0.0.1/24"))
    spec.add_node(NodeSpec("h2", ip="10.0.0.2/24"))
    params = LinkParams(delay=delay_s, jitter=jitter_s or None)
    link = LinkSpec("h1", "h2", params_ab=params, params_ba=LinkParams(delay=delay_s))
    link.backend = "engine"
    spec.add_link(link)
    with Network(spec, command="bench/gate.py") as net:
        r: UdpResult = udp(net, "h1", "h2", rate, duration=duration)
        prov = collect(net, command=sys.argv)
    return ResultFile(kind=r.kind, name="gate", provenance=prov, result=r)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--delay", default="20ms", help="the baseline link's one-way delay")
    ap.add_argument("--jitter", default="2ms", help="the jitter step's jitter")
    ap.add_argument("--rate", type=float, default=1000.0, help="packets per second")
    ap.add_argument("--duration", type=float, default=3.0, help="seconds of traffic per run")
    ap.add_argument("--metric", action="append", default=None, help="p99, p50:5%%, ...")
    ap.add_argument("--confidence", type=float, default=0.95)
    opts = ap.parse_args()
    metrics = [parse_metric(m) for m in (opts.metric or ["p99", "p50"])]
    delay = parse_duration("--delay", opts.delay)
    jitter = parse_duration("--jitter", opts.jitter)
    steps: list[tuple[str, float, float]] = [
        ("unchanged", delay, 0.0),
        ("+5%", delay * 1.05, 0.0),
        ("+10%", delay * 1.10, 0.0),
        ("+30%", delay * 1.30, 0.0),
        ("jitter", delay, jitter),
    ]
    records: list[dict[str, Any]] = []
    tally: dict[tuple[str, str], Counter[str]] = {}
    reasons: dict[tuple[str, str], Counter[str]] = {}
    for trial in range(opts.trials):
        base = _measure(delay, 0.0, opts.rate, opts.duration)
        for step, d, j in steps:
            now = _measure(d, j, opts.rate, opts.duration)
            got: list[Comparison] = compare(step, base, now, metrics, opts.confidence)
            for c in got:
                key = (step, c.metric.name)
                tally.setdefault(key, Counter())[c.decision] += 1
                for why in c.reasons:
                    reasons.setdefault(key, Counter())[why.split(":")[0]] += 1
                records.append(
                    {
                        "trial": trial,
                        "step": step,
                        "metric": c.metric.name,
                        "decision": c.decision,
                        "change": [c.change_lo, c.change_hi],
                        "reasons": c.reasons,
                    }
                )
        print(f"trial {trial + 1}/{opts.trials} done", flush=True)
    print(
        f"\n{opts.trials} trials; link {opts.delay}, {opts.rate:g} pps for {opts.duration:g} s;"
        f" each interval {opts.confidence:.0%}"
    )
    print(f"{'step':<10} {'metric':<8} regressed  same  improved  inconclusive  detection")
    for (step, metric), counts in tally.items():
        decided = counts["regressed"] + counts["same"] + counts["improved"]
        rate = f"{counts['regressed'] / decided:.0%}" if decided else "-"
        print(
            f"{step:<10} {metric:<8} {counts['regressed']:>9} {counts['same']:>5} "
            f"{counts['improved']:>9} {counts['inconclusive']:>13}  {rate} of decided, "
            f"{counts['regressed'] / opts.trials:.0%} of all"
        )
        for why, n in reasons.get((step, metric), Counter()).most_common(3):
            print(f"{'':<20}inconclusive x{n}: {why}")
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = out / f"gate-{stamp}.json"
    path.write_text(json.dumps({"options": vars(opts), "records": records}, indent=1) + "\n")
    print(f"\nrecords: {path}")


if __name__ == "__main__":
    main()
